package dataapis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/levee-gw/levee/internal/statedb"
)

// This file is the store's lifecycle rules over an in-memory model, for a
// store kept elsewhere than SQLite (cluster.etcd: package clusterstore
// keeps a Model in etcd, one key per API, and every node follows it). The
// rules are the SQLite Store's: the same transitions, bounds, eviction
// and seeding precedence (model_test.go gives both the same random calls
// and compares every outcome and snapshot).

// Backend is a data-API store as the gateway and the admin API use it:
// the SQLite Store (one node) or a shared one (cluster.etcd).
type Backend interface {
	Current() *Snapshot
	Get(ctx context.Context, name string) (*API, error)
	List(ctx context.Context, after string, limit int) (Page, error)
	Resolve(ctx context.Context, name string, v int, rollback bool) (int, []byte, error)
	Create(ctx context.Context, name string, def []byte) (*API, error)
	AddVersion(ctx context.Context, name string, def []byte) (*API, error)
	Publish(ctx context.Context, name string, v int) (*API, error)
	Rollback(ctx context.Context, name string, v int) (*API, error)
	Offline(ctx context.Context, name string) (*API, error)
	Delete(ctx context.Context, name string) error
	Seed(ctx context.Context, file []FileAPI) (SeedResult, error)
	Close() error
}

var _ Backend = (*Store)(nil)

// ErrUnavailable: a shared store cannot take a change now (etcd does not
// answer); nothing changed. The admin API answers 503 store_unavailable.
var ErrUnavailable = errors.New("the shared data-API store is unavailable")

// NodeStatus is what one node serves of one data API (cluster.etcd):
// the version it serves (0: none) and, when that is not the published
// one, why (the compile error). API is the data API (the status value
// in etcd carries it; GET /api/v1/data-apis/{name} leaves it out).
type NodeStatus struct {
	Node    string `json:"node"`
	API     string `json:"api,omitempty"`
	Version int    `json:"version"`
	State   string `json:"state"` // NodeServing, NodePrevious, NodeFailed, NodeNotServing
	// Published is the version the store publishes (0: none).
	Published int    `json:"published_version,omitempty"`
	Error     string `json:"error,omitempty"`
}

// Entry is one API of a Model: the API with its versions (oldest first)
// and the file definition last seeded.
type Entry struct {
	API
	FileHash string `json:"file_hash,omitempty"`
}

// Model is the whole data-API store in memory: APIs by name and the
// tombstones of file APIs deleted at runtime (name: the file
// definition's hash). Its methods change it in place; Clone before a
// change that may be abandoned (entries are replaced, never changed in
// place, so a Clone shares them safely).
type Model struct {
	APIs       map[string]*Entry `json:"apis"`
	Tombstones map[string]string `json:"tombstones"`
}

// NewModel returns an empty model.
func NewModel() *Model {
	return &Model{APIs: map[string]*Entry{}, Tombstones: map[string]string{}}
}

// Clone copies the maps (the entries are shared: they are replaced, not
// changed).
func (m *Model) Clone() *Model {
	c := &Model{APIs: make(map[string]*Entry, len(m.APIs)), Tombstones: make(map[string]string, len(m.Tombstones))}
	for k, v := range m.APIs {
		c.APIs[k] = v
	}
	for k, v := range m.Tombstones {
		c.Tombstones[k] = v
	}
	return c
}

// CheckEntry checks an entry read from outside (etcd, a file): its name,
// state, versions and their definitions within the bounds.
func CheckEntry(name string, e *Entry) error {
	if err := checkName(name); err != nil {
		return err
	}
	if e.Name != name {
		return fmt.Errorf("entry names %q under %q", e.Name, name)
	}
	switch e.State {
	case Draft, Published, Offline:
	default:
		return fmt.Errorf("state %q", e.State)
	}
	if len(e.Versions) == 0 || len(e.Versions) > MaxVersions {
		return fmt.Errorf("%d versions; 1 to %d", len(e.Versions), MaxVersions)
	}
	for i, v := range e.Versions {
		if i > 0 && v.Version <= e.Versions[i-1].Version {
			return errors.New("versions out of order")
		}
		if err := checkDefinition(v.Definition); err != nil {
			return fmt.Errorf("version %d: %w", v.Version, err)
		}
	}
	if last := e.Versions[len(e.Versions)-1].Version; e.Versions[0].Version < 1 || e.Latest < last || e.Published < 0 || e.Published > e.Latest {
		return fmt.Errorf("versions %d to %d, latest %d, published %d", e.Versions[0].Version, last, e.Latest, e.Published)
	}
	if e.State == Published && e.version(e.Published) == nil {
		return fmt.Errorf("published version %d is not kept", e.Published)
	}
	return nil
}

