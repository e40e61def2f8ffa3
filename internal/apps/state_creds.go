// State's credentials beyond keys, for cluster mode's shared store:
// basic-auth passwords (with their digests) and certificate mappings,
// under the SQLite store's rules (passwords.go, certs.go).

package apps

import (
	"fmt"
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/auth"
)

// AddPassword adds the password np (MakePassword) to app id
// (Store.CreatePassword's rules); only its digest is kept.
func (st *State) AddPassword(id string, np NewPassword, now time.Time) error {
	r, err := st.get(id)
	if err != nil {
		return err
	}
	active := 0
	for _, p := range r.Passwords {
		if p.Active() {
			active++
		}
		if p.ID == np.ID {
			return fmt.Errorf("the new password's id is taken, try again: %w", ErrConflict)
		}
	}
	if active >= MaxActivePasswords {
		return fmt.Errorf("app %q has %d active passwords, the most it may; revoke one first: %w", id, active, ErrConflict)
	}
	r = r.clone()
	p := SharedPassword{Password: np.Password, Digest: np.Digest}
	p.Password.Digest = ""
	r.Passwords = append(r.Passwords, p)
	r.touch(now)
	st.Apps[id] = r
	return nil
}

// RevokePassword revokes password pwID of app id
// (Store.RevokePassword's rules, MaxRevokedPasswords kept).
func (st *State) RevokePassword(id, pwID string, now time.Time) (Password, error) {
	r, err := st.get(id)
	if err != nil {
		return Password{}, err
	}
	i := slices.IndexFunc(r.Passwords, func(p SharedPassword) bool { return p.ID == pwID })
	if i < 0 {
		return Password{}, fmt.Errorf("app %q has no password %q: %w", id, pwID, ErrNotFound)
	}
	if !r.Passwords[i].Active() {
		return Password{}, fmt.Errorf("password %q of app %q is already revoked: %w", pwID, id, ErrConflict)
	}
	r = r.clone()
	r.Passwords[i].Revoked = now.UTC()
	out := r.Passwords[i].Password
	var revoked []int
	for j, p := range r.Passwords {
		if !p.Active() {
			revoked = append(revoked, j)
		}
	}
	if len(revoked) > MaxRevokedPasswords {
		// Newest revoked first, then by id (the SQLite store's order).
		slices.SortFunc(revoked, func(a, b int) int {
			if c := r.Passwords[b].Revoked.Compare(r.Passwords[a].Revoked); c != 0 {
				return c
			}
			return compareStrings(r.Passwords[a].ID, r.Passwords[b].ID)
		})
		drop := map[int]bool{}
		for _, j := range revoked[MaxRevokedPasswords:] {
			drop[j] = true
		}
		kept := r.Passwords[:0:0]
		for j, p := range r.Passwords {
			if !drop[j] {
				kept = append(kept, p)
			}
		}
		r.Passwords = kept
	}
	r.touch(now)
	st.Apps[id] = r
	return out, nil
}

// AddCertificate adds mapping c (its value canonical) to app id
// (Store.AddCertificate's rules: a value one app maps at most):
// O(apps × MaxCertificates).
func (st *State) AddCertificate(id string, c Certificate, now time.Time) error {
	r, err := st.get(id)
	if err != nil {
		return err
	}
	if len(r.Certificates) >= MaxCertificates {
		return fmt.Errorf("app %q has %d certificate mappings, the most it may; delete one first: %w", id, len(r.Certificates), ErrConflict)
	}
	kind, value := c.Mapping()
	for other, o := range st.Apps {
		for _, oc := range o.Certificates {
			if k, v := oc.Mapping(); k == kind && v == value {
				return fmt.Errorf("%s %q is already mapped to app %q: %w", kind, value, other, ErrConflict)
			}
			if other == id && oc.ID == c.ID {
				return fmt.Errorf("the mapping's id is taken, try again: %w", ErrConflict)
			}
		}
	}
	r = r.clone()
	r.Certificates = append(r.Certificates, c)
	r.touch(now)
	st.Apps[id] = r
	return nil
}

// DeleteCertificate removes mapping certID of app id.
func (st *State) DeleteCertificate(id, certID string, now time.Time) (Certificate, error) {
	r, err := st.get(id)
	if err != nil {
		return Certificate{}, err
	}
	i := slices.IndexFunc(r.Certificates, func(c Certificate) bool { return c.ID == certID })
	if i < 0 {
		return Certificate{}, fmt.Errorf("app %q has no certificate mapping %q: %w", id, certID, ErrNotFound)
	}
	out := r.Certificates[i]
	r = r.clone()
	r.Certificates = slices.Delete(r.Certificates, i, i+1)
	r.touch(now)
	st.Apps[id] = r
	return out, nil
}

// NewCertificate makes the mapping of spec at now (a *ValidationError
// for a bad spec), for a shared store's AddCertificate.
func NewCertificate(spec CertificateSpec, now time.Time) (Certificate, error) {
	return newCertificate(spec, now)
}

// checkSharedPasswords validates the passwords of a record read from a
// shared store: their number, ids and digests.
func checkSharedPasswords(ps []SharedPassword) error {
	if len(ps) > MaxActivePasswords+MaxRevokedPasswords {
		return invalid("passwords", "at most %d, got %d", MaxActivePasswords+MaxRevokedPasswords, len(ps))
	}
	active := 0
	for i, p := range ps {
		if !validRandomID(p.ID) {
			return invalid(fmt.Sprintf("passwords[%d].id", i), "must be 12 lower-case hex digits")
		}
		if _, err := auth.ParsePasswordDigest(p.Digest); err != nil {
			return invalid(fmt.Sprintf("passwords[%d].digest", i), "%v", err)
		}
		if p.Active() {
			active++
		}
	}
	if active > MaxActivePasswords {
		return invalid("passwords", "at most %d active, got %d", MaxActivePasswords, active)
	}
	return nil
}
