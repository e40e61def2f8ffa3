package apps

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/auth"
)

func certState(c *x509.Certificate) *tls.ConnectionState {
	return &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c}}}
}

// certTarget is the part of the SQLite store and the shared State a
// mapping test drives, so that both follow one rule.
type certTarget struct {
	add  func(id string, spec CertificateSpec) (Certificate, error)
	del  func(id, certID string) (Certificate, error)
	snap func() *Snapshot
}

// testCertificates: a mapping is canonicalised, identifies its app in the
// next snapshot, is refused when any app maps its value already, is
// capped per app, and once deleted admits no one.
func testCertificates(t *testing.T, tg certTarget) {
	t.Helper()
	c, err := tg.add("a", CertificateSpec{SANDNS: "Orders.Internal"})
	if err != nil {
		t.Fatal(err)
	}
	if c.SANDNS != "orders.internal" || len(c.ID) != 12 {
		t.Fatalf("mapping %+v", c)
	}
	leaf := &x509.Certificate{Raw: []byte("leaf"), DNSNames: []string{"orders.internal"}}
	if app, id, err := tg.snap().Identities().IdentifyClientCert(certState(leaf)); err != nil || app != "a" || id != c.ID {
		t.Fatalf("identify: %q %q %v", app, id, err)
	}
	if a, _ := tg.snap().App("a"); len(a.Certificates) != 1 || a.Certificates[0] != c {
		t.Errorf("app a's certificates: %+v", a.Certificates)
	}
	if _, err := tg.add("b", CertificateSpec{SANDNS: "orders.INTERNAL"}); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), `app "a"`) {
		t.Errorf("the same name for app b: %v", err)
	}
	var ve *ValidationError
	if _, err := tg.add("b", CertificateSpec{SANDNS: "x.y", SANURI: "spiffe://x/y"}); !errors.As(err, &ve) {
		t.Errorf("two fields: %v", err)
	}
	if _, err := tg.add("b", CertificateSpec{FingerprintSHA256: "12"}); !errors.As(err, &ve) || ve.Field != "fingerprint_sha256" {
		t.Errorf("a short fingerprint: %v", err)
	}
	if _, err := tg.add("nope", CertificateSpec{SANDNS: "z.y"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown app: %v", err)
	}
	for i := 1; i < MaxCertificates; i++ {
		if _, err := tg.add("a", CertificateSpec{SANURI: "spiffe://example.org/" + strings.Repeat("x", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tg.add("a", CertificateSpec{SANDNS: "one.more"}); !errors.Is(err, ErrConflict) {
		t.Errorf("mapping %d: %v", MaxCertificates+1, err)
	}
	if got, err := tg.del("a", c.ID); err != nil || got != c {
		t.Fatalf("delete: %+v %v", got, err)
	}
	if _, _, err := tg.snap().Identities().IdentifyClientCert(certState(leaf)); !errors.Is(err, auth.ErrClientCertUnknown) {
		t.Errorf("a deleted mapping still identifies: %v", err)
	}
	if _, err := tg.del("a", c.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	if _, err := tg.add("b", CertificateSpec{SANDNS: "orders.internal"}); err != nil {
		t.Errorf("the freed name for app b: %v", err)
	}
}

func TestCertificatesStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apps.db")
	s := open(t, path, nil)
	mustCreate(t, s, Spec{ID: "a"})
	mustCreate(t, s, Spec{ID: "b"})
	testCertificates(t, certTarget{
		add:  func(id string, spec CertificateSpec) (Certificate, error) { return s.AddCertificate(ctx, id, spec) },
		del:  func(id, certID string) (Certificate, error) { return s.DeleteCertificate(ctx, id, certID) },
		snap: s.Current,
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, path, nil)
	if a, _ := s.Current().App("b"); len(a.Certificates) != 1 {
		t.Errorf("after a reopen, b has %d mappings", len(a.Certificates))
	}
}

func TestCertificatesState(t *testing.T) {
	st := NewState()
	now := time.Unix(1e9, 0)
	for _, id := range []string{"a", "b"} {
		if _, err := st.Create(Spec{ID: id}, now); err != nil {
			t.Fatal(err)
		}
	}
	snap := func() *Snapshot {
		s, err := st.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	testCertificates(t, certTarget{
		add: func(id string, spec CertificateSpec) (Certificate, error) {
			c, err := NewCertificate(spec, now)
			if err != nil {
				return c, err
			}
			return c, st.AddCertificate(id, c, now)
		},
		del:  func(id, certID string) (Certificate, error) { return st.DeleteCertificate(id, certID, now) },
		snap: snap,
	})
	for id, r := range st.Apps {
		if err := r.Check(id); err != nil {
			t.Errorf("record %s: %v", id, err)
		}
	}
}

// TestPasswordsState: the shared State keeps passwords with their
// digests, at most MaxActivePasswords active, revoked ones leaving the
// active set, and Check accepts what it wrote.
func TestPasswordsState(t *testing.T) {
	st := NewState()
	now := time.Unix(1e9, 0)
	if _, err := st.Create(Spec{ID: "a"}, now); err != nil {
		t.Fatal(err)
	}
	var made []NewPassword
	for range MaxActivePasswords {
		np, err := MakePassword("", now)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.AddPassword("a", np, now); err != nil {
			t.Fatal(err)
		}
		made = append(made, np)
	}
	np, _ := MakePassword("a-chosen-password", now)
	if err := st.AddPassword("a", np, now); !errors.Is(err, ErrConflict) {
		t.Errorf("a third active password: %v", err)
	}
	snap, _ := st.Snapshot()
	a, _ := snap.App("a")
	stored, bad := a.BasicPasswords()
	if len(stored) != 2 || len(bad) != 0 || !stored[0].Digest.Matches(made[0].Plaintext) {
		t.Fatalf("passwords of the snapshot: %+v %v", stored, bad)
	}
	if _, err := st.RevokePassword("a", made[0].ID, now); err != nil {
		t.Fatal(err)
	}
	if _, err := st.RevokePassword("a", made[0].ID, now); !errors.Is(err, ErrConflict) {
		t.Errorf("revoked twice: %v", err)
	}
	snap, _ = st.Snapshot()
	a, _ = snap.App("a")
	if stored, _ := a.BasicPasswords(); len(stored) != 1 || stored[0].ID != made[1].ID {
		t.Errorf("active after a revoke: %+v", stored)
	}
	if err := st.Apps["a"].Check("a"); err != nil {
		t.Error(err)
	}
	r := st.Apps["a"].clone()
	r.Passwords[1].Digest = "$argon2id$nonsense"
	if err := r.Check("a"); err == nil {
		t.Error("Check accepts an unreadable digest")
	}
}
