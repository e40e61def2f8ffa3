package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/apps"
	"github.com/levee-gw/levee/internal/clusterstore"
	"github.com/levee-gw/levee/internal/discovery"
)

// This file shares pushed endpoints and held updates through etcd
// (cluster.etcd). A push to any node's admin API is stored in etcd first
// (clusterstore.PutPush: the body as sent) and only then offered to this
// node's feed; every other node's feed gets it from its watch. Each node
// runs the body through its own firewall and delta guard, so a bad
// instance is quarantined and counted on every node and a suspicious
// update is held on every node. A confirmation is stored too, naming the
// push it releases (clusterstore.PutConfirm), and every node releases that
// push's hold when it sees it. While etcd does not take the write, the
// push or confirmation answers 503 store_unavailable and no node changes.

// sharedPush is what a push feed has applied of the shared pushes. Its
// mutex serialises applying pushes and confirmations to the feed (from
// the admin API and from the watch) so that they apply in revision order
// and each at most once: a revision at or below the one applied is not
// offered again.
type sharedPush struct {
	mu        sync.Mutex
	rev       int64 // the push last offered to this feed; 0: none yet
	res       admin.PushResult
	err       error
	confirmed int64 // the push whose confirmation was applied here
	conf      admin.ConfirmResult
	confErr   error
}

// pushShared stores body as the upstream's shared push and applies it
// here. A list refused whole is not shared: it changes nothing anywhere,
// and this node refuses it as without a cluster (counting its
// rejections).
func (f *feed) pushShared(g *Gateway, s *clusterstore.Store, body []byte) (admin.PushResult, error) {
	if !slices.Contains(clusterstore.Shared(pushHandler{g}.Wanted()), f.upstream) {
		return admin.PushResult{}, &admin.PushRefusedError{Reason: "not_shared", Err: fmt.Errorf(
			"upstream %s is not among the first %d push upstreams by name, whose pushes cluster mode shares; nothing changed", f.upstream, clusterstore.MaxPushUpstreams)}
	}
	u, err := discovery.ParseList(body, feedLimits(&f.cfg))
	if err != nil {
		return pushOutcome(f.Push(body, time.Now()))
	}
	rev, err := s.PutPush(context.Background(), f.upstream, body)
	if err != nil {
		return admin.PushResult{}, sharedStoreError(err)
	}
	res, superseded, err := f.applyPush(rev, body, time.Now())
	if superseded {
		// Another node's later push reached this node first: this one
		// was stored and is already replaced everywhere.
		return admin.PushResult{Instances: len(u.Instances), Rejected: rejectionViews(u.Rejected)}, nil
	}
	return res, err
}

// applyPush offers the push of revision rev to the feed unless it (or a
// later one) was offered already; it returns what offering rev did, or
// superseded when a later push was offered first.
func (f *feed) applyPush(rev int64, body []byte, now time.Time) (res admin.PushResult, superseded bool, err error) {
	sh := &f.shared
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case rev == sh.rev:
		return sh.res, false, sh.err
	case rev < sh.rev:
		return admin.PushResult{}, true, nil
	}
	res, err = pushOutcome(f.Push(body, now))
	sh.rev, sh.res, sh.err = rev, res, err
	return res, false, err
}

// confirmShared stores the confirmation of the push held here and
// releases it here; the other nodes release it when their watch delivers
// the confirmation.
func (f *feed) confirmShared(s *clusterstore.Store) (admin.ConfirmResult, error) {
	f.shared.mu.Lock()
	pushRev := f.shared.rev
	f.shared.mu.Unlock()
	if pushRev == 0 || f.State().Held == nil {
		return admin.ConfirmResult{}, admin.ErrNothingHeld
	}
	if err := s.PutConfirm(context.Background(), f.upstream, pushRev); err != nil {
		return admin.ConfirmResult{}, sharedStoreError(err)
	}
	return f.applyConfirm(pushRev, time.Now())
}

// applyConfirm releases the hold of push pushRev if that push is the one
// offered here and its confirmation was not applied yet.
func (f *feed) applyConfirm(pushRev int64, now time.Time) (admin.ConfirmResult, error) {
	sh := &f.shared
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case pushRev == sh.confirmed:
		return sh.conf, sh.confErr
	case pushRev != sh.rev:
		return admin.ConfirmResult{}, admin.ErrNothingHeld // a later push replaced it
	}
	sh.confirmed = pushRev
	sh.conf, sh.confErr = admin.ConfirmResult{}, admin.ErrNothingHeld
	if d, ok := f.Confirm(now); ok {
		sh.conf, sh.confErr = admin.ConfirmResult{DropFraction: d.DropFraction, HeldFor: d.HeldFor}, nil
	}
	return sh.conf, sh.confErr
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
		_, _, _ = f.applyPush(rev, body, time.Now())
	}
}

func (h pushHandler) Confirmed(upstream string, pushRev int64) {
	if f := h.pushFeed(upstream); f != nil {
		_, _ = f.applyConfirm(pushRev, time.Now())
	}
}

// pushFollow is the gateway's follower of shared pushes: the store it
// follows and how to stop it.
type pushFollow struct {
	mu    sync.Mutex
	store *clusterstore.Store
	stop  func()
}

// syncPushes follows the shared pushes of the current etcd store (at
// Start, and after a reload, which may have added push upstreams: they
// are read again). Not called with g.mu held: stopping a follower waits
// for an apply that may be waiting for g.mu.
func (g *Gateway) syncPushes() {
	s := g.etcd.store.Load()
	p := &g.etcd.pushes
	p.mu.Lock()
	defer p.mu.Unlock()
	if s != nil && s == p.store {
		s.ResyncPushes()
		return
	}
	if p.stop != nil {
		p.stop()
	}
	p.store, p.stop = s, nil
	if s != nil {
		p.stop = s.FollowPushes(pushHandler{g})
	}
}

// stopPushes stops following shared pushes (at Shutdown, before the feeds
// stop).
func (g *Gateway) stopPushes() {
	p := &g.etcd.pushes
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop != nil {
		p.stop()
	}
	p.store, p.stop = nil, nil
}
