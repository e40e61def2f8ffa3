// API keys in the store: generating, hashing, creating and revoking them
// (the key rows of the apps database).

package apps

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/statedb"
)

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
	now := s.st.Now()
	nk, err := NewAPIKey(now)
	if err != nil {
		return NewKey{}, err
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
		now := s.st.Now()
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
// failure.
var isUniqueViolation = statedb.IsUniqueViolation
