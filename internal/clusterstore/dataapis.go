package clusterstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"github.com/levee-gw/levee/internal/dataapis"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file keeps the data-API store in etcd (docs/cluster.md, "Data
// APIs"): a dataapis.Backend every node follows with a watch, the last
// state saved under state_dir, and what each node serves of each API.
//
// Layout under the prefix P:
//
//	P dataapis/apis/<name>        one API with its kept versions: dataapis.Entry as JSON
//	P dataapis/tombstones/<name>  a file API deleted at runtime: its definition's hash
//	P dataapis/version            written by every change (the optimistic lock, as state/version)
//	P data-api-nodes/<node id>    what that node serves: []dataapis.NodeStatus, leased
//
// The node statuses live outside dataapis/ so that the watch of the
// store does not wake every node for them.

// Bounds of the shared data-API store.
const (
	// maxEntryBytes caps one API's value (its kept versions together): a
	// change that would make it larger first evicts the oldest versions
	// but the published one, and is refused (422) if that is not enough.
	// etcd refuses requests over 1.5 MiB by default.
	maxEntryBytes = 1 << 20
	// maxStatusBytes caps one node's status value read back.
	maxStatusBytes = 4 << 20
)

// DataAPIOptions configure the shared data-API store.
type DataAPIOptions struct {
	// StateFile keeps the last state applied, read at start when etcd
	// does not answer (levee uses <state_dir>/cluster-data-apis.json).
	StateFile string
	// OnChange receives every new snapshot, in order, from one
	// goroutine, before a write waiting for it returns.
	OnChange func(*dataapis.Snapshot)
}

// DataAPIs is the data-API store kept in etcd. Safe for concurrent use.
type DataAPIs struct {
	s    *Store
	o    DataAPIOptions
	quit chan struct{}
	done sync.WaitGroup

	mu       sync.Mutex // guards everything below
	cond     *sync.Cond // broadcast when rev advances
	model    *dataapis.Model
	snap     *dataapis.Snapshot
	rev      int64 // etcd revision model reflects (0: from disk or empty)
	fromDisk bool  // serving the state saved on this node (etcd not read yet)
	pending  []dataapis.FileAPI
	hasSeed  bool
	closed   bool
	status   []dataapis.NodeStatus // this node's, as last reported
	statusCh chan struct{}         // a new status to write
}

var _ dataapis.Backend = (*DataAPIs)(nil)

// errDataDown is what a write gets while etcd is known to be unreachable.
var errDataDown = fmt.Errorf("etcd is unreachable: %w", dataapis.ErrUnavailable)

// OpenDataAPIs reads the shared data-API store within DialTimeout or,
// failing that, the state last saved in o.StateFile, and follows it. It
// fails only on an unreadable StateFile.
func (s *Store) OpenDataAPIs(o DataAPIOptions) (*DataAPIs, error) {
	d := &DataAPIs{s: s, o: o, quit: make(chan struct{}), statusCh: make(chan struct{}, 1)}
	d.cond = sync.NewCond(&d.mu)
	ctx, cancel := context.WithTimeout(context.Background(), s.o.DialTimeout)
	m, rev, err := d.load(ctx)
	cancel()
	if err == nil {
		d.apply(m, rev)
	} else {
		disk, rerr := readModelFile(o.StateFile)
		if rerr != nil {
			return nil, rerr
		}
		s.log.Warn("etcd unreachable at start: serving the data APIs saved on this node", "file", o.StateFile, "data_apis", len(disk.APIs), "error", err)
		d.mu.Lock()
		d.fromDisk = true
		d.mu.Unlock()
		d.apply(disk, 0)
	}
	d.done.Add(2)
	go d.followLoop()
	go d.statusLoop()
	return d, nil
}

// Close stops following and removes this node's status. The last
// snapshot stays readable. The Store is closed by its owner.
func (d *DataAPIs) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	d.cond.Broadcast()
	d.mu.Unlock()
	close(d.quit)
	d.done.Wait()
	return nil
}

// Current returns the latest snapshot; it never blocks on etcd.
func (d *DataAPIs) Current() *dataapis.Snapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snap
}

// FromDisk reports whether this node serves the state it saved (etcd
// not read since start).
func (d *DataAPIs) FromDisk() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.fromDisk
}

func (d *DataAPIs) current() *dataapis.Model {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.model
}

// load reads the whole store at one revision: O(APIs), bounded by
// MaxAPIs (more keys are refused).
func (d *DataAPIs) load(ctx context.Context) (*dataapis.Model, int64, error) {
	limit := int64(2*dataapis.MaxAPIs + 2)
	resp, err := d.s.cli.Get(clientv3.WithRequireLeader(ctx), d.s.key("dataapis/"), clientv3.WithPrefix(), clientv3.WithLimit(limit))
	if err != nil {
		return nil, 0, err
	}
	if resp.More {
		return nil, 0, fmt.Errorf("more than %d keys under %s", limit, d.s.key("dataapis/"))
	}
	m := dataapis.NewModel()
	for _, kv := range resp.Kvs {
		d.put(m, string(kv.Key), kv.Value)
	}
	return m, resp.Header.Revision, nil
}