// version returns version v of e, nil if not kept.
func (e *Entry) version(v int) *Version {
	for i := range e.Versions {
		if e.Versions[i].Version == v {
			return &e.Versions[i]
		}
	}
	return nil
}

// copyEntry returns a copy of e that may be changed (its versions copied).
func copyEntry(e *Entry) *Entry {
	c := *e
	c.Versions = slices.Clone(e.Versions)
	return &c
}

// view returns the API as Get shows it, with versions when withVersions.
func (e *Entry) view(withVersions bool) *API {
	a := e.API
	a.Versions = nil
	if withVersions {
		a.Versions = slices.Clone(e.Versions)
	}
	return &a
}

// Snapshot returns what serves and the counts, as Store.Current does.
func (m *Model) Snapshot() *Snapshot {
	snap := &Snapshot{Count: map[State]int{Draft: 0, Published: 0, Offline: 0}, Runtime: map[string]bool{}}
	names := make([]string, 0, len(m.APIs))
	for n := range m.APIs {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		e := m.APIs[n]
		snap.Count[e.State]++
		if e.Source == SourceAPI || e.Overridden {
			snap.Runtime[n] = true
		}
		if e.State == Published {
			if v := e.version(e.Published); v != nil {
				snap.Serving = append(snap.Serving, Serving{Name: n, Version: v.Version, Definition: v.Definition})
			}
		}
	}
	return snap
}

// Get returns API name with its versions.
func (m *Model) Get(name string) (*API, error) {
	e := m.APIs[name]
	if e == nil {
		return nil, fmt.Errorf("data API %q: %w", name, ErrNotFound)
	}
	return e.view(true), nil
}

