package discovery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// This file holds the ordering rules of a push feed's shared pushes
// (cluster.etcd, docs/cluster.md): a push to any node is stored first
// (SharedStore.PutPush: the body as sent, named by the store's revision)
// and only then offered to this node's feed; every other node's feed gets
// it from its watch (ApplyShared). Each node runs the body through its own
// firewall and delta guard, so a bad instance is quarantined and counted
// on every node and a suspicious update is held on every node. A
// confirmation is stored too, naming the push it releases
// (SharedStore.PutConfirm), and every node releases that push's hold when
// it sees it (ApplySharedConfirm). While the store does not take the
// write, the push or confirmation fails with ErrSharedStore and no node
// changes.

// SharedStore stores a cluster's pushes and confirmations
// (clusterstore.Store). Both take the caller's context: the admin
// request's, so a client gone cancels the write.
type SharedStore interface {
	PutPush(ctx context.Context, upstream string, body []byte) (rev int64, err error)
	PutConfirm(ctx context.Context, upstream string, pushRev int64) error
}

// ErrSharedStore wraps the store's error when it did not take a push or a
// confirmation: nothing changed on any node.
var ErrSharedStore = errors.New("the shared store did not take the write")

// ErrNothingHeld: a confirmation found no held update of the last push
// (none held, or a later push replaced it).
var ErrNothingHeld = errors.New("no update is held")

// sharedPush is what a push feed has applied of the shared pushes. Its
// mutex serialises applying pushes and confirmations to the feed (from
// the admin API and from the watch) so that they apply in revision order
// and each at most once: a revision at or below the one applied is not
// offered again. Not held with Feed.mu; Push and Confirm take that one.
type sharedPush struct {
	mu        sync.Mutex
	rev       int64 // the push last offered to this feed; 0: none yet
	res       PushResult
	err       error
	confirmed int64 // the push whose confirmation was applied here
	conf      Decision
	confErr   error
}

// PushShared stores body in st as the feed's shared push and applies it
// here. A list refused whole is not shared: it changes nothing anywhere,
// and this node refuses it as without a cluster (Push, counting its
// rejections). When a later push (another node's) reached this feed
// first, this one was stored and is already replaced everywhere: the
// result then has its instance and rejection counts and no decision.
func (f *Feed) PushShared(ctx context.Context, st SharedStore, body []byte, now time.Time) (PushResult, error) {
	u, err := ParseList(body, f.o.Limits)
	if err != nil {
		return f.Push(body, now)
	}
	rev, err := st.PutPush(ctx, f.o.Upstream, body)
	if err != nil {
		return PushResult{}, fmt.Errorf("%w: %w", ErrSharedStore, err)
	}
	res, superseded, err := f.ApplyShared(rev, body, now)
	if superseded {
		return PushResult{Instances: len(u.Instances), Rejected: u.Rejected}, nil
	}
	return res, err
}

// ApplyShared offers the push of revision rev to the feed unless it (or a
// later one) was offered already; it returns what offering rev did, or
// superseded when a later push was offered first.
func (f *Feed) ApplyShared(rev int64, body []byte, now time.Time) (res PushResult, superseded bool, err error) {
	sh := &f.shared
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case rev == sh.rev:
		return sh.res, false, sh.err
	case rev < sh.rev:
		return PushResult{}, true, nil
	}
	res, err = f.Push(body, now)
	sh.rev, sh.res, sh.err = rev, res, err
	return res, false, err
}

// ConfirmShared stores in st the confirmation of the push held here and
// releases it here; the other nodes release it when their watch delivers
// the confirmation. ErrNothingHeld without a held shared push.
func (f *Feed) ConfirmShared(ctx context.Context, st SharedStore, now time.Time) (Decision, error) {
	f.shared.mu.Lock()
	pushRev := f.shared.rev
	f.shared.mu.Unlock()
	if pushRev == 0 || f.State().Held == nil {
		return Decision{}, ErrNothingHeld
	}
	if err := st.PutConfirm(ctx, f.o.Upstream, pushRev); err != nil {
		return Decision{}, fmt.Errorf("%w: %w", ErrSharedStore, err)
	}
	return f.ApplySharedConfirm(pushRev, now)
}

// ApplySharedConfirm releases the hold of push pushRev if that push is the
// one offered here and its confirmation was not applied yet (a second
// delivery answers as the first did).
func (f *Feed) ApplySharedConfirm(pushRev int64, now time.Time) (Decision, error) {
	sh := &f.shared
	sh.mu.Lock()
	defer sh.mu.Unlock()
	switch {
	case pushRev == sh.confirmed:
		return sh.conf, sh.confErr
	case pushRev != sh.rev:
		return Decision{}, ErrNothingHeld // a later push replaced it
	}
	sh.confirmed = pushRev
	sh.conf, sh.confErr = Decision{}, ErrNothingHeld
	if d, ok := f.Confirm(now); ok {
		sh.conf, sh.confErr = d, nil
	}
	return sh.conf, sh.confErr
}
