// Package statedb holds what levee's embedded SQLite stores under
// state_dir share (the consumer apps' apps.db, the data APIs'
// data-apis.db): opening a database private to levee's user with the
// durability pragmas and a busy timeout, numbered migrations with a
// schema_version table (a file from a newer levee is refused, never
// downgraded), transactions, and the rule by which the configuration file
// seeds a store while runtime changes win (docs/apps.md, "Precedence").
// It imports nothing of levee's.
package statedb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// Options open a database.
type Options struct {
	// Path is the database file, created (mode 0600) when missing; its
	// directory must exist. Required.
	Path string
	// BusyTimeout is how long a statement waits for another connection's
	// (or process's) write lock before failing. Required (> 0).
	BusyTimeout time.Duration
	// Timeout bounds the migrations at open. Required (> 0).
	Timeout time.Duration
	// Migrations are applied in order; the schema's version is the number
	// applied. A shipped migration is never edited: a new one is appended.
	Migrations []string
}

// Open opens (creating if needed) the database at o.Path in WAL mode with
// synchronous=FULL, foreign keys on and write transactions that take the
// lock at BEGIN, and brings its schema to len(o.Migrations).
func Open(ctx context.Context, o Options) (*sql.DB, error) {
	if o.Path == "" || o.BusyTimeout <= 0 || o.Timeout <= 0 {
		return nil, errors.New("statedb: Path, BusyTimeout and Timeout are required")
	}
	// Create the file first so that it is private to levee's user.
	f, err := os.OpenFile(o.Path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", o.Path, err)
	}
	f.Close()
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate") // a write transaction takes the lock at BEGIN
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: o.Path}).EscapedPath()+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", o.Path, err)
	}
	db.SetMaxOpenConns(4)
	mctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := migrate(mctx, db, o.Migrations); err != nil {
		db.Close()
		return nil, fmt.Errorf("%s: %w", o.Path, err)
	}
	return db, nil
}

// migrate creates the version table if needed and applies the missing
// migrations, each in its own transaction with its version bump.
func migrate(ctx context.Context, db *sql.DB, migrations []string) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("creating schema_version: %w", err)
	}
	var version int
	switch err := db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&version); {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := db.ExecContext(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return fmt.Errorf("initialising schema_version: %w", err)
		}
	case err != nil:
		return fmt.Errorf("reading schema_version: %w", err)
	}
	if version > len(migrations) {
		return fmt.Errorf("schema version %d is newer than this levee knows (%d); run a newer levee or restore a backup", version, len(migrations))
	}
	for v := version; v < len(migrations); v++ {
		err := InTx(ctx, db, func(tx *sql.Tx) error {
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
func SchemaVersion(ctx context.Context, db *sql.DB) (int, error) {
	var v int
	err := db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	return v, err
}

// InTx runs fn in one transaction, committed when fn returns nil and
// rolled back otherwise.
func InTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// IsUniqueViolation reports whether err is SQLite's UNIQUE constraint
// failure (the driver's message; its error codes are not exported in a
// stable form).
func IsUniqueViolation(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// DropTombstones deletes the rows of table tombstones whose key (column
// key) the file no longer lists: a tombstone matters only while the file
// lists its id. At most limit tombstones are read (the store's bound on
// entries, which the file's listed ids are under).
func DropTombstones(ctx context.Context, tx *sql.Tx, key string, listed map[string]bool, limit int) error {
	rows, err := tx.QueryContext(ctx, `SELECT `+key+` FROM tombstones LIMIT ?`, limit)
	if err != nil {
		return err
	}
	var drop []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		if !listed[id] {
			drop = append(drop, id)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, id := range drop {
		if _, err := tx.ExecContext(ctx, `DELETE FROM tombstones WHERE `+key+` = ?`, id); err != nil {
			return err
		}
	}
	return nil
}