// put applies one key's value to m; a value that is not valid is left
// out and logged (it came from outside levee's own writes).
func (d *DataAPIs) put(m *dataapis.Model, key string, value []byte) {
	switch {
	case strings.HasPrefix(key, d.s.key("dataapis/apis/")):
		name := strings.TrimPrefix(key, d.s.key("dataapis/apis/"))
		e, err := decodeEntry(name, value)
		if err != nil {
			d.s.log.Error("etcd: a data API's value is not valid; the data API is left out", "key", key, "error", err)
			delete(m.APIs, name)
			return
		}
		m.APIs[name] = e
	case strings.HasPrefix(key, d.s.key("dataapis/tombstones/")):
		m.Tombstones[strings.TrimPrefix(key, d.s.key("dataapis/tombstones/"))] = string(value)
	}
}

func (d *DataAPIs) del(m *dataapis.Model, key string) {
	switch {
	case strings.HasPrefix(key, d.s.key("dataapis/apis/")):
		delete(m.APIs, strings.TrimPrefix(key, d.s.key("dataapis/apis/")))
	case strings.HasPrefix(key, d.s.key("dataapis/tombstones/")):
		delete(m.Tombstones, strings.TrimPrefix(key, d.s.key("dataapis/tombstones/")))
	}
}

// decodeEntry parses and checks the value of data API name: strict JSON,
// at most maxEntryBytes, within the store's bounds (dataapis.CheckEntry).
func decodeEntry(name string, value []byte) (*dataapis.Entry, error) {
	if len(value) > maxEntryBytes {
		return nil, fmt.Errorf("%d bytes, at most %d", len(value), maxEntryBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.DisallowUnknownFields()
	var e dataapis.Entry
	if err := dec.Decode(&e); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON value")
	}
	if err := dataapis.CheckEntry(name, &e); err != nil {
		return nil, err
	}
	return &e, nil
}

// apply makes m (at revision rev; 0 from disk) the state served: hands
// its snapshot to OnChange, then wakes the writes waiting for rev, and
// saves it to StateFile.
func (d *DataAPIs) apply(m *dataapis.Model, rev int64) {
	snap := m.Snapshot()
	d.mu.Lock()
	d.model, d.snap = m, snap
	if rev > 0 {
		d.fromDisk = false
	}
	d.mu.Unlock()
	if d.o.OnChange != nil {
		d.o.OnChange(snap)
	}
	d.mu.Lock()
	if rev > d.rev {
		d.rev = rev
	}
	d.cond.Broadcast()
	d.mu.Unlock()
	if rev > 0 && d.o.StateFile != "" {
		if err := writeModelFile(d.o.StateFile, m); err != nil {
			d.s.log.Error("data APIs: saving the shared state to disk failed", "file", d.o.StateFile, "error", err)
		}
	}
}

// followLoop keeps the model in step with etcd: each whole read applied
// (and a seed that waited for etcd made), each watch response applied to
// a copy. A watch response's events are bounded by etcd's own response
// size (maxRecvBytes).
func (d *DataAPIs) followLoop() {
	defer d.done.Done()
	var m *dataapis.Model
	d.s.follow(&follower{
		what: "the shared data APIs", prefix: d.s.key("dataapis/"), resync: d.s.dataSync, quit: d.quit,
		load: func(ctx context.Context) (int64, error) {
			loaded, rev, err := d.load(ctx)
			if err != nil {
				return 0, err
			}
			d.s.setUp(true, "")
			m = loaded
			d.apply(m, rev)
			d.seedPending()
			return rev, nil
		},
		events: func(evs []*clientv3.Event, rev int64) {
			m = m.Clone()
			for _, ev := range evs {
				if ev.Type == clientv3.EventTypeDelete {
					d.del(m, string(ev.Kv.Key))
				} else {
					d.put(m, string(ev.Kv.Key), ev.Kv.Value)
				}
			}
			d.apply(m, rev)
		},
	})
}

// Get returns API name with its versions and what each live node serves
// of it (Nodes; this node's alone when etcd does not answer).
func (d *DataAPIs) Get(ctx context.Context, name string) (*dataapis.API, error) {
	a, err := d.current().Get(name)
	if err != nil {
		return nil, err
	}
	a.Nodes = d.nodes(ctx, name)
	return a, nil
}

// nodes reads every node's status of API name, in node order, at most
// maxNodes.
func (d *DataAPIs) nodes(ctx context.Context, name string) []dataapis.NodeStatus {
	ctx, cancel := context.WithTimeout(ctx, d.s.o.OpTimeout)
	defer cancel()
	out := []dataapis.NodeStatus{}
	var (
		resp *clientv3.GetResponse
		err  = errDataDown
	)
	if up, _ := d.s.Up(); up {
		resp, err = d.s.cli.Get(clientv3.WithRequireLeader(ctx), d.s.key("data-api-nodes/"), clientv3.WithPrefix(), clientv3.WithLimit(maxNodes))
	}
	if err != nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, st := range d.status {
			if st.API == name {
				out = append(out, st)
			}
		}
		return out
	}
	for _, kv := range resp.Kvs {
		node := strings.TrimPrefix(string(kv.Key), d.s.key("data-api-nodes/"))
		var sts []dataapis.NodeStatus
		if len(kv.Value) > maxStatusBytes || json.Unmarshal(kv.Value, &sts) != nil {
			continue
		}
		found := dataapis.NodeStatus{Node: node, State: dataapis.NodeNotServing}
		for _, st := range sts {
			if st.API == name {
				found = st
				found.Node = node
				break
			}
		}
		out = append(out, found)
	}
	return out
}

