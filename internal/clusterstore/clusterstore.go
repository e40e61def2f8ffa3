// Package clusterstore is cluster mode's etcd half (cluster.etcd): the
// consumer apps every node shares (an apps.Backend kept in etcd, watched by
// every node, with the last state kept on disk), the endpoint lists pushed
// to the admin API and their confirmations (pushed.go), and the membership
// of the live nodes (a key per node under a lease).
//
// Layout under the prefix P:
//
//	P state/apps/<id>        one app: apps.Record as JSON (key and password
//	                         digests only; certificate mappings; creds.go)
//	P state/tombstones/<id>  a file app deleted at runtime: its definition's hash
//	P state/version          written by every change; a write commits only if
//	                         it is unchanged since the state it read (one
//	                         etcd transaction), so no change is lost
//	P endpoints/<upstream>   a pushed endpoint list, as sent (pushed.go)
//	P endpoints/<upstream>/confirmed  the revision of the push confirmed
//	P nodes/<node id>        a live node: {id, version, admin, since}, leased
//	P dataapis/...           the data APIs and what each node serves (dataapis.go)
//
// The request path never waits on etcd: it reads the immutable
// apps.Snapshot each applied change publishes (Options.OnChange).
package clusterstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/apps"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
)

// Options configure a Store.
type Options struct {
	// Endpoints, Prefix, LeaseTTL, DialTimeout and OpTimeout are
	// cluster.etcd's (config.ClusterEtcd); all required.
	Endpoints              []string
	Prefix                 string
	LeaseTTL               time.Duration
	DialTimeout, OpTimeout time.Duration
	// StateFile keeps the last state applied, read at start when etcd does
	// not answer (levee uses <state_dir>/cluster-apps.json).
	StateFile string
	// OnChange receives every new snapshot, in order, from one goroutine.
	OnChange func(*apps.Snapshot)
	// Node is this node as the membership lists it (set by Join).
	Node Node
	// Logger receives state changes; nil: discarded.
	Logger *slog.Logger
	// Now is the clock of timestamps (default time.Now).
	Now func() time.Time
}

// Node is one live node of GET /api/v1/cluster.
type Node struct {
	ID      string    `json:"id"`
	Version string    `json:"version"`
	Admin   string    `json:"admin"`
	Since   time.Time `json:"since"`
}

// Bounds of what the store reads from etcd.
const (
	// maxValueBytes caps one value (an app with the most keys and grants
	// fits in far less); a larger one is left out and logged.
	maxValueBytes = 1 << 20
	// maxNodes caps the nodes one listing reads.
	maxNodes = 1000
	// maxRecvBytes caps one etcd response (a full state read).
	maxRecvBytes = 256 << 20
	// writeAttempts bounds the optimistic retries of one write.
	writeAttempts = 5
	// probeEvery is how often the node list is read, which is also the
	// probe that notices etcd gone.
	probeEvery = time.Second
	backoffMin = 100 * time.Millisecond
	backoffMax = 2 * time.Second
)

// errDown is what a write gets while etcd is known to be unreachable.
var errDown = fmt.Errorf("etcd is unreachable: %w", apps.ErrUnavailable)

// Store is the shared app store and this node's membership. Safe for
// concurrent use.
type Store struct {
	o   Options // o.Node is set by Join
	cli *clientv3.Client
	log *slog.Logger

	mu        sync.Mutex // guards everything below
	cond      *sync.Cond // broadcast when rev advances
	state     *apps.State
	rev       int64 // etcd revision state reflects (0: from disk or empty)
	snap      *apps.Snapshot
	up        bool
	lastErr   string
	nodes     int
	pending   []apps.FileApp // a seed waiting for etcd (nil: none)
	hasSeed   bool
	closed    bool
	joined    bool
	resync    chan struct{} // asks the watch loop to re-read (etcd came back)
	pushes    pushFollow    // the shared pushed endpoints (pushed.go)
	dataSync  chan struct{} // the probe's "etcd came back" for the data APIs (dataapis.go)
	stop      chan struct{}
	done      sync.WaitGroup
	statePath string
}

