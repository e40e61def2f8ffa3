package dataapis

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/statedb"
)

// Options configure a Store: where its database lives (levee uses
// <state_dir>/data-apis.db) and how it runs.
type Options = statedb.Config

// Snapshot is the store's published state after a committed change:
// what serves, and how many APIs are in each state. Immutable.
type Snapshot struct {
	// Serving are the published APIs in name order.
	Serving []Serving
	// Count is the number of APIs in each state.
	Count map[State]int
	// Runtime names the APIs, in any state, that seeding leaves as they
	// are: created through the admin API, or file APIs changed at runtime
	// (Overridden).
	Runtime map[string]bool
}

// Store is the persistent set of data APIs: one SQLite database in WAL
// mode. Writes are serialised; each commits, then rebuilds the Snapshot
// before returning, so Current shows the change as soon as the call
// returns. Safe for concurrent use.
type Store struct {
	st   *statedb.Store
	snap atomic.Pointer[Snapshot]
}

// Open opens (creating if needed) the database at o.Path, brings its
// schema to the current version and reads the first snapshot.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Path == "" {
		return nil, errors.New("dataapis: Options.Path is required")
	}
	st, err := statedb.OpenStore(ctx, statedb.StoreOptions{Config: o, Migrations: migrations})
	if err != nil {
		return nil, fmt.Errorf("dataapis: %w", err)
	}
	s := &Store{st: st}
	snap, err := s.load(ctx)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("dataapis: %s: %w", o.Path, err)
	}
	s.snap.Store(snap)
	return s, nil
}

// Close closes the database. The last snapshot stays readable.
func (s *Store) Close() error { return s.st.Close() }

// Current returns the latest snapshot; it never queries the database.
func (s *Store) Current() *Snapshot { return s.snap.Load() }

// SchemaVersion returns the database's schema version.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) { return s.st.SchemaVersion(ctx) }

// write runs fn in one transaction under the write lock and, once it has
// committed, publishes a new snapshot.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return s.st.Write(ctx, fn, s.publishLocked)
}

// publishLocked rebuilds the snapshot. The write has committed whatever
// happens here; on a read failure the previous snapshot stays (logged)
// and the next write rebuilds it.
func (s *Store) publishLocked(ctx context.Context) {
	snap, err := s.load(ctx)
	if err != nil {
		s.st.Logger.Error("data APIs: rebuilding the snapshot failed; the previous one stays", "error", err)
		return
	}
	s.snap.Store(snap)
}

// load reads the published versions and the counts: O(APIs), bounded by
// MaxAPIs.
func (s *Store) load(ctx context.Context) (*Snapshot, error) {
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	tx, err := s.st.DB.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	snap := &Snapshot{Count: map[State]int{Draft: 0, Published: 0, Offline: 0}, Runtime: map[string]bool{}}
	rows, err := tx.QueryContext(ctx, `SELECT a.name, a.published, v.definition FROM data_apis a
		JOIN data_api_versions v ON v.name = a.name AND v.version = a.published
		WHERE a.state = 'published' ORDER BY a.name LIMIT ?`, MaxAPIs)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var sv Serving
		if err := rows.Scan(&sv.Name, &sv.Version, &sv.Definition); err != nil {
			rows.Close()
			return nil, err
		}
		snap.Serving = append(snap.Serving, sv)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	rows, err = tx.QueryContext(ctx, `SELECT name FROM data_apis WHERE source = 'api' OR overridden = 1 LIMIT ?`, MaxAPIs)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return nil, err
		}
		snap.Runtime[name] = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	rows, err = tx.QueryContext(ctx, `SELECT state, count(*) FROM data_apis GROUP BY state`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var st State
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		snap.Count[st] = n
	}
	return snap, rows.Err()
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

const apiColumns = `name, state, published, latest, source, file_hash, overridden, pending_file, created_at, updated_at`

// record is an API row with the bookkeeping the model does not show.
type record struct {
	api      *API
	fileHash string
}

