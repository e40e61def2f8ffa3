// The database schema: its migrations (statedb applies them at open).

package apps

import "context"

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
	// 2: key ids looked up alone (insertKey's check that no other app
	// holds the id): without it each insert scanned every key, so seeding
	// 10,000 apps was quadratic.
	`CREATE INDEX app_keys_by_id ON app_keys (id);`,
	// 3: basic-auth passwords (passwords.go), argon2id digests only.
	`CREATE TABLE app_passwords (
		app_id     TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
		id         TEXT NOT NULL,
		digest     TEXT NOT NULL,               -- $argon2id$v=19$m=..,t=..,p=..$salt$hash
		created_at INTEGER NOT NULL,
		revoked_at INTEGER,                     -- NULL while active
		PRIMARY KEY (app_id, id)
	);`,
	// 4: client certificate mappings (certs.go): one value maps to one
	// app at most.
	`CREATE TABLE app_certificates (
		app_id     TEXT NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
		id         TEXT NOT NULL,
		kind       TEXT NOT NULL CHECK (kind IN ('fingerprint_sha256', 'san_dns', 'san_uri')),
		value      TEXT NOT NULL,               -- canonical (auth.CanonicalCertValue)
		created_at INTEGER NOT NULL,
		PRIMARY KEY (app_id, id),
		UNIQUE (kind, value)
	);`,
}

// SchemaVersion returns the database's schema version.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) { return s.st.SchemaVersion(ctx) }
