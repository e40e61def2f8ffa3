package apps

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/statedb"
)

// Options configure a Store: where its database lives (levee uses
// <state_dir>/apps.db) and how it runs, and who hears of its changes.
type Options struct {
	statedb.Config
	// OnChange, when set, is called with every new snapshot after the
	// write that caused it has committed, in commit order, while the
	// store's write lock is held: it must not call the store's writing
	// methods. It is not called for the snapshot Open builds.
	OnChange func(*Snapshot)
}

// Defaults of Options.
const (
	DefaultQueryTimeout = statedb.DefaultQueryTimeout
	DefaultBusyTimeout  = statedb.DefaultBusyTimeout
)

// Store is the persistent set of apps: one SQLite database in WAL mode.
// Writes are serialised by the store; each commits, then rebuilds and
// publishes the Snapshot before returning, so a change is visible to
// Current as soon as the call returns. Safe for concurrent use.
type Store struct {
	st     *statedb.Store // the database, its deadlines, clock, logger and write lock
	notify func(*Snapshot)
	snap   atomic.Pointer[Snapshot]
}

// Open opens (creating if needed) the database at o.Path, brings its
// schema to the current version and builds the first snapshot.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Path == "" {
		return nil, errors.New("apps: Options.Path is required")
	}
	st, err := statedb.OpenStore(ctx, statedb.StoreOptions{Config: o.Config, Migrations: migrations})
	if err != nil {
		return nil, fmt.Errorf("apps: %w", err)
	}
	s := &Store{st: st, notify: o.OnChange}
	snap, err := s.load(ctx)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("apps: %s: %w", o.Path, err)
	}
	s.snap.Store(snap)
	return s, nil
}

// Close closes the database. The last snapshot stays readable.
func (s *Store) Close() error { return s.st.Close() }

// Current returns the latest snapshot; it never blocks and never queries
// the database.
func (s *Store) Current() *Snapshot { return s.snap.Load() }

func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error { return s.st.InTx(ctx, fn) }

// write runs fn in one transaction under the write lock and, once it has
// committed, publishes a new snapshot.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return s.st.Write(ctx, fn, s.publishLocked)
}

// publishLocked rebuilds the snapshot from the database. The write has
// committed whatever happens here; on a read failure the previous
// snapshot stays and the next write rebuilds it.
func (s *Store) publishLocked(ctx context.Context) {
	snap, err := s.load(ctx)
	if err != nil {
		s.st.Logger.Error("apps: rebuilding the snapshot failed; the previous one keeps serving", "error", err)
		return
	}
	s.snap.Store(snap)
	if s.notify != nil {
		s.notify(snap)
	}
}

// querier is what *sql.DB and *sql.Tx share.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

const appColumns = `id, name, status, grants, limits, route_limits, source, file_hash, overridden, pending_file, created_at, updated_at`

// record is an app row with the bookkeeping the model does not show.
type record struct {
	app      *App
	fileHash string
}

func scanApp(sc interface{ Scan(...any) error }) (record, error) {
	var (
		a                           App
		grants, limits, routeLimits string
		fileHash                    string
		overridden, pending         bool
		created, updated            int64
	)
	err := sc.Scan(&a.ID, &a.Name, &a.Status, &grants, &limits, &routeLimits, &a.Source, &fileHash, &overridden, &pending, &created, &updated)
	if err != nil {
		return record{}, err
	}
	if err := errors.Join(json.Unmarshal([]byte(grants), &a.Grants), json.Unmarshal([]byte(limits), &a.Limits),
		json.Unmarshal([]byte(routeLimits), &a.RouteLimits)); err != nil {
		return record{}, fmt.Errorf("app %q: corrupt row: %w", a.ID, err)
	}
	if a.Grants == nil {
		a.Grants = []string{}
	}
	if a.RouteLimits == nil {
		a.RouteLimits = map[string]RouteLimit{}
	}
	a.Overridden, a.PendingFileChange = overridden, pending
	a.Created, a.Updated = time.Unix(0, created).UTC(), time.Unix(0, updated).UTC()
	a.Keys = []Key{}
	a.Passwords = []Password{}
	a.Certificates = []Certificate{}
	return record{app: &a, fileHash: fileHash}, nil
}

const keyColumns = `app_id, id, prefix, sha256, source, created_at, revoked_at`

func scanKey(sc interface{ Scan(...any) error }) (string, Key, error) {
	var (
		appID   string
		k       Key
		created int64
		revoked sql.NullInt64
	)
	if err := sc.Scan(&appID, &k.ID, &k.Prefix, &k.SHA256, &k.Source, &created, &revoked); err != nil {
		return "", Key{}, err
	}
	k.Created = time.Unix(0, created).UTC()
	if revoked.Valid {
		k.Revoked = time.Unix(0, revoked.Int64).UTC()
	}
	return appID, k, nil
}

