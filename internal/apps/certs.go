// Client certificate mappings in the store (auth: client_cert): an app
// is named by a verified client certificate's SHA-256 fingerprint, or by
// a DNS name or URI among its subject alternative names. Added, listed
// and deleted like keys; a mapping holds no secret (a certificate is
// public: what admits is the private key the TLS handshake proved, and
// the CA that signed it).

package apps

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/auth"
)

// MaxCertificates caps an app's certificate mappings.
const MaxCertificates = 16

// Certificate is one certificate mapping of an app: exactly one of
// FingerprintSHA256, SANDNS and SANURI is set, in canonical form
// (auth.CanonicalCertValue).
type Certificate struct {
	// ID is 12 random hex digits naming the mapping.
	ID                string    `json:"id"`
	FingerprintSHA256 string    `json:"fingerprint_sha256,omitempty"`
	SANDNS            string    `json:"san_dns,omitempty"`
	SANURI            string    `json:"san_uri,omitempty"`
	Created           time.Time `json:"created"`
}

// CertificateSpec is a mapping as the admin API adds it: exactly one of
// its fields.
type CertificateSpec struct {
	FingerprintSHA256 string `json:"fingerprint_sha256,omitempty"`
	SANDNS            string `json:"san_dns,omitempty"`
	SANURI            string `json:"san_uri,omitempty"`
}

// Mapping returns c's kind and canonical value.
func (c Certificate) Mapping() (auth.CertKind, string) {
	switch {
	case c.FingerprintSHA256 != "":
		return auth.CertFingerprint, c.FingerprintSHA256
	case c.SANURI != "":
		return auth.CertSANURI, c.SANURI
	}
	return auth.CertSANDNS, c.SANDNS
}

// Canonical checks s (exactly one field, its value as
// auth.CanonicalCertValue accepts it) and returns the kind and canonical
// value, or a *ValidationError naming the field.
func (s CertificateSpec) Canonical() (auth.CertKind, string, error) {
	var kind auth.CertKind
	var value string
	n := 0
	for _, f := range []struct {
		k auth.CertKind
		v string
	}{{auth.CertFingerprint, s.FingerprintSHA256}, {auth.CertSANDNS, s.SANDNS}, {auth.CertSANURI, s.SANURI}} {
		if f.v != "" {
			kind, value = f.k, f.v
			n++
		}
	}
	if n != 1 {
		return "", "", invalid("certificate", "exactly one of fingerprint_sha256, san_dns and san_uri, got %d", n)
	}
	c, err := auth.CanonicalCertValue(kind, value)
	if err != nil {
		return "", "", invalid(string(kind), "%s, got %s", err.Error(), quote(value))
	}
	return kind, c, nil
}

// newCertificate makes the mapping of spec at now, with a random id.
func newCertificate(spec CertificateSpec, now time.Time) (Certificate, error) {
	kind, value, err := spec.Canonical()
	if err != nil {
		return Certificate{}, err
	}
	var rid [6]byte
	if _, err := rand.Read(rid[:]); err != nil {
		return Certificate{}, err
	}
	return certificateOf(hex.EncodeToString(rid[:]), kind, value, now.UTC()), nil
}

func certificateOf(id string, kind auth.CertKind, value string, created time.Time) Certificate {
	c := Certificate{ID: id, Created: created}
	switch kind {
	case auth.CertFingerprint:
		c.FingerprintSHA256 = value
	case auth.CertSANURI:
		c.SANURI = value
	default:
		c.SANDNS = value
	}
	return c
}

// CertificateBackend is a Backend that keeps certificate mappings: both
// *Store and cluster mode's store.
type CertificateBackend interface {
	AddCertificate(ctx context.Context, id string, spec CertificateSpec) (Certificate, error)
	DeleteCertificate(ctx context.Context, id, certID string) (Certificate, error)
}

var _ CertificateBackend = (*Store)(nil)

