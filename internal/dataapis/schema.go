package dataapis

// migrations are applied in order by statedb at open; the schema's
// version is the number applied. Never edit one that has shipped: append
// a new one.
var migrations = []string{
	// 1: data APIs, their versions, and tombstones of file APIs deleted at
	// runtime.
	`CREATE TABLE data_apis (
		name         TEXT PRIMARY KEY,
		state        TEXT NOT NULL CHECK (state IN ('draft', 'published', 'offline')),
		published    INTEGER NOT NULL DEFAULT 0,  -- serving (or last served) version; 0 never
		latest       INTEGER NOT NULL,            -- highest version number made
		source       TEXT NOT NULL CHECK (source IN ('file', 'api')),
		file_hash    TEXT NOT NULL DEFAULT '',    -- file definition last seeded ('' if never)
		overridden   INTEGER NOT NULL DEFAULT 0,  -- changed at runtime since file_hash was seeded
		pending_file INTEGER NOT NULL DEFAULT 0,  -- the file's definition differs, not applied
		created_at   INTEGER NOT NULL,            -- Unix nanoseconds
		updated_at   INTEGER NOT NULL
	);
	CREATE TABLE data_api_versions (
		name       TEXT NOT NULL REFERENCES data_apis(name) ON DELETE CASCADE,
		version    INTEGER NOT NULL,
		definition TEXT NOT NULL,                 -- canonical JSON
		source     TEXT NOT NULL CHECK (source IN ('file', 'api')),
		created_at INTEGER NOT NULL,
		PRIMARY KEY (name, version)
	);
	CREATE TABLE tombstones (
		name       TEXT PRIMARY KEY,
		file_hash  TEXT NOT NULL,                 -- file definition when deleted
		deleted_at INTEGER NOT NULL
	);`,
}
