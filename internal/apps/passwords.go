// Basic-auth passwords in the store: created (generated or given),
// revoked and listed like keys; kept only as argon2id digests (package
// auth). The basic-auth user name is the app's id.

package apps

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/auth"
)

// Password is one basic-auth password of an app. The admin API shows its
// id and times, never the digest.
type Password struct {
	// ID is 12 random hex digits naming the password (not derived from
	// it).
	ID string `json:"id"`
	// Digest is the argon2id digest ("$argon2id$v=19$m=...,t=...,p=...$salt$hash").
	Digest  string    `json:"-"`
	Created time.Time `json:"created"`
	// Revoked is when the password was revoked; zero while it is active.
	Revoked time.Time `json:"revoked,omitzero"`
}

// Active reports whether p is not revoked.
func (p Password) Active() bool { return p.Revoked.IsZero() }

// NewPassword is a password just created: its record, and the plaintext
// when levee generated it (returned this once, stored nowhere).
type NewPassword struct {
	Password
	Plaintext string `json:"password,omitempty"`
}

// Bounds of passwords.
const (
	// MaxActivePasswords caps an app's passwords that are not revoked: two,
	// so one can be rotated without a gap. Each costs an argon2 run on a
	// request whose password matches no cached success.
	MaxActivePasswords = 2
	// MaxRevokedPasswords caps the revoked passwords kept per app.
	MaxRevokedPasswords = 16
	// MinPasswordLen and MaxPasswordLen bound a password given by the
	// caller (in bytes).
	MinPasswordLen = 12
	MaxPasswordLen = 128
)

// passwordPrefix starts every password levee generates.
const passwordPrefix = "lvp_"

// CheckPassword says what is wrong with a password a caller chose, or "".
// A basic credential holds one colon, so a password holds none; control
// bytes are refused too (auth.ParseBasic refuses them on the wire).
func CheckPassword(pw string) string {
	if len(pw) < MinPasswordLen || len(pw) > MaxPasswordLen {
		return fmt.Sprintf("must be %d to %d bytes, got %d", MinPasswordLen, MaxPasswordLen, len(pw))
	}
	for i := 0; i < len(pw); i++ {
		if c := pw[i]; c < 0x20 || c == 0x7f || c == ':' {
			return "must not contain a colon or a control byte"
		}
	}
	return ""
}

