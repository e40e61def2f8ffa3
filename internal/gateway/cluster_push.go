package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/clusterstore"
	"github.com/levee-gw/levee/internal/discovery"
)

// This file wires the shared pushes of cluster.etcd: the ordering rules
// (store first, then apply, in revision order, each at most once) are
// discovery's (discovery/shared.go) over the clusterstore.Store; here the
// admin API's push and confirm reach them with the admin request's context,
// and the store's watch is followed into this gateway's push feeds.

// pushShared stores body as the upstream's shared push and applies it
// here (discovery.Feed.PushShared), refusing an upstream whose pushes the
// cluster does not share.
func (f *feed) pushShared(ctx context.Context, g *Gateway, s *clusterstore.Store, body []byte) (admin.PushResult, error) {
	if !slices.Contains(clusterstore.Shared(pushHandler{g}.Wanted()), f.upstream) {
		return admin.PushResult{}, &admin.PushRefusedError{Reason: "not_shared", Err: fmt.Errorf(
			"upstream %s is not among the first %d push upstreams by name, whose pushes cluster mode shares; nothing changed", f.upstream, clusterstore.MaxPushUpstreams)}
	}
	res, err := f.PushShared(ctx, s, body, time.Now())
	if errors.Is(err, discovery.ErrSharedStore) {
		return admin.PushResult{}, sharedStoreError(err)
	}
	return pushOutcome(res, err)
}

// confirmShared stores the confirmation of the push held here and
// releases it here (discovery.Feed.ConfirmShared).
func (f *feed) confirmShared(ctx context.Context, s *clusterstore.Store) (admin.ConfirmResult, error) {
	d, err := f.ConfirmShared(ctx, s, time.Now())
	switch {
	case errors.Is(err, discovery.ErrSharedStore):
		return admin.ConfirmResult{}, sharedStoreError(err)
	case errors.Is(err, discovery.ErrNothingHeld):
		return admin.ConfirmResult{}, admin.ErrNothingHeld
	case err != nil:
		return admin.ConfirmResult{}, err
	}
	return admin.ConfirmResult{DropFraction: d.DropFraction, HeldFor: d.HeldFor}, nil
}

// sharedStoreError is a clusterstore write error as the admin API's.
func sharedStoreError(err error) error {
	switch {
	case errors.Is(err, clusterstore.ErrPushTooLarge):
		return fmt.Errorf("%w: %w", admin.ErrPushTooLarge, err)
	case errors.Is(err, clusterstore.ErrPushReplaced):
		return fmt.Errorf("%w: %w", admin.ErrNothingHeld, err)
	case errors.Is(err, apps.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %w", admin.ErrStoreUnavailable, err)
	}
	return err
}

// pushHandler applies the shared pushes the watch delivers to this
// gateway's push feeds.
type pushHandler struct{ g *Gateway }

func (h pushHandler) pushFeed(name string) *feed {
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	if f := h.g.feeds[name]; f != nil && f.TakesPushes() {
		return f
	}
	return nil
}

// Wanted lists the push feeds: the upstreams whose shared values this
// node reads (bounded by the configuration's upstreams).
func (h pushHandler) Wanted() []string {
	h.g.mu.Lock()
	defer h.g.mu.Unlock()
	var out []string
	for name, f := range h.g.feeds {
		if f.TakesPushes() {
			out = append(out, name)
		}
	}
	return out
}

func (h pushHandler) Pushed(upstream string, rev int64, body []byte) {
	if f := h.pushFeed(upstream); f != nil {
		_, _, _ = f.ApplyShared(rev, body, time.Now())
	}
}

func (h pushHandler) Confirmed(upstream string, pushRev int64) {
	if f := h.pushFeed(upstream); f != nil {
		_, _ = f.ApplySharedConfirm(pushRev, time.Now())
	}
}

// syncPushes follows the shared pushes of the current etcd store (at
// Start, and after a reload, which may have added push upstreams). Not
// called with g.mu held: stopping a follower waits for an apply that may
// be waiting for g.mu.
func (g *Gateway) syncPushes() { g.etcd.pushes.Sync(g.etcd.store.Load(), pushHandler{g}) }
