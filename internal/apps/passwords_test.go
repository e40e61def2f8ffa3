package apps

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/auth"
)

// TestPasswords: a generated password is returned once and stored only as
// an argon2id digest that verifies it; a chosen one is checked; at most
// MaxActivePasswords are active; a revoked one leaves the snapshot's
// active set; both survive a reopen.
func TestPasswords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apps.db")
	s := open(t, path, nil)
	mustCreate(t, s, Spec{ID: "app"})
	np, err := s.CreatePassword(ctx, "app", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(np.Plaintext, "lvp_") || len(np.ID) != 12 || !strings.HasPrefix(np.Digest, "$argon2id$") {
		t.Fatalf("new password %+v", np)
	}
	d, err := auth.ParsePasswordDigest(np.Digest)
	if err != nil || !d.Matches(np.Plaintext) {
		t.Fatalf("the stored digest does not verify the password: %v", err)
	}
	b, _ := json.Marshal(np)
	if strings.Contains(string(b), "argon2id") {
		t.Errorf("the JSON shows the digest: %s", b)
	}
	if _, err := s.CreatePassword(ctx, "app", "short"); err == nil || !strings.Contains(err.Error(), "password: must be 12 to 128 bytes") {
		t.Errorf("a short password: %v", err)
	}
	if _, err := s.CreatePassword(ctx, "app", "has:a:colon-inside"); err == nil {
		t.Error("a password with a colon was accepted")
	}
	chosen, err := s.CreatePassword(ctx, "app", "correct horse battery")
	if err != nil || chosen.Plaintext != "" {
		t.Fatalf("a chosen password: %+v %v", chosen, err)
	}
	if _, err := s.CreatePassword(ctx, "app", ""); !errors.Is(err, ErrConflict) {
		t.Errorf("a third active password: %v, want ErrConflict", err)
	}
	if _, err := s.CreatePassword(ctx, "nope", ""); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown app: %v", err)
	}
	if _, err := s.RevokePassword(ctx, "app", np.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RevokePassword(ctx, "app", np.ID); !errors.Is(err, ErrConflict) {
		t.Errorf("revoked twice: %v", err)
	}
	if _, err := s.RevokePassword(ctx, "app", "000000000000"); !errors.Is(err, ErrNotFound) {
		t.Errorf("an unknown password: %v", err)
	}
	s.Close()
	s = open(t, path, nil)
	a, ok := s.Current().App("app")
	if !ok || len(a.Passwords) != 2 || a.Passwords[0].Active() || !a.Passwords[1].Active() || a.Passwords[1].ID != chosen.ID {
		t.Fatalf("after reopen: %+v", a.Passwords)
	}
}
