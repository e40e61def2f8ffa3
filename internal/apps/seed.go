package apps

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/statedb"
)

// SeedResult says what Seed did with each entry, by id.
type SeedResult = statedb.SeedResult

// Seed applies the configuration file's apps to the store, by the
// precedence rule of docs/apps.md:
//
//   - An app is created from the file when the store has never seen it.
//   - Each file app remembers the hash of the file definition it was last
//     seeded from. When the file's definition hashes the same, nothing
//     happens: whatever was changed at runtime stays.
//   - When the file's definition changed: if the app was not changed at
//     runtime since it was seeded (not Overridden) the file's version is
//     applied (name, status, grants, limits, route limits; file keys
//     added, file keys the file dropped revoked; API keys untouched).
//     Otherwise the runtime version is kept, PendingFileChange is set and
//     a warning is logged. An app created through the API with the same
//     id is kept likewise.
//   - A file app deleted at runtime leaves a tombstone holding the
//     definition's hash: it stays deleted while the file's definition is
//     unchanged, and is created again once it changes.
//   - A file app the file no longer lists is deleted, unless it was
//     changed at runtime (then it is kept, with a warning). Tombstones of
//     ids the file no longer lists are dropped.
//
// Each app is seeded in its own transaction, so one bad app fails alone
// (SeedResult.Failed). The snapshot is published once, at the end. The
// error is non-nil only when the store could not be read at all.
func (s *Store) Seed(ctx context.Context, file []FileApp) (SeedResult, error) {
	res := SeedResult{Failed: map[string]error{}}
	if len(file) > MaxApps {
		return res, fmt.Errorf("the file defines %d apps; at most %d", len(file), MaxApps)
	}
	s.st.Lock()
	defer s.st.Unlock()
	listed := make(map[string]bool, len(file))
	ran := 0 // seedOne transactions run
	seeded, stored, err := s.seededHashes(ctx)
	if err != nil {
		return res, err
	}
	for _, fa := range file {
		listed[fa.ID] = true
		if h, ok := seeded[fa.ID]; ok {
			// Seeded from this very definition and nothing pending: the
			// transaction would decide Unchanged and write nothing, so
			// it is not run (a reload of 10,000 unchanged apps was 10,000
			// transactions, seconds; now one read).
			if _, _, hash, err := fileDefinition(fa); err == nil && hash == h {
				res.Record(statedb.Unchanged, fa.ID)
				continue
			}
		}
		ran++
		if err := s.seedOne(ctx, fa, &res, &stored); err != nil {
			res.Failed[fa.ID] = err
			s.st.Logger.Error("apps: seeding from the file failed; this app keeps its stored state", "app", fa.ID, "error", err)
		}
	}
	kept := len(res.KeptRuntime)
	if err := s.seedUnlisted(ctx, listed, &res); err != nil {
		return res, err
	}
	if ran == 0 && len(res.Removed) == 0 && len(res.KeptRuntime) == kept {
		// Nothing was written: the snapshot (built at open and by every
		// write since) is current. Rebuilding it from 10,000 apps cost a
		// reload about 130 ms.
		return res, nil
	}
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	s.publishLocked(ctx)
	return res, nil
}

// seededHashes reads, in one query, the file hash of every app seeded
// from the file whose definition is not pending (pending_file 0): the
// apps whose seeding would change nothing while the file still hashes the
// same, and how many apps the store holds (the capacity check counts
// creations from it instead of a count(*) per app, which made seeding
// 10,000 new apps quadratic). Bounded by MaxApps rows. Called under the
// write lock, so no other write changes either while Seed runs.
func (s *Store) seededHashes(ctx context.Context) (map[string]string, int, error) {
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	var n int
	if err := s.st.DB.QueryRowContext(ctx, `SELECT count(*) FROM apps`).Scan(&n); err != nil {
		return nil, 0, err
	}
	rows, err := s.st.DB.QueryContext(ctx, `SELECT id, file_hash FROM apps WHERE file_hash != '' AND pending_file = 0 LIMIT ?`, MaxApps)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, h string
		if err := rows.Scan(&id, &h); err != nil {
			return nil, 0, err
		}
		out[id] = h
	}
	return out, n, rows.Err()
}