// AddCertificate maps the certificates spec describes to app id. A value
// some app already maps (this one included) is ErrConflict, naming it;
// an app with MaxCertificates mappings is ErrConflict too.
func (s *Store) AddCertificate(ctx context.Context, id string, spec CertificateSpec) (Certificate, error) {
	c, err := newCertificate(spec, s.st.Now())
	if err != nil {
		return Certificate{}, err
	}
	kind, value := c.Mapping()
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		r, err := getRecord(ctx, tx, id)
		if err != nil {
			return err
		}
		if len(r.app.Certificates) >= MaxCertificates {
			return fmt.Errorf("app %q has %d certificate mappings, the most it may; delete one first: %w", id, len(r.app.Certificates), ErrConflict)
		}
		var other string
		switch err := tx.QueryRowContext(ctx, `SELECT app_id FROM app_certificates WHERE kind = ? AND value = ?`, string(kind), value).Scan(&other); {
		case err == nil:
			return fmt.Errorf("%s %q is already mapped to app %q: %w", kind, value, other, ErrConflict)
		case !errors.Is(err, sql.ErrNoRows):
			return err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO app_certificates (app_id, id, kind, value, created_at) VALUES (?, ?, ?, ?, ?)`,
			id, c.ID, string(kind), value, c.Created.UnixNano()); err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("the mapping or its id is taken, try again: %w", ErrConflict)
			}
			return err
		}
		return touchRuntime(ctx, tx, id, s.st.Now())
	})
	if err != nil {
		return Certificate{}, err
	}
	return c, nil
}

// DeleteCertificate removes mapping certID of app id at once: the next
// snapshot no longer admits the certificate. Unknown: ErrNotFound.
func (s *Store) DeleteCertificate(ctx context.Context, id, certID string) (Certificate, error) {
	var out Certificate
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		r, err := getRecord(ctx, tx, id)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(r.app.Certificates, func(c Certificate) bool { return c.ID == certID })
		if i < 0 {
			return fmt.Errorf("app %q has no certificate mapping %q: %w", id, certID, ErrNotFound)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM app_certificates WHERE app_id = ? AND id = ?`, id, certID); err != nil {
			return err
		}
		out = r.app.Certificates[i]
		return touchRuntime(ctx, tx, id, s.st.Now())
	})
	return out, err
}

// loadCertificates appends every mapping row to its app in byID (or to
// one app when id is set), oldest first.
func loadCertificates(ctx context.Context, q querier, byID map[string]*App, id string) error {
	const cols = `app_id, id, kind, value, created_at`
	query, args := `SELECT `+cols+` FROM app_certificates ORDER BY app_id, created_at, id`, []any(nil)
	if id != "" {
		query, args = `SELECT `+cols+` FROM app_certificates WHERE app_id = ? ORDER BY created_at, id`, []any{id}
	}
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var appID, cid, kind, value string
		var created int64
		if err := rows.Scan(&appID, &cid, &kind, &value, &created); err != nil {
			return err
		}
		if a := byID[appID]; a != nil {
			a.Certificates = append(a.Certificates, certificateOf(cid, auth.CertKind(kind), value, time.Unix(0, created).UTC()))
		}
	}
	return rows.Err()
}

// certMappings returns the mappings of every app of byID for the
// identity index.
func certMappings(byID map[string]*App) []auth.CertMapping {
	var out []auth.CertMapping
	for id, a := range byID {
		for _, c := range a.Certificates {
			kind, value := c.Mapping()
			out = append(out, auth.CertMapping{AppID: id, ID: c.ID, Kind: kind, Value: value})
		}
	}
	return out
}

// checkCertificates validates the mappings of a record read from a
// shared store: at most MaxCertificates, each with an id and exactly one
// canonical value.
func checkCertificates(cs []Certificate) error {
	if len(cs) > MaxCertificates {
		return invalid("certificates", "at most %d, got %d", MaxCertificates, len(cs))
	}
	for i, c := range cs {
		path := fmt.Sprintf("certificates[%d]", i)
		if !validRandomID(c.ID) {
			return invalid(path+".id", "must be 12 lower-case hex digits")
		}
		_, value, err := CertificateSpec{FingerprintSHA256: c.FingerprintSHA256, SANDNS: c.SANDNS, SANURI: c.SANURI}.Canonical()
		if err != nil {
			return invalid(path, "%v", err)
		}
		if _, v := c.Mapping(); v != value {
			return invalid(path, "not in canonical form")
		}
	}
	return nil
}

// validRandomID reports whether s is 12 lower-case hex digits (a password
// or certificate mapping id).
func validRandomID(s string) bool {
	return len(s) == 12 && ValidKeySHA256(s+"0000000000000000000000000000000000000000000000000000")
}