// getRecord reads one app with its keys; ErrNotFound if there is none.
func getRecord(ctx context.Context, q querier, id string) (record, error) {
	r, err := scanApp(q.QueryRowContext(ctx, `SELECT `+appColumns+` FROM apps WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return record{}, fmt.Errorf("app %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return record{}, err
	}
	rows, err := q.QueryContext(ctx, `SELECT `+keyColumns+` FROM app_keys WHERE app_id = ? ORDER BY created_at, id`, id)
	if err != nil {
		return record{}, err
	}
	defer rows.Close()
	for rows.Next() {
		_, k, err := scanKey(rows)
		if err != nil {
			return record{}, err
		}
		r.app.Keys = append(r.app.Keys, k)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return record{}, err
	}
	byID := map[string]*App{id: r.app}
	return r, errors.Join(loadPasswords(ctx, q, byID, id), loadCertificates(ctx, q, byID, id))
}

// load reads every app and key into a new snapshot: O(apps + keys),
// bounded by MaxApps and the per-app key caps.
func (s *Store) load(ctx context.Context) (*Snapshot, error) {
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	tx, err := s.st.DB.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	byID := map[string]*App{}
	rows, err := tx.QueryContext(ctx, `SELECT `+appColumns+` FROM apps ORDER BY id LIMIT ?`, MaxApps)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		r, err := scanApp(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		byID[r.app.ID] = r.app
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	rows, err = tx.QueryContext(ctx, `SELECT `+keyColumns+` FROM app_keys ORDER BY app_id, created_at, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		appID, k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		if a := byID[appID]; a != nil {
			a.Keys = append(a.Keys, k)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, err
	}
	if err := loadPasswords(ctx, tx, byID, ""); err != nil {
		return nil, err
	}
	if err := loadCertificates(ctx, tx, byID, ""); err != nil {
		return nil, err
	}
	snap, err := newSnapshot(byID)
	if err != nil {
		return nil, err
	}
	for _, c := range snap.Identities().Conflicts() {
		// The store's writes never make one (app_keys.sha256 is UNIQUE,
		// seeding refuses a hash another app holds): the database was
		// changed behind its back. Neither app is admitted with the key.
		s.st.Logger.Error("apps: a key is held by two apps; neither is admitted with it", "conflict", c.What, "key_id", c.Key, "apps", c.Apps[:])
	}
	return snap, nil
}

// Get returns the app with id, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*App, error) {
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	r, err := getRecord(ctx, s.st.DB, id)
	return r.app, err
}

// Page is one page of List: apps in id order, and the id to pass as after
// for the next page ("" on the last page).
type Page struct {
	Apps []*App `json:"apps"`
	Next string `json:"next,omitempty"`
}

// List returns up to limit apps whose id sorts after after, in id order.
// limit 0 means DefaultPageSize; it is capped at MaxPageSize.
func (s *Store) List(ctx context.Context, after string, limit int) (Page, error) {
	if limit <= 0 {
		limit = DefaultPageSize
	}
	limit = min(limit, MaxPageSize)
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	tx, err := s.st.DB.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Page{}, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT id FROM apps WHERE id > ? ORDER BY id LIMIT ?`, after, limit+1)
	if err != nil {
		return Page{}, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return Page{}, err
		}
		ids = append(ids, id)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return Page{}, err
	}
	p := Page{Apps: make([]*App, 0, min(len(ids), limit))}
	if len(ids) > limit {
		ids = ids[:limit]
		p.Next = ids[limit-1]
	}
	for _, id := range ids {
		r, err := getRecord(ctx, tx, id)
		if err != nil {
			return Page{}, err
		}
		p.Apps = append(p.Apps, r.app)
	}
	return p, nil
}

// Create adds an app defined through the API (Source SourceAPI). The spec
// is normalised and validated (*ValidationError); an existing id is
// ErrExists, a full store ErrConflict.
func (s *Store) Create(ctx context.Context, spec Spec) (*App, error) {
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	var out *App
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := checkCapacity(ctx, tx); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM apps WHERE id = ?`, spec.ID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("app %q: %w", spec.ID, ErrExists)
		}
		// A tombstone is a file app deleted at runtime; creating the id
		// again through the API is a new runtime decision that replaces it.
		if _, err := tx.ExecContext(ctx, `DELETE FROM tombstones WHERE id = ?`, spec.ID); err != nil {
			return err
		}
		if err := insertApp(ctx, tx, spec, SourceAPI, "", s.st.Now()); err != nil {
			return err
		}
		r, err := getRecord(ctx, tx, spec.ID)
		out = r.app
		return err
	})
	return out, err
}

