package apps

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// Options configure a Store.
type Options struct {
	// Path is the database file, created (mode 0600) when missing; its
	// directory must exist. Required. levee uses <state_dir>/apps.db.
	Path string
	// QueryTimeout bounds every statement and transaction the store runs
	// (default DefaultQueryTimeout). A call whose context has an earlier
	// deadline keeps it.
	QueryTimeout time.Duration
	// BusyTimeout is how long a statement waits for another connection's
	// (or process's) write lock before failing (default
	// DefaultBusyTimeout).
	BusyTimeout time.Duration
	// Logger receives the seeding decisions and warnings (default: none).
	Logger *slog.Logger
	// Now is the clock for timestamps (default time.Now).
	Now func() time.Time
	// OnChange, when set, is called with every new snapshot after the
	// write that caused it has committed, in commit order, while the
	// store's write lock is held: it must not call the store's writing
	// methods. It is not called for the snapshot Open builds.
	OnChange func(*Snapshot)
}

// Defaults of Options.
const (
	DefaultQueryTimeout = 5 * time.Second
	DefaultBusyTimeout  = 5 * time.Second
)

// Store is the persistent set of apps: one SQLite database in WAL mode.
// Writes are serialised by the store; each commits, then rebuilds and
// publishes the Snapshot before returning, so a change is visible to
// Current as soon as the call returns. Safe for concurrent use.
type Store struct {
	db      *sql.DB
	timeout time.Duration
	logger  *slog.Logger
	now     func() time.Time
	notify  func(*Snapshot)

	mu   sync.Mutex // serialises writes and snapshot rebuilds
	snap atomic.Pointer[Snapshot]
}

// Open opens (creating if needed) the database at o.Path, brings its
// schema to the current version and builds the first snapshot.
func Open(ctx context.Context, o Options) (*Store, error) {
	if o.Path == "" {
		return nil, errors.New("apps: Options.Path is required")
	}
	s := &Store{timeout: o.QueryTimeout, logger: o.Logger, now: o.Now, notify: o.OnChange}
	if s.timeout <= 0 {
		s.timeout = DefaultQueryTimeout
	}
	if s.logger == nil {
		s.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.now == nil {
		s.now = time.Now
	}
	busy := o.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	// Create the file first so that it is private to levee's user.
	f, err := os.OpenFile(o.Path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("apps: opening %s: %w", o.Path, err)
	}
	f.Close()
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate") // a write transaction takes the lock at BEGIN
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: o.Path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("apps: opening %s: %w", o.Path, err)
	}
	db.SetMaxOpenConns(4)
	s.db = db
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("apps: %s: %w", o.Path, err)
	}
	snap, err := s.load(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("apps: %s: %w", o.Path, err)
	}
	s.snap.Store(snap)
	return s, nil
}

// Close closes the database. The last snapshot stays readable.
func (s *Store) Close() error { return s.db.Close() }

// Current returns the latest snapshot; it never blocks and never queries
// the database.
func (s *Store) Current() *Snapshot { return s.snap.Load() }

// migrations are applied in order; the schema's version is the number
// applied. Never edit one that has shipped: append a new one.
var migrations = []string{
	// 1: apps, their keys, and tombstones of file apps deleted at runtime.
	`CREATE TABLE apps (
		id           TEXT PRIMARY KEY,
		name         TEXT NOT NULL,
		status       TEXT NOT NULL CHECK (status IN ('active', 'suspended')),
		grants       TEXT NOT NULL,               -- JSON array of route names
		limits       TEXT NOT NULL,               -- JSON Limits
		route_limits TEXT NOT NULL,               -- JSON object route -> RouteLimit
		source       TEXT NOT NULL CHECK (source IN ('file', 'api')),
		file_hash    TEXT NOT NULL DEFAULT '',    -- file definition last seeded ('' if never)
		overridden   INTEGER NOT NULL DEFAULT 0,  -- changed at runtime since file_hash was seeded
		pending_file INTEGER NOT NULL DEFAULT 0,  -- the file's definition differs, not applied
		created_at   INTEGER NOT NULL,            -- Unix nanoseconds
		updated_at   INTEGER NOT NULL
	);
	CREATE TABLE app_keys (
		app_id     TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
		id         TEXT NOT NULL,
		prefix     TEXT NOT NULL,
		sha256     TEXT NOT NULL UNIQUE,
		source     TEXT NOT NULL CHECK (source IN ('file', 'api')),
		created_at INTEGER NOT NULL,
		revoked_at INTEGER,                       -- NULL while active
		PRIMARY KEY (app_id, id)
	);
	CREATE TABLE tombstones (
		id         TEXT PRIMARY KEY,
		file_hash  TEXT NOT NULL,                 -- file definition when deleted
		deleted_at INTEGER NOT NULL
	);`,
}

