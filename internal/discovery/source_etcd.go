package discovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
)

// Defaults for EtcdOptions' zero fields.
const (
	DefaultEtcdDialTimeout    = 2 * time.Second
	DefaultEtcdRequestTimeout = 5 * time.Second
	DefaultEtcdProbeInterval  = time.Second
	DefaultEtcdBackoffMin     = 100 * time.Millisecond
	DefaultEtcdBackoffMax     = 5 * time.Second
	DefaultEtcdDebounce       = 50 * time.Millisecond
	// etcdPageSize is how many keys one Get returns; a full load is
	// several Gets pinned to one revision.
	etcdPageSize = 1000
)

// EtcdOptions configures an EtcdSource. Zero durations mean the defaults.
type EtcdOptions struct {
	// Endpoints are the etcd client URLs ("http://10.0.0.1:2379" or
	// "10.0.0.1:2379"). Required.
	Endpoints []string
	// Prefix is the directory of instance keys, e.g.
	// "/levee/services/video/". Each key under it holds one instance
	// (ParseInstance); the key's last element is only an id. Required; it
	// must end in "/" so "/video" does not also match "/video-canary".
	Prefix string
	// DialTimeout bounds the client's connection-time operations. 0 means
	// DefaultEtcdDialTimeout (2s).
	DialTimeout time.Duration
	// RequestTimeout bounds every request (each page of a load, each
	// probe). 0 means DefaultEtcdRequestTimeout (5s).
	RequestTimeout time.Duration
	// ProbeInterval is how often a watching source checks that etcd still
	// answers (a one-key read). A watch alone does not notice that etcd is
	// gone: the client re-opens it silently. A failed probe marks the
	// source disconnected and starts a resync. 0 means
	// DefaultEtcdProbeInterval (1s).
	ProbeInterval time.Duration
	// BackoffMin and BackoffMax bound the jittered exponential wait
	// between attempts to reach etcd and between resyncs. 0 means
	// DefaultEtcdBackoffMin (100ms) and DefaultEtcdBackoffMax (5s).
	BackoffMin, BackoffMax time.Duration
	// Debounce batches watch events: the first event of a batch schedules
	// one delivery Debounce later that carries them all. 0 means
	// DefaultEtcdDebounce (50ms).
	Debounce time.Duration
	// Limits bound each value (ParseInstance) and the number of keys
	// (MaxInstances: more keys refuse the whole state). MaxPayloadBytes
	// also caps the size of one etcd response message.
	Limits Limits
}

// EtcdSource watches one upstream's instances in etcd v3: one key per
// instance under a prefix. Run loads every key (pinned to one revision),
// delivers the full state, then watches from the next revision and
// delivers the full state again after each batch of changes. It resyncs
// (a fresh load, then a new watch) when the watch ends, when the watched
// revision was compacted, and when etcd stops answering probes; while etcd
// is unreachable it retries with a jittered exponential backoff between
// BackoffMin and BackoffMax and delivers nothing, so the caller keeps its
// last good set.
//
// Each key goes through ParseInstance; a rejected key is listed in
// Update.Rejected with Key the etcd key. Keys are taken in key order, and a
// key whose address an earlier accepted key already has is rejected as
// duplicate_address. More than Limits.MaxInstances keys, or keys that are
// all rejected, deliver an Event with Err.
//
// Connected is safe for concurrent use; Run may not be called concurrently
// with itself.
type EtcdSource struct {
	o         EtcdOptions
	name      string
	connected atomic.Bool
	// beforeWatch, when set (tests), is called after each successful load
	// and its delivery, before the watch from rev+1 starts.
	beforeWatch func(rev int64)
}

var _ Source = (*EtcdSource)(nil)

// NewEtcdSource checks o and returns a source. It does not connect.
func NewEtcdSource(o EtcdOptions) (*EtcdSource, error) {
	var errs []error
	if len(o.Endpoints) == 0 {
		errs = append(errs, errors.New("endpoints: at least one is required"))
	}
	for i, e := range o.Endpoints {
		if strings.TrimSpace(e) == "" {
			errs = append(errs, fmt.Errorf("endpoints[%d]: empty", i))
		}
	}
	if o.Prefix == "" || !strings.HasSuffix(o.Prefix, "/") {
		errs = append(errs, fmt.Errorf("prefix %q: must be non-empty and end in \"/\"", o.Prefix))
	}
	for _, d := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"dial timeout", &o.DialTimeout, DefaultEtcdDialTimeout},
		{"request timeout", &o.RequestTimeout, DefaultEtcdRequestTimeout},
		{"probe interval", &o.ProbeInterval, DefaultEtcdProbeInterval},
		{"backoff min", &o.BackoffMin, DefaultEtcdBackoffMin},
		{"backoff max", &o.BackoffMax, DefaultEtcdBackoffMax},
		{"debounce", &o.Debounce, DefaultEtcdDebounce},
	} {
		if *d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must be 0 (default) or more, got %v", d.name, *d.v))
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if o.BackoffMin > o.BackoffMax {
		errs = append(errs, fmt.Errorf("backoff min %v is more than backoff max %v", o.BackoffMin, o.BackoffMax))
	}
	l, err := o.Limits.resolve()
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("discovery: etcd source %s: %w", o.Prefix, errors.Join(errs...))
	}
	o.Limits = l
	o.Endpoints = slices.Clone(o.Endpoints)
	return &EtcdSource{o: o, name: "etcd:" + o.Prefix}, nil
}