// CreatePassword adds a basic-auth password to app id: plaintext when
// given (CheckPassword), else a generated one ("lvp_" and 32 random bytes
// in base64url), returned in the result only. An app with
// MaxActivePasswords active ones is ErrConflict. The argon2id digest is
// computed before the write lock is taken.
func (s *Store) CreatePassword(ctx context.Context, id, plaintext string) (NewPassword, error) {
	now := s.st.Now()
	np, err := MakePassword(plaintext, now)
	if err != nil {
		return np, err
	}
	digest := np.Digest
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		r, err := getRecord(ctx, tx, id)
		if err != nil {
			return err
		}
		active := 0
		for _, p := range r.app.Passwords {
			if p.Active() {
				active++
			}
		}
		if active >= MaxActivePasswords {
			return fmt.Errorf("app %q has %d active passwords, the most it may; revoke one first: %w", id, active, ErrConflict)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO app_passwords (app_id, id, digest, created_at, revoked_at) VALUES (?, ?, ?, ?, NULL)`,
			id, np.ID, digest, now.UnixNano()); err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("the new password's id is taken, try again: %w", ErrConflict)
			}
			return err
		}
		return touchRuntime(ctx, tx, id, now)
	})
	if err != nil {
		return NewPassword{}, err
	}
	return np, nil
}

// MakePassword makes a password record at now: of plaintext when given
// (CheckPassword), else of a generated one ("lvp_" and 32 random bytes in
// base64url), which is then in the result's Plaintext only. It runs
// argon2id (tens of milliseconds): call it before taking any lock.
func MakePassword(plaintext string, now time.Time) (NewPassword, error) {
	var np NewPassword
	if plaintext == "" {
		var b [32]byte
		if _, err := rand.Read(b[:]); err != nil {
			return np, err
		}
		plaintext = passwordPrefix + base64.RawURLEncoding.EncodeToString(b[:])
		np.Plaintext = plaintext
	} else if problem := CheckPassword(plaintext); problem != "" {
		return np, invalid("password", "%s", problem)
	}
	digest, err := auth.HashPassword(plaintext)
	if err != nil {
		return np, err
	}
	var rid [6]byte
	if _, err := rand.Read(rid[:]); err != nil {
		return np, err
	}
	np.Password = Password{ID: hex.EncodeToString(rid[:]), Digest: digest, Created: now.UTC()}
	return np, nil
}

// RevokePassword revokes password pwID of app id at once: the next
// snapshot no longer holds it, and a cached success of it no longer
// matches (auth.BasicGuard checks the id is still active). Already
// revoked is ErrConflict; an unknown app or password ErrNotFound.
func (s *Store) RevokePassword(ctx context.Context, id, pwID string) (Password, error) {
	var out Password
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		r, err := getRecord(ctx, tx, id)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(r.app.Passwords, func(p Password) bool { return p.ID == pwID })
		if i < 0 {
			return fmt.Errorf("app %q has no password %q: %w", id, pwID, ErrNotFound)
		}
		if !r.app.Passwords[i].Active() {
			return fmt.Errorf("password %q of app %q is already revoked: %w", pwID, id, ErrConflict)
		}
		now := s.st.Now()
		if _, err := tx.ExecContext(ctx, `UPDATE app_passwords SET revoked_at = ? WHERE app_id = ? AND id = ?`, now.UnixNano(), id, pwID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM app_passwords WHERE app_id = ? AND revoked_at IS NOT NULL AND id NOT IN (
			SELECT id FROM app_passwords WHERE app_id = ? AND revoked_at IS NOT NULL ORDER BY revoked_at DESC, id LIMIT ?)`,
			id, id, MaxRevokedPasswords); err != nil {
			return err
		}
		out = r.app.Passwords[i]
		out.Revoked = now.UTC()
		return touchRuntime(ctx, tx, id, now)
	})
	return out, err
}

const passwordColumns = `app_id, id, digest, created_at, revoked_at`

func scanPassword(sc interface{ Scan(...any) error }) (string, Password, error) {
	var (
		appID   string
		p       Password
		created int64
		revoked sql.NullInt64
	)
	if err := sc.Scan(&appID, &p.ID, &p.Digest, &created, &revoked); err != nil {
		return "", Password{}, err
	}
	p.Created = time.Unix(0, created).UTC()
	if revoked.Valid {
		p.Revoked = time.Unix(0, revoked.Int64).UTC()
	}
	return appID, p, nil
}

// loadPasswords appends every password row to its app in byID (or to
// one app when id is set), oldest first.
func loadPasswords(ctx context.Context, q querier, byID map[string]*App, id string) error {
	query, args := `SELECT `+passwordColumns+` FROM app_passwords ORDER BY app_id, created_at, id`, []any(nil)
	if id != "" {
		query, args = `SELECT `+passwordColumns+` FROM app_passwords WHERE app_id = ? ORDER BY created_at, id`, []any{id}
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		appID, p, err := scanPassword(rows)
		if err != nil {
			return err
		}
		if a := byID[appID]; a != nil {
			a.Passwords = append(a.Passwords, p)
		}
	}
	return rows.Err()
}

// BasicPasswords returns the app's active passwords parsed for
// verification (auth.BasicGuard), and the ids of any whose digest does not
// parse (left out: they admit no one).
func (a *App) BasicPasswords() (out []auth.StoredPassword, unreadable []string) {
	for _, p := range a.Passwords {
		if !p.Active() {
			continue
		}
		d, err := auth.ParsePasswordDigest(p.Digest)
		if err != nil {
			unreadable = append(unreadable, p.ID)
			continue
		}
		out = append(out, auth.StoredPassword{ID: p.ID, Digest: d})
	}
	return out, unreadable
}