// List returns a page of the current state.
func (d *DataAPIs) List(_ context.Context, after string, limit int) (dataapis.Page, error) {
	return d.current().List(after, limit), nil
}

// Resolve is dataapis.Store.Resolve over the current state.
func (d *DataAPIs) Resolve(_ context.Context, name string, v int, rollback bool) (int, []byte, error) {
	return d.current().Resolve(name, v, rollback)
}

// Create, AddVersion, Publish, Rollback, Offline and Delete are the
// SQLite store's, each committed as one etcd transaction.

func (d *DataAPIs) Create(ctx context.Context, name string, def []byte) (out *dataapis.API, err error) {
	err = d.write(ctx, func(m *dataapis.Model) (err error) {
		out, err = m.Create(name, def, d.s.o.Now())
		return err
	})
	return out, err
}

func (d *DataAPIs) AddVersion(ctx context.Context, name string, def []byte) (out *dataapis.API, err error) {
	err = d.write(ctx, func(m *dataapis.Model) (err error) {
		out, err = m.AddVersion(name, def, d.s.o.Now())
		return err
	})
	return out, err
}

func (d *DataAPIs) Publish(ctx context.Context, name string, v int) (*dataapis.API, error) {
	return d.transition(ctx, name, v, false)
}

func (d *DataAPIs) Rollback(ctx context.Context, name string, v int) (*dataapis.API, error) {
	return d.transition(ctx, name, v, true)
}

func (d *DataAPIs) transition(ctx context.Context, name string, v int, rollback bool) (out *dataapis.API, err error) {
	err = d.write(ctx, func(m *dataapis.Model) (err error) {
		out, err = m.Transition(name, v, rollback, d.s.o.Now())
		return err
	})
	return out, err
}

func (d *DataAPIs) Offline(ctx context.Context, name string) (out *dataapis.API, err error) {
	err = d.write(ctx, func(m *dataapis.Model) (err error) {
		out, err = m.Offline(name, d.s.o.Now())
		return err
	})
	return out, err
}

func (d *DataAPIs) Delete(ctx context.Context, name string) error {
	return d.write(ctx, func(m *dataapis.Model) error { return m.Delete(name) })
}

// Seed applies the file's data routes in one transaction: whichever node
// seeds a change first applies it, the others then find it unchanged.
// While etcd is unreachable the file is kept and seeded when etcd answers
// again; the error says so.
func (d *DataAPIs) Seed(ctx context.Context, file []dataapis.FileAPI) (dataapis.SeedResult, error) {
	d.mu.Lock()
	d.pending, d.hasSeed = file, true
	d.mu.Unlock()
	var res dataapis.SeedResult
	err := d.write(ctx, func(m *dataapis.Model) (err error) {
		res, err = m.Seed(file, d.s.o.Now(), d.s.log.Warn)
		return err
	})
	if err != nil {
		return res, fmt.Errorf("seeding the shared data APIs (retried when etcd answers): %w", err)
	}
	d.mu.Lock()
	d.pending, d.hasSeed = nil, false
	d.mu.Unlock()
	return res, nil
}

// seedPending seeds a file Seed could not apply while etcd was away.
func (d *DataAPIs) seedPending() {
	d.mu.Lock()
	file, has := d.pending, d.hasSeed
	d.mu.Unlock()
	if !has {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), d.s.o.OpTimeout)
	defer cancel()
	if _, err := d.Seed(ctx, file); err != nil {
		d.s.log.Error("data APIs: seeding the shared data APIs from the file failed", "error", err)
	}
}