// Name is the Event.Source of this source's events: "etcd:" and the
// prefix.
func (s *EtcdSource) Name() string { return s.name }

// Connected reports whether the last attempt to reach etcd (a load or a
// probe) succeeded: false before Run, while etcd is down and after Run
// returns. The gateway's readiness uses it.
func (s *EtcdSource) Connected() bool { return s.connected.Load() }

// Run connects to etcd and delivers states until ctx is done, then closes
// the client and returns nil. It returns an error only when the client
// cannot be built from the options. It blocks; see Source.
func (s *EtcdSource) Run(ctx context.Context, deliver func(Event)) error {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   s.o.Endpoints,
		DialTimeout: s.o.DialTimeout,
		// The source has its own backoff loop: the client's retries would
		// only hide an outage for up to RequestTimeout.
		MaxUnaryRetries:    2,
		MaxCallRecvMsgSize: s.o.Limits.MaxPayloadBytes + 64<<10,
		Logger:             zap.NewNop(),
		Context:            ctx,
		// gRPC's own reconnect backoff grows to 120s by default, which
		// would keep the source away from an etcd that is back; bound it
		// like the source's.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpcConnectParams(s.o.BackoffMin, s.o.BackoffMax, s.o.DialTimeout))},
	})
	if err != nil {
		return fmt.Errorf("discovery: etcd source %s: %w", s.o.Prefix, err)
	}
	defer cli.Close()
	defer s.connected.Store(false)
	r := &etcdRun{s: s, cli: cli, deliver: deliver, timer: newStoppedTimer()}
	defer r.timer.Stop()
	r.loop(ctx)
	return nil
}

// grpcConnectParams is gRPC's reconnect backoff bounded by min and max.
func grpcConnectParams(minDelay, maxDelay, connectTimeout time.Duration) grpc.ConnectParams {
	return grpc.ConnectParams{
		Backoff: grpcbackoff.Config{
			BaseDelay:  minDelay,
			Multiplier: 1.6,
			Jitter:     0.2,
			MaxDelay:   maxDelay,
		},
		MinConnectTimeout: connectTimeout,
	}
}

// etcdEntry is one key's parsed value: an instance or its rejection.
type etcdEntry struct {
	inst Instance
	rej  *Rejection
}

// etcdRun is one Run's state, owned by its goroutine.
type etcdRun struct {
	s       *EtcdSource
	cli     *clientv3.Client
	deliver func(Event)
	timer   *time.Timer // backoff waits and watch batches, never both at once

	// state maps each key under the prefix to its parsed value. It holds at
	// most MaxInstances keys; beyond that it is dropped and overLimit set,
	// and every change triggers a fresh load instead.
	state     map[string]etcdEntry
	overLimit bool
}

// loop alternates loads and watches until ctx is done. The backoff grows
// with each failed load or short-lived watch and is reset once a watch has
// lasted BackoffMax, so a watch that fails at once cannot make it spin.
func (r *etcdRun) loop(ctx context.Context) {
	bo := backoff{min: r.s.o.BackoffMin, max: r.s.o.BackoffMax}
	var wait time.Duration
	for {
		if wait > 0 && !sleep(ctx, r.timer, wait) {
			return
		}
		rev, err := r.load(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			r.s.connected.Store(false)
			wait = bo.next()
			continue
		}
		r.s.connected.Store(true)
		r.deliverState()
		if r.s.beforeWatch != nil {
			r.s.beforeWatch(rev)
		}
		start := time.Now()
		r.watch(ctx, rev)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) >= r.s.o.BackoffMax {
			bo.reset()
		}
		wait = bo.next()
	}
}