// migrate creates the version table if needed and applies the missing
// migrations, each in its own transaction with its version bump.
func (s *Store) migrate(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("creating schema_version: %w", err)
	}
	var version int
	switch err := s.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version); {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := s.db.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return fmt.Errorf("initialising schema_version: %w", err)
		}
	case err != nil:
		return fmt.Errorf("reading schema_version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this levee knows (%d); run a newer levee or restore a backup", version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, migrations[v]); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `UPDATE schema_version SET version = ?`, v+1)
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %d: %w", v+1, err)
		}
	}
	return nil
}

// SchemaVersion returns the database's schema version.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	return v, err
}

func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// write runs fn in one transaction under the write lock and, once it has
// committed, publishes a new snapshot.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.inTx(ctx, func(tx *sql.Tx) error { return fn(ctx, tx) }); err != nil {
		return err
	}
	s.publishLocked(ctx)
	return nil
}

// publishLocked rebuilds the snapshot from the database. The write has
// committed whatever happens here; on a read failure the previous
// snapshot stays and the next write rebuilds it.
func (s *Store) publishLocked(ctx context.Context) {
	snap, err := s.load(ctx)
	if err != nil {
		s.logger.Error("apps: rebuilding the snapshot failed; the previous one keeps serving", "error", err)
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
	return r, rows.Err()
}

// load reads every app and key into a new snapshot: O(apps + keys),
// bounded by MaxApps and the per-app key caps.
func (s *Store) load(ctx context.Context) (*Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
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
	if err := rows.Err(); err != nil {
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
		s.logger.Error("apps: a key is held by two apps; neither is admitted with it", "conflict", c.What, "key_id", c.Key, "apps", c.Apps[:])
	}
	return snap, nil
}

// Get returns the app with id, or an error wrapping ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (*App, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	r, err := getRecord(ctx, s.db, id)
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
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	tx, err := s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
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
		if err := insertApp(ctx, tx, spec, SourceAPI, "", s.now()); err != nil {
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
		spec := specOf(r.app)
		spec.RouteLimits = cloneRouteLimits(spec.RouteLimits)
		if p.Name != nil {
			spec.Name = *p.Name
			if spec.Name == "" {
				return invalid("name", "must be 1 to %d bytes, got 0", MaxNameLen)
			}
		}
		if p.Status != nil {
			spec.Status = *p.Status
			if spec.Status == "" {
				return invalid("status", `must be "active" or "suspended", got ""`)
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
		if err := spec.Validate(); err != nil {
			return err
		}
		if err := updateSpec(ctx, tx, spec, s.now(), r.app.Source == SourceFile); err != nil {
			return err
		}
		r, err = getRecord(ctx, tx, id)
		out = r.app
		return err
	})
	return out, err
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
				id, r.fileHash, s.now().UnixNano()); err != nil {
				return err
			}
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM apps WHERE id = ?`, id)
		return err
	})
}

// NewKey is a key just created: its record, and the plaintext, which is
// returned this once and stored nowhere.
type NewKey struct {
	Key
	Plaintext string `json:"key"`
}

// keyPrefix starts every key levee generates.
const keyPrefix = "lvk_"

// GenerateKey returns a new plaintext key: "lvk_" and 32 bytes from
// crypto/rand in unpadded base64url (47 characters in all).
func GenerateKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return keyPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// HashKey returns the lower-case hex SHA-256 of a plaintext key, as the
// store keeps it.
func HashKey(plaintext string) string {
	sum := sha256.Sum256([]byte(plaintext))
	return hex.EncodeToString(sum[:])
}

// keyID derives a key's id from its hex SHA-256.
func keyID(sha string) string { return sha[:12] }

// CreateKey generates a key for app id and stores only its SHA-256, id
// and prefix. The plaintext is in the result and nowhere else. An app
// with MaxActiveKeys active keys is ErrConflict. A file app becomes
// Overridden.
func (s *Store) CreateKey(ctx context.Context, id string) (NewKey, error) {
	plain, err := GenerateKey()
	if err != nil {
		return NewKey{}, fmt.Errorf("generating a key: %w", err)
	}
	sha := HashKey(plain)
	now := s.now()
	nk := NewKey{
		Key:       Key{ID: keyID(sha), Prefix: plain[:len(keyPrefix)+4], SHA256: sha, Source: SourceAPI, Created: now.UTC()},
		Plaintext: plain,
	}
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		r, err := getRecord(ctx, tx, id)
		if err != nil {
			return err
		}
		active := 0
		for _, k := range r.app.Keys {
			if k.Active() {
				active++
			}
		}
		if active >= MaxActiveKeys {
			return fmt.Errorf("app %q has %d active keys, the most it may; revoke one first: %w", id, active, ErrConflict)
		}
		if err := insertKey(ctx, tx, id, nk.Key, now); err != nil {
			if _, ok := errors.AsType[*keyIDHeldError](err); ok {
				// 48 random bits alike: ask for another key.
				return fmt.Errorf("the new key's id is taken, try again: %w", ErrConflict)
			}
			return err
		}
		return touchRuntime(ctx, tx, id, now)
	})
	if err != nil {
		return NewKey{}, err
	}
	return nk, nil
}

// keyIDHeldError: another app holds a key with the same id (the first 12
// hex digits of two different hashes alike). The id names the key in
// signed requests, so two apps may not share it: the identity index would
// have to guess whose secret checks the signature.
type keyIDHeldError struct{ id, app string }

func (e *keyIDHeldError) Error() string {
	return fmt.Sprintf("key id %q (a hash's first 12 hex digits) is held by app %q", e.id, e.app)
}

// insertKey adds k to app appID. A hash another app holds fails on the
// schema's UNIQUE constraint; a key id another app holds with a
// *keyIDHeldError.
// Either would make a key ambiguous, which the identity index refuses.
func insertKey(ctx context.Context, q querier, appID string, k Key, now time.Time) error {
	var other string
	switch err := q.QueryRowContext(ctx, `SELECT app_id FROM app_keys WHERE id = ? AND app_id != ? AND sha256 != ? LIMIT 1`,
		k.ID, appID, k.SHA256).Scan(&other); {
	case err == nil:
		return &keyIDHeldError{id: k.ID, app: other}
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	_, err := q.ExecContext(ctx, `INSERT INTO app_keys (`+keyColumns+`) VALUES (?, ?, ?, ?, ?, ?, NULL)`,
		appID, k.ID, k.Prefix, k.SHA256, k.Source, now.UnixNano())
	return err
}

// RevokeKey revokes key keyID of app id at once (the next snapshot no
// longer admits it). A key already revoked is ErrConflict; an unknown app
// or key ErrNotFound. Beyond MaxRevokedKeys, the oldest revoked keys of
// the app are dropped. A file app becomes Overridden.
func (s *Store) RevokeKey(ctx context.Context, id, keyID string) (Key, error) {
	var out Key
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		r, err := getRecord(ctx, tx, id)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(r.app.Keys, func(k Key) bool { return k.ID == keyID })
		if i < 0 {
			return fmt.Errorf("app %q has no key %q: %w", id, keyID, ErrNotFound)
		}
		if !r.app.Keys[i].Active() {
			return fmt.Errorf("key %q of app %q is already revoked: %w", keyID, id, ErrConflict)
		}
		now := s.now()
		if err := revokeKey(ctx, tx, id, keyID, now); err != nil {
			return err
		}
		out = r.app.Keys[i]
		out.Revoked = now.UTC()
		return touchRuntime(ctx, tx, id, now)
	})
	return out, err
}

// revokeKey marks one key revoked and drops the app's oldest revoked keys
// beyond MaxRevokedKeys.
func revokeKey(ctx context.Context, q querier, appID, keyID string, now time.Time) error {
	if _, err := q.ExecContext(ctx, `UPDATE app_keys SET revoked_at = ? WHERE app_id = ? AND id = ?`, now.UnixNano(), appID, keyID); err != nil {
		return err
	}
	_, err := q.ExecContext(ctx, `DELETE FROM app_keys WHERE app_id = ? AND revoked_at IS NOT NULL AND id NOT IN (
		SELECT id FROM app_keys WHERE app_id = ? AND revoked_at IS NOT NULL ORDER BY revoked_at DESC, id LIMIT ?)`,
		appID, appID, MaxRevokedKeys)
	return err
}

// isUniqueViolation reports whether err is SQLite's UNIQUE constraint
// failure (the driver's message; its error codes are not exported in a
// stable form).
func isUniqueViolation(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}