// List is Store.List over the model.
func (m *Model) List(after string, limit int) Page {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	limit = min(limit, MaxPageSize)
	names := make([]string, 0, len(m.APIs))
	for n := range m.APIs {
		if n > after {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	p := Page{APIs: []*API{}}
	for _, n := range names {
		if len(p.APIs) == limit {
			p.Next = p.APIs[limit-1].Name
			break
		}
		p.APIs = append(p.APIs, m.APIs[n].view(false))
	}
	return p
}

// Resolve is Store.Resolve over the model.
func (m *Model) Resolve(name string, v int, rollback bool) (int, []byte, error) {
	e := m.APIs[name]
	if e == nil {
		return 0, nil, fmt.Errorf("data API %q: %w", name, ErrNotFound)
	}
	v, err := e.target(v, rollback)
	if err != nil {
		return 0, nil, err
	}
	ver := e.version(v)
	if ver == nil {
		return 0, nil, fmt.Errorf("data API %q has no version %d: %w", name, v, ErrNotFound)
	}
	return v, ver.Definition, nil
}

// target is the SQLite store's target over an entry.
func (e *Entry) target(v int, rollback bool) (int, error) {
	if !rollback {
		if v == 0 {
			v = e.Latest
		}
		return v, nil
	}
	name, cur := e.Name, e.Published
	if cur == 0 {
		return 0, fmt.Errorf("data API %q was never published; publish a version: %w", name, ErrConflict)
	}
	if v >= cur {
		return 0, fmt.Errorf("a rollback goes to a version before %d (the published one), got %d; publish a later version instead: %w", cur, v, ErrConflict)
	}
	if v > 0 {
		return v, nil
	}
	for i := len(e.Versions) - 1; i >= 0; i-- {
		if e.Versions[i].Version < cur {
			return e.Versions[i].Version, nil
		}
	}
	return 0, fmt.Errorf("data API %q keeps no version before %d: %w", name, cur, ErrConflict)
}

// Create is Store.Create over the model.
func (m *Model) Create(name string, def []byte, now time.Time) (*API, error) {
	if err := errors.Join(checkName(name), checkDefinition(def)); err != nil {
		return nil, err
	}
	if m.APIs[name] != nil {
		return nil, fmt.Errorf("data API %q: %w", name, ErrExists)
	}
	if n := len(m.APIs); n >= MaxAPIs {
		return nil, fmt.Errorf("the store holds %d data APIs, the most it may: %w", n, ErrConflict)
	}
	delete(m.Tombstones, name)
	e := newEntry(name, Draft, SourceAPI, "", def, now)
	m.APIs[name] = e
	return e.view(true), nil
}

func newEntry(name string, st State, source, fileHash string, def []byte, now time.Time) *Entry {
	e := &Entry{API: API{Name: name, State: st, Latest: 1, Source: source, Created: now, Updated: now}, FileHash: fileHash}
	if st == Published {
		e.Published = 1
	}
	e.Versions = []Version{{Version: 1, Source: source, Created: now, Definition: def}}
	return e
}

// addVersion appends def as e.Latest+1, first evicting the oldest
// version but the published one when e keeps MaxVersions.
func (e *Entry) addVersion(def []byte, source string, now time.Time) int {
	if len(e.Versions) >= MaxVersions {
		for i, v := range e.Versions {
			if v.Version != e.Published {
				e.Versions = slices.Delete(e.Versions, i, i+1)
				break
			}
		}
	}
	e.Latest++
	e.Versions = append(e.Versions, Version{Version: e.Latest, Source: source, Created: now, Definition: def})
	e.Updated = now
	return e.Latest
}

// change runs fn on a copy of API name, then records the runtime change
// (Store.change) and returns the API after.
func (m *Model) change(name string, now time.Time, fn func(e *Entry) error) (*API, error) {
	old := m.APIs[name]
	if old == nil {
		return nil, fmt.Errorf("data API %q: %w", name, ErrNotFound)
	}
	e := copyEntry(old)
	if err := fn(e); err != nil {
		return nil, err
	}
	e.Updated, e.Overridden = now, e.Source == SourceFile
	m.APIs[name] = e
	return e.view(true), nil
}

// AddVersion is Store.AddVersion over the model.
func (m *Model) AddVersion(name string, def []byte, now time.Time) (*API, error) {
	if err := checkDefinition(def); err != nil {
		return nil, err
	}
	return m.change(name, now, func(e *Entry) error {
		e.addVersion(def, SourceAPI, now)
		return nil
	})
}

// Transition is Store.Publish (rollback false) or Store.Rollback over
// the model.
func (m *Model) Transition(name string, v int, rollback bool, now time.Time) (*API, error) {
	return m.change(name, now, func(e *Entry) error {
		v, err := e.target(v, rollback)
		if err != nil {
			return err
		}
		return e.publish(v)
	})
}

func (e *Entry) publish(v int) error {
	if e.version(v) == nil {
		return fmt.Errorf("data API %q has no version %d: %w", e.Name, v, ErrNotFound)
	}
	e.State, e.Published = Published, v
	return nil
}

// Offline is Store.Offline over the model.
func (m *Model) Offline(name string, now time.Time) (*API, error) {
	return m.change(name, now, func(e *Entry) error {
		if e.State != Published {
			return fmt.Errorf("data API %q is %s, not published: %w", name, e.State, ErrConflict)
		}
		e.State = Offline
		return nil
	})
}

// Delete is Store.Delete over the model.
func (m *Model) Delete(name string) error {
	e := m.APIs[name]
	if e == nil {
		return fmt.Errorf("data API %q: %w", name, ErrNotFound)
	}
	if e.Source == SourceFile && e.FileHash != "" {
		m.Tombstones[name] = e.FileHash
	}
	delete(m.APIs, name)
	return nil
}

// Seed is Store.Seed over the model (every API at once: the caller
// commits the whole change or none). warn receives the warnings.
func (m *Model) Seed(file []FileAPI, now time.Time, warn func(msg string, args ...any)) (SeedResult, error) {
	res := SeedResult{Failed: map[string]error{}}
	if len(file) > MaxAPIs {
		return res, fmt.Errorf("the file defines %d data routes; at most %d", len(file), MaxAPIs)
	}
	listed := make(map[string]bool, len(file))
	for _, fa := range file {
		listed[fa.Name] = true
		action, err := m.seedOne(fa, now, warn)
		if err != nil {
			res.Failed[fa.Name] = err
			continue
		}
		res.Record(action, fa.Name)
	}
	names := make([]string, 0, len(m.APIs))
	for n, e := range m.APIs {
		if e.Source == SourceFile && !listed[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		if e := m.APIs[n]; e.Overridden {
			warn("data APIs: the file no longer lists this data route, but it was changed at runtime and is kept; delete it through the admin API", "data_api", n)
			c := copyEntry(e)
			c.PendingFileChange = true
			m.APIs[n] = c
			res.KeptRuntime = append(res.KeptRuntime, n)
			continue
		}
		delete(m.APIs, n)
		res.Removed = append(res.Removed, n)
	}
	for n := range m.Tombstones {
		if !listed[n] {
			delete(m.Tombstones, n)
		}
	}
	return res, nil
}

func (m *Model) seedOne(fa FileAPI, now time.Time, warn func(msg string, args ...any)) (statedb.Action, error) {
	if err := errors.Join(checkName(fa.Name), checkDefinition(fa.Definition)); err != nil {
		return 0, err
	}
	hash := DefinitionHash(fa.Definition)
	old := m.APIs[fa.Name]
	e := statedb.Entry{Exists: old != nil}
	if old == nil {
		e.Tombstone = m.Tombstones[fa.Name]
	} else {
		e.FileHash, e.FromFile, e.Overridden = old.FileHash, old.Source == SourceFile, old.Overridden
	}
	action := statedb.Decide(e, hash)
	switch action {
	case statedb.StayDeleted:
	case statedb.Create:
		if n := len(m.APIs); n >= MaxAPIs {
			return 0, fmt.Errorf("the store holds %d data APIs, the most it may: %w", n, ErrConflict)
		}
		delete(m.Tombstones, fa.Name)
		m.APIs[fa.Name] = newEntry(fa.Name, Published, SourceFile, hash, fa.Definition, now)
	case statedb.Unchanged:
		if old.PendingFileChange {
			c := copyEntry(old)
			c.PendingFileChange = false
			m.APIs[fa.Name] = c
		}
	case statedb.Apply:
		c := copyEntry(old)
		v := c.addVersion(fa.Definition, SourceFile, now)
		if err := c.publish(v); err != nil {
			return 0, err
		}
		c.FileHash, c.PendingFileChange = hash, false
		m.APIs[fa.Name] = c
	default: // statedb.KeepRuntime
		why := "changed at runtime since the file last seeded it"
		if old.Source == SourceAPI {
			why = "created through the admin API"
		}
		warn("data APIs: the file's definition of this data route changed but was not applied: the data API was "+why+
			"; delete it through the admin API to take the file's version", "data_api", fa.Name)
		c := copyEntry(old)
		c.PendingFileChange = true
		m.APIs[fa.Name] = c
	}
	return action, nil
}

// EncodeEntry is an entry's stored form (JSON).
func EncodeEntry(e *Entry) ([]byte, error) { return json.Marshal(e) }

// FitEntry returns e's stored form, at most limit bytes: when it is
// larger, the oldest versions but the published one are evicted from e
// (changed in place: the caller's new entry) until it fits; a
// *InvalidError if even the published and latest versions alone do not.
func FitEntry(e *Entry, limit int) ([]byte, error) {
	for range MaxVersions + 1 {
		b, err := EncodeEntry(e)
		if err != nil {
			return nil, err
		}
		if len(b) <= limit {
			return b, nil
		}
		evicted := false
		for i, v := range e.Versions {
			if v.Version != e.Published && v.Version != e.Latest {
				e.Versions = slices.Delete(e.Versions, i, i+1)
				evicted = true
				break
			}
		}
		if !evicted {
			return nil, invalid("definition", fmt.Sprintf("data API %s's kept versions take %d bytes; a shared store (cluster.etcd) keeps at most %d per data API", e.Name, len(b), limit))
		}
	}
	return nil, invalid("definition", "data API "+e.Name+" does not fit the shared store")
}

// The states of a node's status (NodeStatus.State).
const (
	// NodeServing: the node serves the published version.
	NodeServing = "serving"
	// NodePrevious: the node could not compile the published version and
	// serves the one it served before (NodeStatus.Version).
	NodePrevious = "previous"
	// NodeFailed: the node could not compile the published version and
	// serves nothing of the API.
	NodeFailed = "failed"
	// NodeNotServing: the API is not published, or the node has not
	// reported it.
	NodeNotServing = "not_serving"
)