// write applies fn to the shared state and commits what it changed in
// one transaction that holds only if no other write committed since the
// state was read; on a race it reads again, at most writeAttempts times.
// Once committed it waits (within the op timeout) until the change is
// applied here, so the caller's next read, and this node's table, show
// it. While etcd is known to be down it fails at once with
// dataapis.ErrUnavailable; an etcd error or timeout wraps it too.
func (d *DataAPIs) write(ctx context.Context, fn func(*dataapis.Model) error) error {
	if up, _ := d.s.Up(); !up {
		return errDataDown
	}
	ctx, cancel := context.WithTimeout(ctx, d.s.o.OpTimeout)
	defer cancel()
	version := d.s.key("dataapis/version")
	for range writeAttempts {
		resp, err := d.s.cli.Get(clientv3.WithRequireLeader(ctx), version)
		if err != nil {
			return dataUnavailable(err)
		}
		m, rev, err := d.load(ctx)
		if err != nil {
			return dataUnavailable(err)
		}
		var vrev int64
		if len(resp.Kvs) > 0 {
			vrev = resp.Kvs[0].ModRevision
		}
		next := m.Clone()
		if err := fn(next); err != nil {
			return err
		}
		ops, err := d.diff(m, next)
		if err != nil {
			return err
		}
		if len(ops) == 0 {
			return nil
		}
		ops = append(ops, clientv3.OpPut(version, fmt.Sprint(rev)))
		tr, err := d.s.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(version), "=", vrev)).Then(ops...).Commit()
		if err != nil {
			return dataUnavailable(err)
		}
		if !tr.Succeeded {
			continue
		}
		d.waitRev(ctx, tr.Header.Revision)
		return nil
	}
	return fmt.Errorf("the shared data-API store is busy with other writes; retry: %w", dataapis.ErrUnavailable)
}

func dataUnavailable(err error) error {
	return fmt.Errorf("etcd: %w (%w)", dataapis.ErrUnavailable, err)
}

// diff returns the puts and deletes that turn from into to (entries
// compared by pointer: the model's writes replace them). An entry over
// maxEntryBytes first loses its oldest versions but the published one
// (dataapis.Entry.Fit); one still too large is refused.
func (d *DataAPIs) diff(from, to *dataapis.Model) ([]clientv3.Op, error) {
	var ops []clientv3.Op
	names := make([]string, 0, len(to.APIs))
	for name := range to.APIs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		e := to.APIs[name]
		if from.APIs[name] == e {
			continue
		}
		b, err := dataapis.FitEntry(e, maxEntryBytes)
		if err != nil {
			return nil, err
		}
		ops = append(ops, clientv3.OpPut(d.s.key("dataapis/apis/", name), string(b)))
	}
	for name := range from.APIs {
		if to.APIs[name] == nil {
			ops = append(ops, clientv3.OpDelete(d.s.key("dataapis/apis/", name)))
		}
	}
	for name, h := range to.Tombstones {
		if old, ok := from.Tombstones[name]; !ok || old != h {
			ops = append(ops, clientv3.OpPut(d.s.key("dataapis/tombstones/", name), h))
		}
	}
	for name := range from.Tombstones {
		if _, ok := to.Tombstones[name]; !ok {
			ops = append(ops, clientv3.OpDelete(d.s.key("dataapis/tombstones/", name)))
		}
	}
	return ops, nil
}

// waitRev waits until the state applied here is at rev or later, or ctx
// ends (the write has committed either way).
func (d *DataAPIs) waitRev(ctx context.Context, rev int64) {
	stop := context.AfterFunc(ctx, func() {
		d.mu.Lock()
		d.cond.Broadcast()
		d.mu.Unlock()
	})
	defer stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	for d.rev < rev && ctx.Err() == nil && !d.closed {
		d.cond.Wait()
	}
}

// readModelFile reads the state saved by writeModelFile; a missing file
// is an empty state. Each entry is checked as one read from etcd.
func readModelFile(path string) (*dataapis.Model, error) {
	m := dataapis.NewModel()
	if path == "" {
		return m, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return m, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster.etcd: reading the saved data APIs: %w", err)
	}
	if err := json.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("cluster.etcd: the saved data APIs %s are corrupt (delete the file to start empty): %w", path, err)
	}
	if m.APIs == nil {
		m.APIs = map[string]*dataapis.Entry{}
	}
	if m.Tombstones == nil {
		m.Tombstones = map[string]string{}
	}
	for name, e := range m.APIs {
		if e == nil || dataapis.CheckEntry(name, e) != nil {
			delete(m.APIs, name)
		}
	}
	return m, nil
}

// writeModelFile saves m atomically (a temporary file renamed), mode 0600.
func writeModelFile(path string, m *dataapis.Model) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".cluster-data-apis-*")
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