// definitionHash identifies a file definition: the SHA-256 of its
// normalised spec and sorted key hashes in canonical JSON (Go sorts map
// keys).
func definitionHash(spec Spec, keys []string) string {
	keys = slices.Clone(keys)
	slices.Sort(keys)
	b, _ := json.Marshal(struct {
		Spec Spec     `json:"spec"`
		Keys []string `json:"keys"`
	}{spec, keys})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// fileDefinition normalises and validates a file app: its spec, its key
// hashes (distinct, at most MaxActiveKeys) and its definition's hash.
func fileDefinition(fa FileApp) (Spec, []string, string, error) {
	spec := fa.Spec
	spec.Normalize()
	if err := spec.Validate(); err != nil {
		return spec, nil, "", err
	}
	keys := make([]string, 0, len(fa.KeySHA256))
	for i, k := range fa.KeySHA256 {
		if !ValidKeySHA256(k) {
			return spec, nil, "", invalid(fmt.Sprintf("api_key_sha256[%d]", i), "must be 64 lower-case hex digits")
		}
		if slices.Contains(keys, k) {
			return spec, nil, "", invalid(fmt.Sprintf("api_key_sha256[%d]", i), "duplicate key hash")
		}
		keys = append(keys, k)
	}
	if len(keys) > MaxActiveKeys {
		return spec, nil, "", invalid("api_key_sha256", "at most %d keys, got %d", MaxActiveKeys, len(keys))
	}
	return spec, keys, definitionHash(spec, keys), nil
}

// stored is how many apps the store holds; a creation checks it against
// MaxApps and counts itself once committed.
func (s *Store) seedOne(ctx context.Context, fa FileApp, res *SeedResult, stored *int) error {
	spec, keys, hash, err := fileDefinition(fa)
	if err != nil {
		return err
	}
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	var action statedb.Action
	err = s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.st.Now()
		r, err := getRecord(ctx, tx, spec.ID)
		e := statedb.Entry{Exists: err == nil}
		switch {
		case errors.Is(err, ErrNotFound):
			if err := tx.QueryRowContext(ctx, `SELECT file_hash FROM tombstones WHERE id = ?`, spec.ID).Scan(&e.Tombstone); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		case err != nil:
			return err
		default:
			e.FileHash, e.FromFile, e.Overridden = r.fileHash, r.app.Source == SourceFile, r.app.Overridden
		}
		action = statedb.Decide(e, hash)
		switch action {
		case statedb.StayDeleted:
			return nil
		case statedb.Create:
			if _, err := tx.ExecContext(ctx, `DELETE FROM tombstones WHERE id = ?`, spec.ID); err != nil {
				return err
			}
			if *stored >= MaxApps {
				return fmt.Errorf("the store holds %d apps, the most it may: %w", *stored, ErrConflict)
			}
			if err := insertApp(ctx, tx, spec, SourceFile, hash, now); err != nil {
				return err
			}
			return seedKeys(ctx, tx, spec.ID, nil, keys, now)
		case statedb.Unchanged:
			_, err = tx.ExecContext(ctx, `UPDATE apps SET pending_file = 0 WHERE id = ?`, spec.ID)
			return err
		case statedb.Apply:
			if err := updateSpec(ctx, tx, spec, now, false); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `UPDATE apps SET file_hash = ?, pending_file = 0 WHERE id = ?`, hash, spec.ID); err != nil {
				return err
			}
			return seedKeys(ctx, tx, spec.ID, r.app.Keys, keys, now)
		default: // statedb.KeepRuntime
			why := "changed at runtime since the file last seeded it"
			if r.app.Source == SourceAPI {
				why = "created through the admin API"
			}
			s.st.Logger.Warn("apps: the file's definition of this app changed but was not applied: the app was "+why+
				"; delete it through the admin API to take the file's version", "app", spec.ID)
			_, err = tx.ExecContext(ctx, `UPDATE apps SET pending_file = 1 WHERE id = ?`, spec.ID)
			return err
		}
	})
	if err != nil {
		if isUniqueViolation(err) {
			return invalid("api_key_sha256", "a key hash is already held by another app")
		}
		if e, ok := errors.AsType[*keyIDHeldError](err); ok {
			return invalid("api_key_sha256", "%v", e)
		}
		return err
	}
	if action == statedb.Create {
		*stored++
	}
	res.Record(action, spec.ID)
	return nil
}

// seedKeys makes the app's file keys match want: missing ones are added
// (or re-activated), file keys no longer wanted are revoked. Keys created
// through the API are left alone.
func seedKeys(ctx context.Context, tx *sql.Tx, appID string, have []Key, want []string, now time.Time) error {
	for _, k := range have {
		if k.Source == SourceFile && k.Active() && !slices.Contains(want, k.SHA256) {
			if err := revokeKey(ctx, tx, appID, k.ID, now); err != nil {
				return err
			}
		}
	}
	for _, sha := range want {
		i := slices.IndexFunc(have, func(k Key) bool { return k.SHA256 == sha })
		if i >= 0 {
			if !have[i].Active() {
				if _, err := tx.ExecContext(ctx, `UPDATE app_keys SET revoked_at = NULL WHERE app_id = ? AND id = ?`, appID, have[i].ID); err != nil {
					return err
				}
			}
			continue
		}
		if err := insertKey(ctx, tx, appID, Key{ID: keyID(sha), SHA256: sha, Source: SourceFile}, now); err != nil {
			return err
		}
	}
	return nil
}

// seedUnlisted deletes the file apps the file no longer lists (keeping,
// with a warning, those changed at runtime) and drops their tombstones.
func (s *Store) seedUnlisted(ctx context.Context, listed map[string]bool, res *SeedResult) error {
	ctx, cancel := s.st.Deadline(ctx)
	defer cancel()
	return s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, overridden FROM apps WHERE source = 'file' ORDER BY id LIMIT ?`, MaxApps)
		if err != nil {
			return err
		}
		type fileApp struct {
			id         string
			overridden bool
		}
		var unlisted []fileApp
		for rows.Next() {
			var a fileApp
			if err := rows.Scan(&a.id, &a.overridden); err != nil {
				rows.Close()
				return err
			}
			if !listed[a.id] {
				unlisted = append(unlisted, a)
			}
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return err
		}
		for _, a := range unlisted {
			if a.overridden {
				s.st.Logger.Warn("apps: the file no longer lists this app, but it was changed at runtime and is kept; delete it through the admin API", "app", a.id)
				if _, err := tx.ExecContext(ctx, `UPDATE apps SET pending_file = 1 WHERE id = ?`, a.id); err != nil {
					return err
				}
				res.KeptRuntime = append(res.KeptRuntime, a.id)
				continue
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM apps WHERE id = ?`, a.id); err != nil {
				return err
			}
			s.st.Logger.Info("apps: removed an app the file no longer lists", "app", a.id)
			res.Removed = append(res.Removed, a.id)
		}
		return statedb.DropTombstones(ctx, tx, "id", listed, MaxApps)
	})
}
