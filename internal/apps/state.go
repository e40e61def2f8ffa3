// State: the app model held in memory, for a store that keeps it
// elsewhere than SQLite (the etcd store of cluster mode, package
// clusterstore). Its writes follow the SQLite store's rules exactly
// (validation, caps, key uniqueness, the seeding precedence of
// docs/apps.md); only where the records live differs.

package apps

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/statedb"
)

// ErrUnavailable: the store cannot take a write now (cluster mode: etcd is
// unreachable), so no node changed. HTTP 503 store_unavailable.
var ErrUnavailable = errors.New("the shared app store is unavailable")

// Backend is an app store as the gateway and the admin API use it: the
// SQLite Store (one node) or cluster mode's shared store. Current never
// blocks; the request path reads only it.
type Backend interface {
	Current() *Snapshot
	Get(ctx context.Context, id string) (*App, error)
	List(ctx context.Context, after string, limit int) (Page, error)
	Create(ctx context.Context, spec Spec) (*App, error)
	Patch(ctx context.Context, id string, p Patch) (*App, error)
	Delete(ctx context.Context, id string) error
	CreateKey(ctx context.Context, id string) (NewKey, error)
	RevokeKey(ctx context.Context, id, keyID string) (Key, error)
	Seed(ctx context.Context, file []FileApp) (SeedResult, error)
	Close() error
}

var _ Backend = (*Store)(nil)

// StoredKey is a key as a shared store keeps it: with its SHA-256, which
// Key does not marshal.
type StoredKey struct {
	Key
	SHA256 string `json:"sha256"`
}

// Record is one app as a shared store keeps it: the app (its Keys left
// out), its keys with their hashes, and the file definition it was last
// seeded from. Records are immutable once in a State.
type Record struct {
	App      App         `json:"app"`
	Keys     []StoredKey `json:"keys"`
	FileHash string      `json:"file_hash,omitempty"`
	// Passwords are the app's basic-auth passwords with their argon2id
	// digests, and Certificates its certificate mappings (both left out
	// of App, which does not marshal digests).
	Passwords    []SharedPassword `json:"passwords,omitempty"`
	Certificates []Certificate    `json:"certificates,omitempty"`
}

// SharedPassword is a password as a shared store keeps it: with its
// digest, which Password does not marshal.
type SharedPassword struct {
	Password
	Digest string `json:"digest"`
}

// State is every app and tombstone of a shared store. Its write methods
// are copy-on-write: a changed app gets a new *Record, so a caller that
// cloned the state (Clone) finds what changed by comparing pointers.
type State struct {
	Apps       map[string]*Record `json:"apps"`
	Tombstones map[string]string  `json:"tombstones"` // id -> file definition hash
}

// NewState returns an empty state.
func NewState() *State {
	return &State{Apps: map[string]*Record{}, Tombstones: map[string]string{}}
}

// Clone returns a copy sharing the records.
func (st *State) Clone() *State {
	return &State{Apps: maps.Clone(st.Apps), Tombstones: maps.Clone(st.Tombstones)}
}

// Snapshot builds the request path's snapshot of st: O(apps + keys).
func (st *State) Snapshot() (*Snapshot, error) {
	byID := make(map[string]*App, len(st.Apps))
	for id, r := range st.Apps {
		byID[id] = r.app()
	}
	return newSnapshot(byID)
}

// app returns r's App with its keys.
func (r *Record) app() *App {
	a := r.App
	a.Keys = make([]Key, len(r.Keys))
	for i, k := range r.Keys {
		a.Keys[i] = k.Key
		a.Keys[i].SHA256 = k.SHA256
	}
	if a.Grants == nil {
		a.Grants = []string{}
	}
	if a.RouteLimits == nil {
		a.RouteLimits = map[string]RouteLimit{}
	}
	a.Passwords = make([]Password, len(r.Passwords))
	for i, p := range r.Passwords {
		a.Passwords[i] = p.Password
		a.Passwords[i].Digest = p.Digest
	}
	a.Certificates = append([]Certificate{}, r.Certificates...)
	return &a
}

// clone returns a copy of r that may be changed (its key, password and
// certificate lists copied).
func (r *Record) clone() *Record {
	c := *r
	c.Keys = slices.Clone(r.Keys)
	c.Passwords = slices.Clone(r.Passwords)
	c.Certificates = slices.Clone(r.Certificates)
	return &c
}