// Open connects to etcd (without waiting for it), loads the shared state
// within DialTimeout or, failing that, the last state saved in StateFile,
// and starts the watch and the probe (Join adds this node). It fails only on a
// bad configuration or an unreadable StateFile.
func Open(o Options) (*Store, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:          o.Endpoints,
		DialTimeout:        o.DialTimeout,
		MaxUnaryRetries:    2,
		MaxCallRecvMsgSize: maxRecvBytes,
		Logger:             zap.NewNop(),
		// gRPC's reconnect backoff grows to 120s by default: bound it, so
		// that a node finds an etcd that is back within seconds.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           grpcbackoff.Config{BaseDelay: backoffMin, Multiplier: 1.6, Jitter: 0.2, MaxDelay: backoffMax},
			MinConnectTimeout: o.DialTimeout,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("cluster.etcd: %w", err)
	}
	s := &Store{o: o, cli: cli, log: log, state: apps.NewState(), nodes: 1,
		resync: make(chan struct{}, 1), pushes: pushFollow{resync: make(chan struct{}, 1)}, dataSync: make(chan struct{}, 1), stop: make(chan struct{}), statePath: o.StateFile}
	s.cond = sync.NewCond(&s.mu)
	ctx, cancel := context.WithTimeout(context.Background(), o.DialTimeout)
	st, rev, lerr := s.load(ctx)
	cancel()
	if lerr == nil {
		s.apply(st, rev)
		s.setUp(true, "")
	} else {
		s.setUp(false, lerr.Error())
		disk, err := readStateFile(o.StateFile)
		if err != nil {
			cli.Close()
			return nil, err
		}
		log.Warn("etcd unreachable at start: serving the last shared app state saved on this node", "file", o.StateFile,
			"apps", len(disk.Apps), "error", lerr)
		s.apply(disk, 0)
	}
	s.done.Add(2)
	go s.watchLoop()
	go s.probeLoop()
	return s, nil
}

// Close stops the loops, revokes this node's lease (it leaves the list at
// once) and closes the client. The last snapshot stays readable.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.cond.Broadcast()
	s.mu.Unlock()
	close(s.stop)
	s.done.Wait()
	return s.cli.Close()
}

// Current returns the latest snapshot; it never blocks on etcd.
func (s *Store) Current() *apps.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap
}

// Up reports whether etcd answered the last probe, and the last error.
func (s *Store) Up() (bool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.up, s.lastErr
}

// Nodes is the number of live nodes last listed (at least 1).
func (s *Store) Nodes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes
}

// setUp records whether etcd answers; it reports whether etcd just came
// back.
func (s *Store) setUp(up bool, msg string) bool {
	s.mu.Lock()
	was := s.up
	s.up, s.lastErr = up, msg
	s.mu.Unlock()
	switch {
	case was && !up:
		s.log.Error("etcd unreachable: the shared apps keep serving as last seen; admin writes answer 503", "error", msg)
	case !was && up:
		s.log.Info("etcd reachable: shared apps in sync")
		return true
	}
	return false
}

func (s *Store) key(parts ...string) string { return s.o.Prefix + strings.Join(parts, "") }

// load reads the whole shared state at one revision: O(apps), bounded by
// MaxApps (more keys are refused).
func (s *Store) load(ctx context.Context) (*apps.State, int64, error) {
	resp, err := s.cli.Get(ctx, s.key("state/"), clientv3.WithPrefix(), clientv3.WithLimit(2*apps.MaxApps+2))
	if err != nil {
		return nil, 0, err
	}
	if resp.More {
		return nil, 0, fmt.Errorf("more than %d keys under %s", 2*apps.MaxApps+2, s.key("state/"))
	}
	st := apps.NewState()
	for _, kv := range resp.Kvs {
		s.put(st, string(kv.Key), kv.Value)
	}
	return st, resp.Header.Revision, nil
}

// put applies one key's value to st; a value that is not valid is left
// out and logged (it came from outside levee's own writes).
func (s *Store) put(st *apps.State, key string, value []byte) {
	switch {
	case strings.HasPrefix(key, s.key("state/apps/")):
		id := strings.TrimPrefix(key, s.key("state/apps/"))
		r, err := decodeRecord(id, value)
		if err != nil {
			s.log.Error("etcd: an app's value is not valid; the app is left out", "key", key, "error", err)
			delete(st.Apps, id)
			return
		}
		st.Apps[id] = r
	case strings.HasPrefix(key, s.key("state/tombstones/")):
		st.Tombstones[strings.TrimPrefix(key, s.key("state/tombstones/"))] = string(value)
	}
}

