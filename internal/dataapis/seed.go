package dataapis

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/levee-gw/levee/internal/statedb"
)

// FileAPI is one data route of the configuration file as the store seeds
// it: its name and its definition as canonical JSON.
type FileAPI struct {
	Name       string
	Definition []byte
}

// SeedResult says what Seed did with each entry, by name.
type SeedResult = statedb.SeedResult

// Seed applies the configuration file's data routes to the store by the
// precedence rule of docs/apps.md (statedb.Decide), with a file data
// route's definition standing for an app's:
//
//   - first sight: the API is created from the file, version 1,
//     published (a file route serves as the file says);
//   - unchanged definition: nothing happens, whatever changed at runtime;
//   - changed definition, no runtime change: it becomes a new version,
//     published;
//   - changed definition and a runtime change (a new version, publish,
//     offline or rollback): the runtime state is kept,
//     PendingFileChange set, a warning logged;
//   - deleted at runtime: a tombstone keeps it deleted while the file's
//     definition is unchanged;
//   - dropped from the file: deleted unless changed at runtime (then kept,
//     with a warning); tombstones of names the file no longer lists are
//     dropped.
//
// Each API is seeded in its own transaction, so one failure is alone
// (SeedResult.Failed). The error is non-nil only when the store could not
// be read at all.
func (s *Store) Seed(ctx context.Context, file []FileAPI) (SeedResult, error) {
	res := SeedResult{Failed: map[string]error{}}
	if len(file) > MaxAPIs {
		return res, fmt.Errorf("the file defines %d data routes; at most %d", len(file), MaxAPIs)
	}
	s.st.Lock()
	defer s.st.Unlock()
	// The APIs whose file definition is the one last seeded, without a
	// pending file change, read at once: for those seedOne would write
	// nothing (Unchanged, pending_file already 0), so a reload that
	// changes no data route opens no transaction per API (1,000 of them
	// were about 70 ms of every reload at scale). The write lock is held:
	// nothing changes them meanwhile. A failed read only costs the
	// shortcut.
	settled := s.settledHashes(ctx)
	listed := make(map[string]bool, len(file))
	for _, fa := range file {
		listed[fa.Name] = true
		if h, ok := settled[fa.Name]; ok && checkName(fa.Name) == nil && checkDefinition(fa.Definition) == nil && h == DefinitionHash(fa.Definition) {
			res.Record(statedb.Unchanged, fa.Name)
			continue
		}
		if err := s.seedOne(ctx, fa, &res); err != nil {
			res.Failed[fa.Name] = err
			s.st.Logger.Error("data APIs: seeding from the file failed; this API keeps its stored state", "data_api", fa.Name, "error", err)
		}
	}
	err := s.seedUnlisted(ctx, listed, &res)
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	s.publishLocked(ctx)
	return res, err
}

// settledHashes returns the file hash of each API with one and no
// pending file change (nil when they cannot be read): at most MaxAPIs.
func (s *Store) settledHashes(ctx context.Context) map[string]string {
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	out := map[string]string{}
	err := s.st.InTx(ctx, func(tx *sql.Tx) error {
		return eachRow(ctx, tx, `SELECT name, file_hash FROM data_apis WHERE pending_file = 0 AND file_hash != '' LIMIT ?`, func(rows *sql.Rows) error {
			var name, hash string
			if err := rows.Scan(&name, &hash); err != nil {
				return err
			}
			out[name] = hash
			return nil
		})
	})
	if err != nil {
		return nil
	}
	return out
}

