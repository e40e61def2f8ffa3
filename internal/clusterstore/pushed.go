package clusterstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file shares the endpoint lists pushed to the admin API
// (discovery: {push: true}) and the operator's confirmations of held ones:
//
//	P endpoints/<upstream>            the last body pushed, as sent (a JSON
//	                                  array of instances); its ModRevision
//	                                  names the push
//	P endpoints/<upstream>/confirmed  the ModRevision of the push an operator
//	                                  confirmed, in decimal
//
// The body is stored raw, not parsed: every node runs it through its own
// discovery firewall and delta guard, so a bad instance is quarantined and
// counted on every node and a suspicious update is held on every node,
// exactly as if it had been pushed to each. A confirmation names the push
// it releases, so it can never release a later push that replaced it.
//
// The store knows nothing of discovery: the gateway's PushHandler parses
// and applies.

// MaxPushBytes caps a shared pushed body: etcd refuses a request larger
// than its --max-request-bytes (1.5 MiB by default), so a larger push
// could not reach the other nodes. A body of 1 MiB holds some 20,000
// instances.
const MaxPushBytes = 1 << 20

// ErrPushTooLarge: a pushed body over MaxPushBytes.
var ErrPushTooLarge = fmt.Errorf("in cluster mode a pushed endpoint list may be at most %d bytes (etcd's request limit)", MaxPushBytes)

// MaxPushUpstreams caps the upstreams whose pushes a node shares: the
// first MaxPushUpstreams of its push upstreams by name (Shared). A node
// reads and keeps state for those only (two reads each at a whole read,
// one revision and one result each in the gateway), whatever other keys
// etcd holds under P endpoints/; a push to any other upstream must be
// refused, not applied on one node alone.
const MaxPushUpstreams = 1024

// Shared returns the upstreams of wanted whose pushes are shared: sorted,
// at most MaxPushUpstreams.
func Shared(wanted []string) []string {
	out := append([]string(nil), wanted...)
	sort.Strings(out)
	return out[:min(len(out), MaxPushUpstreams)]
}

// confirmSuffix ends the key of a confirmation.
const confirmSuffix = "/confirmed"

// PushHandler applies the shared pushes of the upstreams it takes, each
// call from one goroutine, in etcd's revision order. A whole re-read (at
// start, after compaction or an outage) calls Pushed and Confirmed again
// for the current values: the handler skips a revision it already applied.
type PushHandler interface {
	// Wanted lists the upstreams this node takes pushes for: only the
	// values of Shared(Wanted()) are read (the bound on what a node holds:
	// its own push upstreams, at most MaxPushUpstreams, each value at most
	// MaxPushBytes).
	Wanted() []string
	// Pushed: upstream's endpoints key holds body since revision rev.
	Pushed(upstream string, rev int64, body []byte)
	// Confirmed: an operator confirmed upstream's push of revision
	// pushRev. A whole re-read hands the standing confirmation even when
	// it names an older push than the last: the handler ignores that.
	Confirmed(upstream string, pushRev int64)
}

// pushFollow is the Store's state of following pushes.
type pushFollow struct {
	resync chan struct{} // the probe's "etcd came back"; FollowPushes' re-read
	mu     sync.Mutex
	quit   chan struct{} // closed by the stop FollowPushes returns
	done   chan struct{} // closed when the follow goroutine returned
}