func checkCapacity(ctx context.Context, q querier) error {
	var n int
	if err := q.QueryRowContext(ctx, `SELECT count(*) FROM apps`).Scan(&n); err != nil {
		return err
	}
	if n >= MaxApps {
		return fmt.Errorf("the store holds %d apps, the most it may: %w", n, ErrConflict)
	}
	return nil
}

func insertApp(ctx context.Context, q querier, spec Spec, source, fileHash string, now time.Time) error {
	grants, limits, routeLimits := encodeSpec(spec)
	_, err := q.ExecContext(ctx, `INSERT INTO apps (`+appColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 0, ?, ?)`,
		spec.ID, spec.Name, string(spec.Status), grants, limits, routeLimits, source, fileHash, now.UnixNano(), now.UnixNano())
	return err
}

func encodeSpec(spec Spec) (grants, limits, routeLimits string) {
	g := spec.Grants
	if g == nil {
		g = []string{}
	}
	rl := spec.RouteLimits
	if rl == nil {
		rl = map[string]RouteLimit{}
	}
	// Marshalling these types cannot fail: no channels, funcs or NaN
	// (validation refused NaN).
	gb, _ := json.Marshal(g)
	lb, _ := json.Marshal(spec.Limits)
	rb, _ := json.Marshal(rl)
	return string(gb), string(lb), string(rb)
}

func updateSpec(ctx context.Context, q querier, spec Spec, now time.Time, setOverridden bool) error {
	grants, limits, routeLimits := encodeSpec(spec)
	_, err := q.ExecContext(ctx, `UPDATE apps SET name = ?, status = ?, grants = ?, limits = ?, route_limits = ?,
		updated_at = ?, overridden = (overridden OR ?) WHERE id = ?`,
		spec.Name, string(spec.Status), grants, limits, routeLimits, now.UnixNano(), setOverridden, spec.ID)
	return err
}

// specOf returns the definition of a.
func specOf(a *App) Spec {
	return Spec{ID: a.ID, Name: a.Name, Status: a.Status, Grants: a.Grants, Limits: a.Limits, RouteLimits: a.RouteLimits}
}

// touchRuntime records a runtime change to app id: its update time, and
// for a file app that it is now Overridden.
func touchRuntime(ctx context.Context, q querier, id string, now time.Time) error {
	_, err := q.ExecContext(ctx, `UPDATE apps SET updated_at = ?, overridden = (source = 'file') WHERE id = ?`, now.UnixNano(), id)
	return err
}

// Patch changes the fields p sets. The result is validated whole
// (*ValidationError). A file app becomes Overridden.
func (s *Store) Patch(ctx context.Context, id string, p Patch) (*App, error) {
	var out *App
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		r, err := getRecord(ctx, tx, id)
		if err != nil {
			return err
		}
		spec, err := patched(r.app, p)
		if err != nil {
			return err
		}
		if err := updateSpec(ctx, tx, spec, s.st.Now(), r.app.Source == SourceFile); err != nil {
			return err
		}
		r, err = getRecord(ctx, tx, id)
		out = r.app
		return err
	})
	return out, err
}

// patched returns a's definition with p applied, normalised and
// validated (*ValidationError).
func patched(a *App, p Patch) (Spec, error) {
	spec := specOf(a)
	spec.RouteLimits = cloneRouteLimits(spec.RouteLimits)
	if p.Name != nil {
		spec.Name = *p.Name
		if spec.Name == "" {
			return spec, invalid("name", "must be 1 to %d bytes, got 0", MaxNameLen)
		}
	}
	if p.Status != nil {
		spec.Status = *p.Status
		if spec.Status == "" {
			return spec, invalid("status", `must be "active" or "suspended", got ""`)
		}
	}
	if p.Grants != nil {
		spec.Grants = *p.Grants
	}
	if p.Limits != nil {
		spec.Limits = *p.Limits
	}
	if p.RouteLimits != nil {
		spec.RouteLimits = cloneRouteLimits(*p.RouteLimits)
	}
	spec.Normalize()
	return spec, spec.Validate()
}

func cloneRouteLimits(m map[string]RouteLimit) map[string]RouteLimit {
	out := make(map[string]RouteLimit, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Delete removes the app and its keys. A file app leaves a tombstone, so
// the file does not bring it back until its definition there changes.
func (s *Store) Delete(ctx context.Context, id string) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		r, err := getRecord(ctx, tx, id)
		if err != nil {
			return err
		}
		if r.app.Source == SourceFile && r.fileHash != "" {
			if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO tombstones (id, file_hash, deleted_at) VALUES (?, ?, ?)`,
				id, r.fileHash, s.st.Now().UnixNano()); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM apps WHERE id = ?`, id)
		return err
	})
}