func (s *Store) seedOne(ctx context.Context, fa FileAPI, res *SeedResult) error {
	if err := errors.Join(checkName(fa.Name), checkDefinition(fa.Definition)); err != nil {
		return err
	}
	hash := DefinitionHash(fa.Definition)
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	var action statedb.Action
	err := s.st.InTx(ctx, func(tx *sql.Tx) error {
		now := s.st.Now()
		r, err := getRecord(ctx, tx, fa.Name, false)
		e := statedb.Entry{Exists: err == nil}
		switch {
		case errors.Is(err, ErrNotFound):
			if err := tx.QueryRowContext(ctx, `SELECT file_hash FROM tombstones WHERE name = ?`, fa.Name).Scan(&e.Tombstone); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		case err != nil:
			return err
		default:
			e.FileHash, e.FromFile, e.Overridden = r.fileHash, r.api.Source == SourceFile, r.api.Overridden
		}
		action = statedb.Decide(e, hash)
		switch action {
		case statedb.StayDeleted:
			return nil
		case statedb.Create:
			if _, err := tx.ExecContext(ctx, `DELETE FROM tombstones WHERE name = ?`, fa.Name); err != nil {
				return err
			}
			if err := checkCapacity(ctx, tx); err != nil {
				return err
			}
			if err := insertAPI(ctx, tx, fa.Name, Published, SourceFile, hash, now); err != nil {
				return err
			}
			return insertVersion(ctx, tx, fa.Name, 1, fa.Definition, SourceFile, now)
		case statedb.Unchanged:
			_, err := tx.ExecContext(ctx, `UPDATE data_apis SET pending_file = 0 WHERE name = ?`, fa.Name)
			return err
		case statedb.Apply:
			v, err := addVersion(ctx, tx, r, fa.Definition, SourceFile, now)
			if err != nil {
				return err
			}
			if err := publish(ctx, tx, fa.Name, v); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `UPDATE data_apis SET file_hash = ?, pending_file = 0 WHERE name = ?`, hash, fa.Name)
			return err
		default: // statedb.KeepRuntime
			why := "changed at runtime since the file last seeded it"
			if r.api.Source == SourceAPI {
				why = "created through the admin API"
			}
			s.st.Logger.Warn("data APIs: the file's definition of this data route changed but was not applied: the data API was "+why+
				"; delete it through the admin API to take the file's version", "data_api", fa.Name)
			_, err := tx.ExecContext(ctx, `UPDATE data_apis SET pending_file = 1 WHERE name = ?`, fa.Name)
			return err
		}
	})
	if err != nil {
		return err
	}
	res.Record(action, fa.Name)
	return nil
}

// seedUnlisted deletes the file APIs the file no longer lists (keeping,
// with a warning, those changed at runtime) and drops the tombstones of
// names it no longer lists.
func (s *Store) seedUnlisted(ctx context.Context, listed map[string]bool, res *SeedResult) error {
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	return s.st.InTx(ctx, func(tx *sql.Tx) error {
		type fileAPI struct {
			name       string
			overridden bool
		}
		var unlisted []fileAPI
		err := eachRow(ctx, tx, `SELECT name, overridden FROM data_apis WHERE source = 'file' ORDER BY name LIMIT ?`, func(rows *sql.Rows) error {
			var a fileAPI
			if err := rows.Scan(&a.name, &a.overridden); err != nil {
				return err
			}
			if !listed[a.name] {
				unlisted = append(unlisted, a)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, a := range unlisted {
			if a.overridden {
				s.st.Logger.Warn("data APIs: the file no longer lists this data route, but it was changed at runtime and is kept; delete it through the admin API", "data_api", a.name)
				if _, err := tx.ExecContext(ctx, `UPDATE data_apis SET pending_file = 1 WHERE name = ?`, a.name); err != nil {
					return err
				}
				res.KeptRuntime = append(res.KeptRuntime, a.name)
				continue
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM data_apis WHERE name = ?`, a.name); err != nil {
				return err
			}
			s.st.Logger.Info("data APIs: removed a data route the file no longer lists", "data_api", a.name)
			res.Removed = append(res.Removed, a.name)
		}
		return statedb.DropTombstones(ctx, tx, "name", listed, MaxAPIs)
	})
}

// eachRow runs query (its one argument is MaxAPIs, the bound) and calls
// fn for each row.
func eachRow(ctx context.Context, tx *sql.Tx, query string, fn func(*sql.Rows) error) error {
	rows, err := tx.QueryContext(ctx, query, MaxAPIs)
	if err != nil {
		return err
	}
	for rows.Next() {
		if err := fn(rows); err != nil {
			rows.Close()
			return err
		}
	}
	return errors.Join(rows.Err(), rows.Close())
}