// decodeRecord parses and checks the value of app id: strict JSON (no
// unknown field, nothing after it), at most maxValueBytes.
func decodeRecord(id string, value []byte) (*apps.Record, error) {
	if len(value) > maxValueBytes {
		return nil, fmt.Errorf("%d bytes, at most %d", len(value), maxValueBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	var r apps.Record
	if err := dec.Decode(&r); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON value")
	}
	if err := r.Check(id); err != nil {
		return nil, err
	}
	return &r, nil
}

func (s *Store) del(st *apps.State, key string) {
	switch {
	case strings.HasPrefix(key, s.key("state/apps/")):
		delete(st.Apps, strings.TrimPrefix(key, s.key("state/apps/")))
	case strings.HasPrefix(key, s.key("state/tombstones/")):
		delete(st.Tombstones, strings.TrimPrefix(key, s.key("state/tombstones/")))
	}
}

// apply makes st (at revision rev; 0 from disk) the state served:
// publishes its snapshot and saves it to StateFile.
func (s *Store) apply(st *apps.State, rev int64) {
	snap, err := st.Snapshot()
	if err != nil {
		s.log.Error("apps: building the snapshot of the shared state failed; the previous one keeps serving", "error", err)
		return
	}
	for _, c := range snap.Identities().Conflicts() {
		s.log.Error("apps: a key is held by two apps; neither is admitted with it", "conflict", c.What, "key_id", c.Key, "apps", c.Apps[:])
	}
	s.mu.Lock()
	s.state, s.snap = st, snap
	if rev > s.rev {
		s.rev = rev
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	if s.o.OnChange != nil {
		s.o.OnChange(snap)
	}
	if rev > 0 {
		if err := writeStateFile(s.statePath, st); err != nil {
			s.log.Error("apps: saving the shared state to disk failed", "file", s.statePath, "error", err)
		}
	}
}

// readStateFile reads the state saved by writeStateFile; a missing file
// is an empty state.
func readStateFile(path string) (*apps.State, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return apps.NewState(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster.etcd: reading the saved shared state: %w", err)
	}
	st := apps.NewState()
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("cluster.etcd: the saved shared state %s is corrupt (delete it to start empty): %w", path, err)
	}
	if st.Apps == nil {
		st.Apps = map[string]*apps.Record{}
	}
	if st.Tombstones == nil {
		st.Tombstones = map[string]string{}
	}
	return st, nil
}

// writeStateFile saves st atomically (a temporary file renamed), mode 0600:
// it holds key digests.
func writeStateFile(path string, st *apps.State) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cluster-apps-*")
	if err != nil {
		return err
	}
	_, werr := tmp.Write(b)
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func nextBackoff(d time.Duration) time.Duration { return min(max(2*d, backoffMin), backoffMax) }

// follower is one part of the shared state a Store keeps in step with
// etcd: everything under prefix, read whole by load and then changed by
// the watch's events (the apps: state/; pushed endpoints: endpoints/).
type follower struct {
	what   string // for logs
	prefix string
	// load reads and applies the whole part at one revision, which it
	// returns.
	load func(ctx context.Context) (int64, error)
	// events applies one watch response's events, at revision rev.
	events func(evs []*clientv3.Event, rev int64)
	// resync is signalled by the probe when etcd came back: re-read.
	resync chan struct{}
	// quit, when not nil, stops this follower alone (Close stops all).
	quit <-chan struct{}
}

// follow keeps f in step with etcd: a watch from the revision after the
// last whole read; when the watch ends (compacted, canceled, etcd gone
// and back) it reads the whole part again and watches anew, waiting
// backoffMin to backoffMax between failed attempts. It returns at Close
// or when f.quit closes.
func (s *Store) follow(f *follower) {
	wait := time.Duration(0)
	for {
		if wait > 0 && !s.pause(wait, f.quit, f.resync) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.o.OpTimeout)
		rev, err := f.load(ctx)
		cancel()
		if err != nil {
			s.setUp(false, err.Error())
			wait = nextBackoff(wait)
			continue
		}
		wait = backoffMin
		if !s.watch(f, rev) {
			return
		}
	}
}

// pause waits d, or less when wake is signalled (the probe found etcd
// back: retry now rather than after the backoff); false at Close or when
// quit closes.
func (s *Store) pause(d time.Duration, quit <-chan struct{}, wake <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.stop:
		return false
	case <-quit:
		return false
	case <-wake:
		return true
	case <-t.C:
		return true
	}
}

// watch hands f the changes after rev until the watch ends; false when
// stopping.
func (s *Store) watch(f *follower, rev int64) bool {
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(context.Background()))
	defer cancel()
	wch := s.cli.Watch(ctx, f.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for {
		select {
		case <-s.stop:
			return false
		case <-f.quit:
			return false
		case <-f.resync:
			return true
		case resp, ok := <-wch:
			if !ok {
				return true
			}
			if err := resp.Err(); err != nil {
				// ErrCompacted included: re-read the whole part.
				s.log.Warn("etcd watch ended; re-reading "+f.what, "error", err)
				return true
			}
			if len(resp.Events) > 0 {
				f.events(resp.Events, resp.Header.Revision)
			}
		}
	}
}

// watchLoop follows the shared apps: each whole read is applied (and a
// seed that waited for etcd is made), each watch response applied to a
// copy of the state.
func (s *Store) watchLoop() {
	defer s.done.Done()
	var st *apps.State
	s.follow(&follower{
		what: "the shared apps", prefix: s.key("state/"), resync: s.resync,
		load: func(ctx context.Context) (int64, error) {
			loaded, rev, err := s.load(ctx)
			if err != nil {
				return 0, err
			}
			s.setUp(true, "")
			st = loaded
			s.apply(st, rev)
			s.seedPending()
			return rev, nil
		},
		events: func(evs []*clientv3.Event, rev int64) {
			st = st.Clone()
			for _, ev := range evs {
				if ev.Type == clientv3.EventTypeDelete {
					s.del(st, string(ev.Kv.Key))
				} else {
					s.put(st, string(ev.Kv.Key), ev.Kv.Value)
				}
			}
			s.apply(st, rev)
		},
	})
}