func (st *State) get(id string) (*Record, error) {
	r := st.Apps[id]
	if r == nil {
		return nil, fmt.Errorf("app %q: %w", id, ErrNotFound)
	}
	return r, nil
}

// newRecord is an app defined by spec, first defined by source.
func newRecord(spec Spec, source, fileHash string, now time.Time) *Record {
	r := &Record{FileHash: fileHash}
	r.setSpec(spec)
	r.App.Source, r.App.Created, r.App.Updated = source, now.UTC(), now.UTC()
	return r
}

func (r *Record) setSpec(spec Spec) {
	rl := spec.RouteLimits
	if rl == nil {
		rl = map[string]RouteLimit{}
	}
	r.App.ID, r.App.Name, r.App.Status, r.App.Grants, r.App.Limits, r.App.RouteLimits =
		spec.ID, spec.Name, spec.Status, slices.Clone(spec.Grants), spec.Limits, rl
	if r.App.Grants == nil {
		r.App.Grants = []string{}
	}
}

// touch records a runtime change: the update time, and for a file app
// that it is now Overridden.
func (r *Record) touch(now time.Time) {
	r.App.Updated = now.UTC()
	r.App.Overridden = r.App.Source == SourceFile
}

// Create adds an app defined through the API (Store.Create's rules).
func (st *State) Create(spec Spec, now time.Time) (*App, error) {
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if len(st.Apps) >= MaxApps {
		return nil, fmt.Errorf("the store holds %d apps, the most it may: %w", len(st.Apps), ErrConflict)
	}
	if st.Apps[spec.ID] != nil {
		return nil, fmt.Errorf("app %q: %w", spec.ID, ErrExists)
	}
	delete(st.Tombstones, spec.ID)
	r := newRecord(spec, SourceAPI, "", now)
	st.Apps[spec.ID] = r
	return r.app(), nil
}

// Patch changes the fields p sets (Store.Patch's rules).
func (st *State) Patch(id string, p Patch, now time.Time) (*App, error) {
	r, err := st.get(id)
	if err != nil {
		return nil, err
	}
	spec, err := patched(r.app(), p)
	if err != nil {
		return nil, err
	}
	r = r.clone()
	r.setSpec(spec)
	r.App.Updated = now.UTC()
	r.App.Overridden = r.App.Overridden || r.App.Source == SourceFile
	st.Apps[id] = r
	return r.app(), nil
}

// Delete removes an app; a file app leaves a tombstone (Store.Delete).
func (st *State) Delete(id string) error {
	r, err := st.get(id)
	if err != nil {
		return err
	}
	if r.App.Source == SourceFile && r.FileHash != "" {
		st.Tombstones[id] = r.FileHash
	}
	delete(st.Apps, id)
	return nil
}

// keyHolder returns the app other than appID holding a key with hash sha
// or id keyID ("" if none): O(keys).
func (st *State) keyHolder(appID, sha, keyID string) (string, bool) {
	for id, r := range st.Apps {
		if id == appID {
			continue
		}
		for _, k := range r.Keys {
			if k.SHA256 == sha {
				return id, true
			}
			if k.ID == keyID {
				return id, false
			}
		}
	}
	return "", false
}

// AddKey adds the generated key nk to app id (Store.CreateKey's rules).
func (st *State) AddKey(id string, nk NewKey, now time.Time) error {
	r, err := st.get(id)
	if err != nil {
		return err
	}
	active := 0
	for _, k := range r.Keys {
		if k.Active() {
			active++
		}
	}
	if active >= MaxActiveKeys {
		return fmt.Errorf("app %q has %d active keys, the most it may; revoke one first: %w", id, active, ErrConflict)
	}
	if other, _ := st.keyHolder(id, nk.SHA256, nk.ID); other != "" || slices.ContainsFunc(r.Keys, func(k StoredKey) bool { return k.ID == nk.ID }) {
		return fmt.Errorf("the new key's id is taken, try again: %w", ErrConflict)
	}
	r = r.clone()
	r.Keys = append(r.Keys, StoredKey{Key: nk.Key, SHA256: nk.SHA256})
	r.Keys[len(r.Keys)-1].Key.SHA256 = ""
	r.touch(now)
	st.Apps[id] = r
	return nil
}

