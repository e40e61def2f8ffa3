// The database schema: its migrations and how they are applied.

package apps

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	_ "modernc.org/sqlite"
)

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
