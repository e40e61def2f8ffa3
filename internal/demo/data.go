package demo

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // the demo's embedded database: no outside service
)

// The demo data API's tables: 20 customers in four regions, and 12 orders
// each with totals and times that follow from their ids, so the answers
// the demo's curl lines get are the same on every run.
const (
	demoCustomers      = 20
	demoOrdersPerCust  = 12
	demoDatabaseName   = "demo.db"
	demoDatabaseSchema = `
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, region TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
  total REAL NOT NULL, created_at TEXT NOT NULL);
CREATE INDEX orders_by_customer ON orders (customer_id, created_at, id);`
)

var demoRegions = [...]string{"north", "south", "east", "west"}

// CreateDatabase writes the demo data API's SQLite database under dir
// (replacing one left by an earlier run) and returns its path. Times are
// stored as RFC 3339 text in UTC, as levee's SQLite sources expect.
func CreateDatabase(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("demo database: %w", err)
	}
	path := filepath.Join(dir, demoDatabaseName)
	for _, p := range []string{path, path + "-wal", path + "-shm", path + "-journal"} {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return "", fmt.Errorf("demo database: %w", err)
		}
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return "", fmt.Errorf("demo database: %w", err)
	}
	defer db.Close()
	if err := seed(db); err != nil {
		return "", fmt.Errorf("demo database %s: %w", path, err)
	}
	return path, nil
}

func seed(db *sql.DB) error {
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.Exec(demoDatabaseSchema); err != nil {
		return err
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	names := [...]string{"Ada", "Brook", "Cyd", "Dana", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo"}
	for c := 1; c <= demoCustomers; c++ {
		name := fmt.Sprintf("%s %c.", names[(c-1)%len(names)], 'A'+rune((c-1)/len(names)))
		created := base.Add(time.Duration(c) * 36 * time.Hour).Format(time.RFC3339)
		if _, err := tx.Exec(`INSERT INTO customers VALUES (?, ?, ?, ?)`, c, name, demoRegions[c%len(demoRegions)], created); err != nil {
			return err
		}
		for o := 1; o <= demoOrdersPerCust; o++ {
			id := (c-1)*demoOrdersPerCust + o
			total := float64(1000+(id*3713)%49000) / 100
			at := base.Add(time.Duration(c)*36*time.Hour + time.Duration(o)*61*time.Hour).Format(time.RFC3339)
			if _, err := tx.Exec(`INSERT INTO orders VALUES (?, ?, ?, ?)`, id, c, total, at); err != nil {
				return err
			}
		}
	}
	return tx.Commit()
}