// FollowPushes applies the shared pushes to h until the returned stop is
// called (or Close): every wanted upstream's values are read at one
// revision, then a watch on P endpoints/ delivers each change; the
// compaction, reconnect and backoff handling are the apps' (follow). At
// most one follower runs; a second call returns a no-op stop.
func (s *Store) FollowPushes(h PushHandler) (stop func()) {
	p := &s.pushes
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.quit != nil {
		return func() {}
	}
	p.quit, p.done = make(chan struct{}), make(chan struct{})
	f := &follower{
		what: "the pushed endpoints", prefix: s.key("endpoints/"), resync: p.resync, quit: p.quit,
		load: func(ctx context.Context) (int64, error) { return s.loadPushes(ctx, h) },
		events: func(evs []*clientv3.Event, _ int64) {
			wanted := wantedSet(h)
			for _, ev := range evs {
				if ev.Type != clientv3.EventTypePut {
					continue // a deleted push: the last one keeps serving
				}
				s.deliver(h, wanted, string(ev.Kv.Key), ev.Kv.ModRevision, ev.Kv.Value)
			}
		},
	}
	quit, done := p.quit, p.done
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		close(done)
		return func() {}
	}
	s.done.Add(1) // Close waits for it too
	s.mu.Unlock()
	go func() {
		defer s.done.Done()
		defer close(done)
		s.follow(f)
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

// ResyncPushes asks the follower to read every wanted upstream again (a
// reload added a push upstream).
func (s *Store) ResyncPushes() {
	select {
	case s.pushes.resync <- struct{}{}:
	default:
	}
}

func wantedSet(h PushHandler) map[string]bool {
	m := map[string]bool{}
	for _, u := range Shared(h.Wanted()) {
		m[u] = true
	}
	return m
}

// loadPushes reads each wanted upstream's push and confirmation at one
// revision (the first read's) and delivers them, pushes first. Work: two
// reads per wanted upstream, bounded by the configuration's upstreams.
func (s *Store) loadPushes(ctx context.Context, h PushHandler) (int64, error) {
	ctx = clientv3.WithRequireLeader(ctx)
	wanted := Shared(h.Wanted())
	// Any read names the current revision; this key is never written.
	resp, err := s.cli.Get(ctx, s.key("endpoints/"), clientv3.WithCountOnly())
	if err != nil {
		return 0, err
	}
	rev := resp.Header.Revision
	s.setUp(true, "")
	type got struct {
		key   string
		rev   int64
		value []byte
	}
	var confirms []got
	for _, u := range wanted {
		for _, key := range []string{s.key("endpoints/", u), s.key("endpoints/", u, confirmSuffix)} {
			r, err := s.cli.Get(ctx, key, clientv3.WithRev(rev))
			if err != nil {
				return 0, err
			}
			if len(r.Kvs) == 0 {
				continue
			}
			g := got{key, r.Kvs[0].ModRevision, r.Kvs[0].Value}
			if strings.HasSuffix(key, confirmSuffix) {
				confirms = append(confirms, g)
			} else {
				s.deliver(h, nil, g.key, g.rev, g.value)
			}
		}
	}
	for _, g := range confirms {
		s.deliver(h, nil, g.key, g.rev, g.value)
	}
	return rev, nil
}

// deliver hands one key's value to h if it is a wanted upstream's (wanted
// nil: every key given is wanted) and valid; an invalid value is logged
// and left out (it did not come from levee's own writes).
func (s *Store) deliver(h PushHandler, wanted map[string]bool, key string, rev int64, value []byte) {
	upstream, confirm, ok := parsePushKey(strings.TrimPrefix(key, s.key("endpoints/")))
	if !ok || (wanted != nil && !wanted[upstream]) {
		return
	}
	if confirm {
		pushRev, err := decodeConfirm(value)
		if err != nil {
			s.log.Error("etcd: a push confirmation is not valid; left out", "key", key, "error", err)
			return
		}
		h.Confirmed(upstream, pushRev)
		return
	}
	if len(value) > MaxPushBytes {
		s.log.Error("etcd: a pushed endpoint list is too large; left out", "key", key, "bytes", len(value), "max", MaxPushBytes)
		return
	}
	h.Pushed(upstream, rev, value)
}

// parsePushKey splits a key under P endpoints/ (the prefix removed) into
// its upstream and whether it is a confirmation; ok is false for a key
// levee does not write. Upstream names hold no "/" (limits.ValidID), so
// the split is unambiguous; the handler's Wanted decides which names count.
func parsePushKey(rest string) (upstream string, confirm, ok bool) {
	if u, found := strings.CutSuffix(rest, confirmSuffix); found {
		rest, confirm = u, true
	}
	if rest == "" || len(rest) > 64 || strings.Contains(rest, "/") {
		return "", false, false
	}
	return rest, confirm, true
}

// decodeConfirm parses a confirmation's value: a revision in plain
// decimal, 1 or more, no sign, no spaces, no leading zero.
func decodeConfirm(value []byte) (int64, error) {
	if len(value) == 0 || len(value) > 19 || value[0] == '0' {
		return 0, fmt.Errorf("want a revision in plain decimal, got %q", truncate(value))
	}
	for _, c := range value {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("want a revision in plain decimal, got %q", truncate(value))
		}
	}
	return strconv.ParseInt(string(value), 10, 64)
}

func truncate(b []byte) []byte { return b[:min(len(b), 40)] }

// PutPush stores body as upstream's pushed endpoint list and returns the
// revision that names the push. While etcd is known to be down it fails
// at once with apps.ErrUnavailable (wrapped); an etcd error or timeout
// wraps it too, and then no node has the push (a put either commits or
// does not).
func (s *Store) PutPush(ctx context.Context, upstream string, body []byte) (int64, error) {
	if len(body) > MaxPushBytes {
		return 0, ErrPushTooLarge
	}
	if up, _ := s.Up(); !up {
		return 0, errDown
	}
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), s.o.OpTimeout)
	defer cancel()
	resp, err := s.cli.Put(ctx, s.key("endpoints/", upstream), string(body))
	if err != nil {
		return 0, unavailable(err)
	}
	return resp.Header.Revision, nil
}

// ErrPushReplaced: a confirmation named a push that a later push replaced.
var ErrPushReplaced = errors.New("the held push was replaced by a later one")

// PutConfirm records that an operator confirmed upstream's push of
// revision pushRev, in one transaction that holds only while that push is
// still the upstream's last (else ErrPushReplaced). Errors as PutPush's.
func (s *Store) PutConfirm(ctx context.Context, upstream string, pushRev int64) error {
	if up, _ := s.Up(); !up {
		return errDown
	}
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), s.o.OpTimeout)
	defer cancel()
	key := s.key("endpoints/", upstream)
	tr, err := s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", pushRev)).
		Then(clientv3.OpPut(key+confirmSuffix, strconv.FormatInt(pushRev, 10))).Commit()
	if err != nil {
		return unavailable(err)
	}
	if !tr.Succeeded {
		return ErrPushReplaced
	}
	return nil
}

// PushFollower follows the shared pushes of whichever Store is current
// (the gateway's: open from Start to Shutdown) for one handler. The zero
// value is ready; safe for concurrent use.
type PushFollower struct {
	mu    sync.Mutex
	store *Store
	stop  func()
}

// Sync follows s's pushes for h: at start, and after a reload, which may
// have added push upstreams (a store already followed reads them again,
// ResyncPushes). s nil stops following. Not to be called while h's calls
// wait for the caller: stopping a follower waits for its call in progress.
func (f *PushFollower) Sync(s *Store, h PushHandler) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s != nil && s == f.store {
		s.ResyncPushes()
		return
	}
	if f.stop != nil {
		f.stop()
	}
	f.store, f.stop = s, nil
	if s != nil {
		f.stop = s.FollowPushes(h)
	}
}

// Stop stops following (at Shutdown, before the handler's feeds stop).
func (f *PushFollower) Stop() { f.Sync(nil, nil) }
