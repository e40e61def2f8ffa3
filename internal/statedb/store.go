package statedb

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"sync"
	"time"
)

// Store is what every store under state_dir keeps besides its own tables:
// the database, the deadline of its statements, its clock and logger, and
// the write lock under which each write commits and then publishes the
// store's new snapshot, so that snapshots are published in commit order.
type Store struct {
	// DB is the open database.
	DB *sql.DB
	// Timeout bounds every statement and transaction (Deadline).
	Timeout time.Duration
	// Logger receives the store's decisions and warnings.
	Logger *slog.Logger
	// Now is the clock for timestamps.
	Now func() time.Time

	mu sync.Mutex // serialises writes and snapshot rebuilds
}

// Config is where a store's database lives and how it runs: the options
// every store under state_dir takes (apps.Options, dataapis.Options).
type Config struct {
	// Path is the database file, created (mode 0600) when missing; its
	// directory must exist. Required.
	Path string
	// QueryTimeout bounds every statement and transaction the store runs
	// (default DefaultQueryTimeout). A call whose context has an earlier
	// deadline keeps it.
	QueryTimeout time.Duration
	// BusyTimeout is how long a statement waits for another connection's
	// (or process's) write lock before failing (default
	// DefaultBusyTimeout).
	BusyTimeout time.Duration
	// Logger receives the store's decisions and warnings (default: none).
	Logger *slog.Logger
	// Now is the clock for timestamps (default time.Now).
	Now func() time.Time
}

// StoreOptions open a Store.
type StoreOptions struct {
	Config
	// Migrations are the store's schema (Options.Migrations).
	Migrations []string
}

// Defaults of StoreOptions.
const (
	DefaultQueryTimeout = 5 * time.Second
	DefaultBusyTimeout  = 5 * time.Second
)

// OpenStore opens the database (Open) with o's defaults filled in.
func OpenStore(ctx context.Context, o StoreOptions) (*Store, error) {
	s := &Store{Timeout: o.QueryTimeout, Logger: o.Logger, Now: o.Now}
	if s.Timeout <= 0 {
		s.Timeout = DefaultQueryTimeout
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.Now == nil {
		s.Now = time.Now
	}
	busy := o.BusyTimeout
	if busy <= 0 {
		busy = DefaultBusyTimeout
	}
	db, err := Open(ctx, Options{Path: o.Path, BusyTimeout: busy, Timeout: s.Timeout, Migrations: o.Migrations})
	if err != nil {
		return nil, err
	}
	s.DB = db
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.DB.Close() }

// Deadline returns ctx bounded by the store's Timeout.
func (s *Store) Deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.Timeout)
}

// InTx runs fn in one transaction (InTx).
func (s *Store) InTx(ctx context.Context, fn func(*sql.Tx) error) error { return InTx(ctx, s.DB, fn) }

// Write runs fn in one transaction under the write lock, within the
// store's Timeout, and once it has committed calls publish (still under
// the lock, with the same deadline) to rebuild the store's snapshot.
func (s *Store) Write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error, publish func(ctx context.Context)) error {
	ctx, cancel := s.Deadline(ctx)
	defer cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.InTx(ctx, func(tx *sql.Tx) error { return fn(ctx, tx) }); err != nil {
		return err
	}
	publish(ctx)
	return nil
}

// Lock takes the write lock, for work of many transactions (seeding)
// that must not interleave with writes; Unlock releases it.
func (s *Store) Lock() { s.mu.Lock() }

// Unlock releases the write lock Lock took.
func (s *Store) Unlock() { s.mu.Unlock() }

// SchemaVersion returns the database's schema version.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	ctx, cancel := s.Deadline(ctx)
	defer cancel()
	return SchemaVersion(ctx, s.DB)
}