// load reads every key under the prefix, in pages pinned to the first
// page's revision, into a new state, and returns that revision.
func (r *etcdRun) load(ctx context.Context) (int64, error) {
	end := clientv3.GetPrefixRangeEnd(r.s.o.Prefix)
	state := make(map[string]etcdEntry)
	from := r.s.o.Prefix
	var rev int64
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(etcdPageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		rctx, cancel := context.WithTimeout(ctx, r.s.o.RequestTimeout)
		resp, err := r.cli.Get(rctx, from, opts...)
		cancel()
		if err != nil {
			return 0, err
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			if len(state) >= r.s.o.Limits.MaxInstances {
				r.state, r.overLimit = nil, true
				return rev, nil
			}
			state[string(kv.Key)] = r.parse(kv.Key, kv.Value)
		}
		if !resp.More || len(resp.Kvs) == 0 {
			break
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
	r.state, r.overLimit = state, false
	return rev, nil
}

func (r *etcdRun) parse(key, value []byte) etcdEntry {
	inst, rej := ParseInstance(string(key), value, r.s.o.Limits)
	return etcdEntry{inst: inst, rej: rej}
}

// watch follows changes from rev+1, delivering the full state after each
// batch, and returns when a resync is needed (or ctx is done).
func (r *etcdRun) watch(ctx context.Context, rev int64) {
	// WithRequireLeader ends the watch when the member loses its leader,
	// instead of leaving it open on a partitioned member.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	// Watch blocks until the server has created the watch, which never
	// happens while etcd is down: bound it by RequestTimeout.
	created := time.AfterFunc(r.s.o.RequestTimeout, cancel)
	wch := r.cli.Watch(wctx, r.s.o.Prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	if !created.Stop() {
		r.s.connected.Store(false)
		return
	}
	probe := time.NewTicker(r.s.o.ProbeInterval)
	defer probe.Stop()
	pending := false // a delivery is scheduled on r.timer
	defer func() {
		if pending {
			r.timer.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case resp, ok := <-wch:
			if !ok || resp.Canceled || resp.CompactRevision != 0 || resp.Err() != nil {
				return // closed, compacted past rev, or failed: resync
			}
			for _, ev := range resp.Events {
				r.apply(ev)
			}
			if len(resp.Events) > 0 && !pending {
				r.timer.Reset(r.s.o.Debounce)
				pending = true
			}
		case <-r.timer.C:
			pending = false
			if r.overLimit {
				return // the state was dropped: load it again
			}
			r.deliverState()
		case <-probe.C:
			if r.cli.ActiveConnection().GetState() == connectivity.TransientFailure {
				// The connection is known broken: no need to wait for a
				// request to time out.
				r.s.connected.Store(false)
				return
			}
			pctx, pcancel := context.WithTimeout(ctx, r.s.o.RequestTimeout)
			_, err := r.cli.Get(pctx, r.s.o.Prefix, clientv3.WithKeysOnly())
			pcancel()
			if err != nil {
				r.s.connected.Store(false)
				return
			}
			r.s.connected.Store(true)
		}
	}
}

// apply records one watch event in the state.
func (r *etcdRun) apply(ev *clientv3.Event) {
	if r.overLimit {
		return
	}
	key := string(ev.Kv.Key)
	switch ev.Type {
	case clientv3.EventTypeDelete:
		delete(r.state, key)
	case clientv3.EventTypePut:
		if _, ok := r.state[key]; !ok && len(r.state) >= r.s.o.Limits.MaxInstances {
			r.state, r.overLimit = nil, true
			return
		}
		r.state[key] = r.parse(ev.Kv.Key, ev.Kv.Value)
	}
}

// deliverState delivers the current state as one Event: instances and
// rejections in key order, later duplicates of an accepted address
// rejected. Work is O(n log n) in the number of keys.
func (r *etcdRun) deliverState() {
	ev := Event{Source: r.s.name}
	if r.overLimit {
		ev.Err = payloadErr(ErrTooLarge, CodeTooManyInstances, "more than %d keys under %s", r.s.o.Limits.MaxInstances, r.s.o.Prefix)
		r.deliver(ev)
		return
	}
	keys := make([]string, 0, len(r.state))
	for k := range r.state {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	u := Update{Instances: make([]Instance, 0, len(keys))}
	seen := make(map[string]string, len(keys))
	for _, k := range keys {
		e := r.state[k]
		if e.rej != nil {
			u.Rejected = append(u.Rejected, *e.rej)
			continue
		}
		if first, dup := seen[e.inst.Address]; dup {
			u.Rejected = append(u.Rejected, Rejection{Key: k, Reason: ReasonDuplicateAddress, Field: "address",
				Raw: truncateRaw([]byte(strconv.Quote(e.inst.Address))), Message: "address " + e.inst.Address + " is also under key " + first})
			continue
		}
		seen[e.inst.Address] = k
		u.Instances = append(u.Instances, e.inst)
	}
	if len(keys) > 0 && len(u.Instances) == 0 {
		u.Instances = nil
		ev.Err = payloadErr(ErrAllRejected, CodeAllRejected, "all %d keys under %s were rejected", len(keys), r.s.o.Prefix)
	}
	ev.Update = u
	r.deliver(ev)
}