// NewAPIKey generates a key for the admin API at now (the plaintext is in
// the result only).
func NewAPIKey(now time.Time) (NewKey, error) {
	plain, err := GenerateKey()
	if err != nil {
		return NewKey{}, fmt.Errorf("generating a key: %w", err)
	}
	sha := HashKey(plain)
	return NewKey{
		Key:       Key{ID: keyID(sha), Prefix: plain[:len(keyPrefix)+4], SHA256: sha, Source: SourceAPI, Created: now.UTC()},
		Plaintext: plain,
	}, nil
}

// RevokeKey revokes key keyID of app id (Store.RevokeKey's rules).
func (st *State) RevokeKey(id, keyID string, now time.Time) (Key, error) {
	r, err := st.get(id)
	if err != nil {
		return Key{}, err
	}
	i := slices.IndexFunc(r.Keys, func(k StoredKey) bool { return k.ID == keyID })
	if i < 0 {
		return Key{}, fmt.Errorf("app %q has no key %q: %w", id, keyID, ErrNotFound)
	}
	if !r.Keys[i].Active() {
		return Key{}, fmt.Errorf("key %q of app %q is already revoked: %w", keyID, id, ErrConflict)
	}
	r = r.clone()
	r.revoke(i, now)
	r.touch(now)
	st.Apps[id] = r
	out := r.Keys[slices.IndexFunc(r.Keys, func(k StoredKey) bool { return k.ID == keyID })].Key
	return out, nil
}