func scanAPI(sc interface{ Scan(...any) error }) (record, error) {
	var (
		a                   API
		fileHash            string
		overridden, pending bool
		created, updated    int64
	)
	if err := sc.Scan(&a.Name, &a.State, &a.Published, &a.Latest, &a.Source, &fileHash, &overridden, &pending, &created, &updated); err != nil {
		return record{}, err
	}
	a.Overridden, a.PendingFileChange = overridden, pending
	a.Created, a.Updated = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	return record{api: &a, fileHash: fileHash}, nil
}

// getRecord reads one API, with its versions when withVersions;
// ErrNotFound if there is none.
func getRecord(ctx context.Context, q querier, name string, withVersions bool) (record, error) {
	r, err := scanAPI(q.QueryRowContext(ctx, `SELECT `+apiColumns+` FROM data_apis WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return record{}, fmt.Errorf("data API %q: %w", name, ErrNotFound)
	}
	if err != nil || !withVersions {
		return r, err
	}
	rows, err := q.QueryContext(ctx, `SELECT version, source, created_at, definition FROM data_api_versions
		WHERE name = ? ORDER BY version LIMIT ?`, name, MaxVersions+1)
	if err != nil {
		return record{}, err
	}
	defer rows.Close()
	r.api.Versions = []Version{}
	for rows.Next() {
		var v Version
		var created int64
		var def string
		if err := rows.Scan(&v.Version, &v.Source, &created, &def); err != nil {
			return record{}, err
		}
		v.Created, v.Definition = time.Unix(0, created).UTC(), []byte(def)
		r.api.Versions = append(r.api.Versions, v)
	}
	return r, rows.Err()
}

// Get returns the API with its versions, or an error wrapping
// ErrNotFound.
func (s *Store) Get(ctx context.Context, name string) (*API, error) {
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	r, err := getRecord(ctx, s.st.DB, name, true)
	return r.api, err
}

// Resolve returns the version a Publish (rollback false) or a Rollback
// (rollback true) of API name with v would serve, and its definition,
// without changing anything: for a check before the call. Its errors are
// the call's.
func (s *Store) Resolve(ctx context.Context, name string, v int, rollback bool) (int, []byte, error) {
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	r, err := getRecord(ctx, s.st.DB, name, false)
	if err != nil {
		return 0, nil, err
	}
	if v, err = target(ctx, s.st.DB, r, v, rollback); err != nil {
		return 0, nil, err
	}
	var def string
	err = s.st.DB.QueryRowContext(ctx, `SELECT definition FROM data_api_versions WHERE name = ? AND version = ?`, name, v).Scan(&def)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil, fmt.Errorf("data API %q has no version %d: %w", name, v, ErrNotFound)
	}
	return v, []byte(def), err
}

// target returns the version a publish (v 0: the latest) or a rollback
// (v 0: the newest kept version before the published one; otherwise v,
// which must be before it) goes to.
func target(ctx context.Context, q querier, r record, v int, rollback bool) (int, error) {
	if !rollback {
		if v == 0 {
			v = r.api.Latest
		}
		return v, nil
	}
	name, cur := r.api.Name, r.api.Published
	if cur == 0 {
		return 0, fmt.Errorf("data API %q was never published; publish a version: %w", name, ErrConflict)
	}
	if v >= cur {
		return 0, fmt.Errorf("a rollback goes to a version before %d (the published one), got %d; publish a later version instead: %w", cur, v, ErrConflict)
	}
	if v > 0 {
		return v, nil
	}
	if err := q.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM data_api_versions WHERE name = ? AND version < ?`, name, cur).Scan(&v); err != nil {
		return 0, err
	}
	if v == 0 {
		return 0, fmt.Errorf("data API %q keeps no version before %d: %w", name, cur, ErrConflict)
	}
	return v, nil
}

// Page is one page of List: APIs in name order (without their versions),
// and the name to pass as after for the next page ("" on the last page).
type Page struct {
	APIs []*API `json:"data_apis"`
	Next string `json:"next,omitempty"`
}

// List returns up to limit APIs whose name sorts after after, in name
// order. limit 0 means DefaultPageSize; it is capped at MaxPageSize.
func (s *Store) List(ctx context.Context, after string, limit int) (Page, error) {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	limit = min(limit, MaxPageSize)
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	rows, err := s.st.DB.QueryContext(ctx, `SELECT `+apiColumns+` FROM data_apis WHERE name > ? ORDER BY name LIMIT ?`, after, limit+1)
	if err != nil {
		return Page{}, err
	}
	defer rows.Close()
	p := Page{APIs: []*API{}}
	for rows.Next() {
		r, err := scanAPI(rows)
		if err != nil {
			return Page{}, err
		}
		p.APIs = append(p.APIs, r.api)
	}
	if err := rows.Err(); err != nil {
		return Page{}, err
	}
	if len(p.APIs) > limit {
		p.APIs = p.APIs[:limit]
		p.Next = p.APIs[limit-1].Name
	}
	return p, nil
}

// Create adds data API name (Source SourceAPI) with def as version 1, a
// draft: nothing serves until a publish. An existing name is ErrExists, a
// full store ErrConflict. A tombstone of a file API of that name is
// dropped: creating it again is a new runtime decision.
func (s *Store) Create(ctx context.Context, name string, def []byte) (*API, error) {
	if err := errors.Join(checkName(name), checkDefinition(def)); err != nil {
		return nil, err
	}
	var out *API
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := getRecord(ctx, tx, name, false); err == nil {
			return fmt.Errorf("data API %q: %w", name, ErrExists)
		} else if !errors.Is(err, ErrNotFound) {
			return err
		}
		if err := checkCapacity(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM tombstones WHERE name = ?`, name); err != nil {
			return err
		}
		now := s.st.Now()
		if err := insertAPI(ctx, tx, name, Draft, SourceAPI, "", now); err != nil {
			return err
		}
		if err := insertVersion(ctx, tx, name, 1, def, SourceAPI, now); err != nil {
			return err
		}
		r, err := getRecord(ctx, tx, name, true)
		out = r.api
		return err
	})
	return out, err
}

func checkCapacity(ctx context.Context, q querier) error {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM data_apis`).Scan(&n); err != nil {
		return err
	}
	if n >= MaxAPIs {
		return fmt.Errorf("the store holds %d data APIs, the most it may: %w", n, ErrConflict)
	}
	return nil
}

func insertAPI(ctx context.Context, q querier, name string, state State, source, fileHash string, now time.Time) error {
	published := 0
	if state == Published {
		published = 1
	}
	_, err := q.ExecContext(ctx, `INSERT INTO data_apis (`+apiColumns+`) VALUES (?, ?, ?, 1, ?, ?, 0, 0, ?, ?)`,
		name, string(state), published, source, fileHash, now.UnixNano(), now.UnixNano())
	return err
}

func insertVersion(ctx context.Context, q querier, name string, v int, def []byte, source string, now time.Time) error {
	_, err := q.ExecContext(ctx, `INSERT INTO data_api_versions (name, version, definition, source, created_at) VALUES (?, ?, ?, ?, ?)`,
		name, v, string(def), source, now.UnixNano())
	return err
}

// addVersion appends def as version r.Latest+1, first evicting the oldest
// version that is not the published (or last published) one when the API
// holds MaxVersions. It returns the new version's number.
func addVersion(ctx context.Context, tx *sql.Tx, r record, def []byte, source string, now time.Time) (int, error) {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM data_api_versions WHERE name = ?`, r.api.Name).Scan(&n); err != nil {
		return 0, err
	}
	if n >= MaxVersions {
		if _, err := tx.ExecContext(ctx, `DELETE FROM data_api_versions WHERE name = ? AND version = (
			SELECT min(version) FROM data_api_versions WHERE name = ? AND version != ?)`, r.api.Name, r.api.Name, r.api.Published); err != nil {
			return 0, err
		}
	}
	v := r.api.Latest + 1
	if err := insertVersion(ctx, tx, r.api.Name, v, def, source, now); err != nil {
		return 0, err
	}
	_, err := tx.ExecContext(ctx, `UPDATE data_apis SET latest = ?, updated_at = ? WHERE name = ?`, v, now.UnixNano(), r.api.Name)
	return v, err
}

// touchRuntime records a runtime change: the update time, and for a file
// API that it is now Overridden.
func touchRuntime(ctx context.Context, q querier, name string, now time.Time) error {
	_, err := q.ExecContext(ctx, `UPDATE data_apis SET updated_at = ?, overridden = (source = 'file') WHERE name = ?`, now.UnixNano(), name)
	return err
}

// change runs fn on API name's record in one write and returns the API
// as it is after.
func (s *Store) change(ctx context.Context, name string, fn func(ctx context.Context, tx *sql.Tx, r record, now time.Time) error) (*API, error) {
	var out *API
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		r, err := getRecord(ctx, tx, name, false)
		if err != nil {
			return err
		}
		now := s.st.Now()
		if err := fn(ctx, tx, r, now); err != nil {
			return err
		}
		if err := touchRuntime(ctx, tx, name, now); err != nil {
			return err
		}
		r, err = getRecord(ctx, tx, name, true)
		out = r.api
		return err
	})
	return out, err
}

// AddVersion adds def as a new version of API name. What serves does not
// change: the published version keeps serving until a publish. A file API
// becomes Overridden.
func (s *Store) AddVersion(ctx context.Context, name string, def []byte) (*API, error) {
	if err := checkDefinition(def); err != nil {
		return nil, err
	}
	return s.change(ctx, name, func(ctx context.Context, tx *sql.Tx, r record, now time.Time) error {
		_, err := addVersion(ctx, tx, r, def, SourceAPI, now)
		return err
	})
}

// versionExists returns ErrNotFound unless API name has version v.
func versionExists(ctx context.Context, q querier, name string, v int) error {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM data_api_versions WHERE name = ? AND version = ?`, name, v).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("data API %q has no version %d: %w", name, v, ErrNotFound)
	}
	return nil
}