// revoke marks key i revoked and drops the oldest revoked keys beyond
// MaxRevokedKeys (r must be a clone).
func (r *Record) revoke(i int, now time.Time) {
	r.Keys[i].Revoked = now.UTC()
	var revoked []int
	for j, k := range r.Keys {
		if !k.Active() {
			revoked = append(revoked, j)
		}
	}
	if len(revoked) <= MaxRevokedKeys {
		return
	}
	// Newest revoked first (then by id, as the SQLite store orders them);
	// keep MaxRevokedKeys.
	slices.SortFunc(revoked, func(a, b int) int {
		if c := r.Keys[b].Revoked.Compare(r.Keys[a].Revoked); c != 0 {
			return c
		}
		return compareStrings(r.Keys[a].ID, r.Keys[b].ID)
	})
	drop := map[int]bool{}
	for _, j := range revoked[MaxRevokedKeys:] {
		drop[j] = true
	}
	kept := r.Keys[:0:0]
	for j, k := range r.Keys {
		if !drop[j] {
			kept = append(kept, k)
		}
	}
	r.Keys = kept
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Seed applies the file's apps (Store.Seed's precedence rule, decided by
// statedb.Decide) and returns what it did; warn receives the warnings
// the SQLite store logs.
func (st *State) Seed(file []FileApp, now time.Time, warn func(msg string, args ...any)) (SeedResult, error) {
	res := SeedResult{Failed: map[string]error{}}
	if len(file) > MaxApps {
		return res, fmt.Errorf("the file defines %d apps; at most %d", len(file), MaxApps)
	}
	listed := make(map[string]bool, len(file))
	for _, fa := range file {
		listed[fa.ID] = true
		if err := st.seedOne(fa, now, &res, warn); err != nil {
			res.Failed[fa.ID] = err
			warn("apps: seeding from the file failed; this app keeps its stored state", "app", fa.ID, "error", err)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(st.Apps)) {
		r := st.Apps[id]
		if r.App.Source != SourceFile || listed[id] {
			continue
		}
		if r.App.Overridden {
			warn("apps: the file no longer lists this app, but it was changed at runtime and is kept; delete it through the admin API", "app", id)
			if !r.App.PendingFileChange {
				r = r.clone()
				r.App.PendingFileChange = true
				st.Apps[id] = r
			}
			res.KeptRuntime = append(res.KeptRuntime, id)
			continue
		}
		delete(st.Apps, id)
		res.Removed = append(res.Removed, id)
	}
	for id := range st.Tombstones {
		if !listed[id] {
			delete(st.Tombstones, id)
		}
	}
	return res, nil
}

func (st *State) seedOne(fa FileApp, now time.Time, res *SeedResult, warn func(string, ...any)) error {
	spec, keys, hash, err := fileDefinition(fa)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if other, _ := st.keyHolder(spec.ID, k, keyID(k)); other != "" {
			return invalid("api_key_sha256", "a key hash is already held by another app")
		}
	}
	old := st.Apps[spec.ID]
	e := statedb.Entry{Exists: old != nil, Tombstone: st.Tombstones[spec.ID]}
	if old != nil {
		e.FileHash, e.FromFile, e.Overridden = old.FileHash, old.App.Source == SourceFile, old.App.Overridden
	}
	action := statedb.Decide(e, hash)
	switch action {
	case statedb.StayDeleted:
	case statedb.Create:
		if len(st.Apps) >= MaxApps {
			return fmt.Errorf("the store holds %d apps, the most it may: %w", len(st.Apps), ErrConflict)
		}
		delete(st.Tombstones, spec.ID)
		r := newRecord(spec, SourceFile, hash, now)
		r.seedKeys(keys, now)
		st.Apps[spec.ID] = r
	case statedb.Unchanged:
		if old.App.PendingFileChange {
			r := old.clone()
			r.App.PendingFileChange = false
			st.Apps[spec.ID] = r
		}
	case statedb.Apply:
		r := old.clone()
		r.setSpec(spec)
		r.App.Updated = now.UTC()
		r.FileHash, r.App.PendingFileChange = hash, false
		r.seedKeys(keys, now)
		st.Apps[spec.ID] = r
	default: // statedb.KeepRuntime
		why := "changed at runtime since the file last seeded it"
		if old.App.Source == SourceAPI {
			why = "created through the admin API"
		}
		warn("apps: the file's definition of this app changed but was not applied: the app was "+why+
			"; delete it through the admin API to take the file's version", "app", spec.ID)
		if !old.App.PendingFileChange {
			r := old.clone()
			r.App.PendingFileChange = true
			st.Apps[spec.ID] = r
		}
	}
	res.Record(action, spec.ID)
	return nil
}

// seedKeys makes r's file keys match want (seedKeys of the SQLite store);
// r must be a clone.
func (r *Record) seedKeys(want []string, now time.Time) {
	for i, k := range r.Keys {
		if k.Source == SourceFile && k.Active() && !slices.Contains(want, k.SHA256) {
			r.Keys[i].Revoked = now.UTC()
		}
	}
	for _, sha := range want {
		i := slices.IndexFunc(r.Keys, func(k StoredKey) bool { return k.SHA256 == sha })
		if i >= 0 {
			r.Keys[i].Revoked = time.Time{}
			continue
		}
		r.Keys = append(r.Keys, StoredKey{Key: Key{ID: keyID(sha), Source: SourceFile, Created: now.UTC()}, SHA256: sha})
	}
}

// Check validates a record read from a shared store (outside levee's own
// writes, it may hold anything): the app's definition as Spec.Validate
// checks it, its keys' hashes and ids, and their number.
func (r *Record) Check(id string) error {
	if r.App.ID != id {
		return fmt.Errorf("app id %q stored under %q", r.App.ID, id)
	}
	spec := specOf(&r.App)
	if err := spec.Validate(); err != nil {
		return err
	}
	if !slices.IsSorted(spec.Grants) {
		return invalid("grants", "not sorted")
	}
	if r.App.Source != SourceFile && r.App.Source != SourceAPI {
		return invalid("source", "must be %q or %q, got %s", SourceFile, SourceAPI, quote(r.App.Source))
	}
	if len(r.Keys) > MaxActiveKeys+MaxRevokedKeys {
		return invalid("keys", "at most %d, got %d", MaxActiveKeys+MaxRevokedKeys, len(r.Keys))
	}
	active := 0
	for i, k := range r.Keys {
		if !ValidKeySHA256(k.SHA256) || k.ID != keyID(k.SHA256) {
			return invalid(fmt.Sprintf("keys[%d]", i), "a key needs a lower-case hex SHA-256 and the id its first 12 digits")
		}
		if k.Active() {
			active++
		}
	}
	if active > MaxActiveKeys {
		return invalid("keys", "at most %d active, got %d", MaxActiveKeys, active)
	}
	if err := checkSharedPasswords(r.Passwords); err != nil {
		return err
	}
	return checkCertificates(r.Certificates)
}