// Publish makes version v of API name serve (v 0: the latest version),
// from any state. Publishing the version that serves changes nothing
// but the update time. A file API becomes Overridden.
func (s *Store) Publish(ctx context.Context, name string, v int) (*API, error) {
	return s.transition(ctx, name, v, false)
}

// Rollback publishes version v of API name, which must be earlier than
// the published (or last published) one; v 0 is the newest kept version
// before it. ErrConflict when the API was never published or keeps no
// earlier version. A file API becomes Overridden.
func (s *Store) Rollback(ctx context.Context, name string, v int) (*API, error) {
	return s.transition(ctx, name, v, true)
}

func (s *Store) transition(ctx context.Context, name string, v int, rollback bool) (*API, error) {
	return s.change(ctx, name, func(ctx context.Context, tx *sql.Tx, r record, now time.Time) error {
		v, err := target(ctx, tx, r, v, rollback)
		if err != nil {
			return err
		}
		return publish(ctx, tx, name, v)
	})
}

func publish(ctx context.Context, tx *sql.Tx, name string, v int) error {
	if err := versionExists(ctx, tx, name, v); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, `UPDATE data_apis SET state = 'published', published = ? WHERE name = ?`, v, name)
	return err
}

// Offline stops API name from serving; its published version is
// remembered (API.Published). ErrConflict unless it is published. A file
// API becomes Overridden.
func (s *Store) Offline(ctx context.Context, name string) (*API, error) {
	return s.change(ctx, name, func(ctx context.Context, tx *sql.Tx, r record, now time.Time) error {
		if r.api.State != Published {
			return fmt.Errorf("data API %q is %s, not published: %w", name, r.api.State, ErrConflict)
		}
		_, err := tx.ExecContext(ctx, `UPDATE data_apis SET state = 'offline' WHERE name = ?`, name)
		return err
	})
}

// Delete removes API name and its versions. A file API leaves a
// tombstone, so the file does not bring it back until its definition
// there changes.
func (s *Store) Delete(ctx context.Context, name string) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		r, err := getRecord(ctx, tx, name, false)
		if err != nil {
			return err
		}
		if r.api.Source == SourceFile && r.fileHash != "" {
			if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO tombstones (name, file_hash, deleted_at) VALUES (?, ?, ?)`,
				name, r.fileHash, s.st.Now().UnixNano()); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM data_apis WHERE name = ?`, name)
		return err
	})
}

// DefinitionHash identifies a definition: the SHA-256 (hex) of its
// canonical JSON.
func DefinitionHash(def []byte) string {
	sum := sha256.Sum256(def)
	return hex.EncodeToString(sum[:])
}
