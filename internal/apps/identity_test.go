package apps

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestSeedRefusesKeyOfAnotherApp: the store refuses the change that would
// give a key hash to a second app; the first keeps it, and the snapshot's
// identity index has nothing to refuse.
func TestSeedRefusesKeyOfAnotherApp(t *testing.T) {
	s := open(t, "", nil)
	k := hashOf("lvk_shared")
	res, err := s.Seed(ctx, []FileApp{fileApp("a", 0, k), fileApp("b", 0, k)})
	if err != nil {
		t.Fatal(err)
	}
	var ve *ValidationError
	if err := res.Failed["b"]; !errors.As(err, &ve) || ve.Field != "api_key_sha256" || !strings.Contains(ve.Message, "already held by another app") {
		t.Fatalf("second app with the key: %v, want a validation error on api_key_sha256", err)
	}
	if ref, ok := s.Current().LookupKey(sha256.Sum256([]byte("lvk_shared"))); !ok || ref.App.ID != "a" {
		t.Fatalf("the key resolves to %+v, %v; want app a", ref, ok)
	}
	if c := s.Current().Identities().Conflicts(); len(c) != 0 {
		t.Fatalf("conflicts %v", c)
	}
}

// TestSeedRefusesKeyIDOfAnotherApp: two hashes whose first 12 hex digits
// (the key id a signed request names) are alike cannot belong to two apps.
func TestSeedRefusesKeyIDOfAnotherApp(t *testing.T) {
	s := open(t, "", nil)
	h1 := "abcdefabcdef" + strings.Repeat("1", 52)
	h2 := "abcdefabcdef" + strings.Repeat("2", 52)
	res, err := s.Seed(ctx, []FileApp{fileApp("a", 0, h1), fileApp("b", 0, h2)})
	if err != nil {
		t.Fatal(err)
	}
	var ve *ValidationError
	if err := res.Failed["b"]; !errors.As(err, &ve) || ve.Field != "api_key_sha256" || !strings.Contains(ve.Message, "abcdefabcdef") {
		t.Fatalf("second app with the key id: %v, want a validation error naming it", err)
	}
	t.Log(res.Failed["b"])
	if appID, secret, ok := s.Current().Identities().LookupSecret("abcdefabcdef"); !ok || appID != "a" || len(secret) != 32 {
		t.Fatalf("LookupSecret = %q, %x, %v; want app a", appID, secret, ok)
	}
}

// TestSnapshotRefusesSharedKey: should the database hold a key for two
// apps anyway (changed behind the store's back), the snapshot admits
// neither with it, and the store logs it; the request path once let the
// last app win. Only the key id can be shared so (the hash is UNIQUE in
// the schema), so the digest case is built directly.
func TestSnapshotRefusesSharedKey(t *testing.T) {
	k := Key{ID: hashOf("lvk_shared")[:12], SHA256: hashOf("lvk_shared"), Source: SourceAPI}
	snap, err := newSnapshot(map[string]*App{
		"a": {ID: "a", Status: StatusActive, Keys: []Key{k}},
		"b": {ID: "b", Status: StatusActive, Keys: []Key{k, {ID: hashOf("lvk_own")[:12], SHA256: hashOf("lvk_own")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := snap.Authenticate(sha256.Sum256([]byte("lvk_shared"))); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("the shared key: %v, want ErrUnknownKey", err)
	}
	if a, _, err := snap.Authenticate(sha256.Sum256([]byte("lvk_own"))); err != nil || a.ID != "b" {
		t.Errorf("the other key: %v, %v", a, err)
	}
	if c := snap.Identities().Conflicts(); len(c) != 1 || c[0].Apps != [2]string{"a", "b"} {
		t.Errorf("conflicts %v", c)
	}

	var logs bytes.Buffer
	s := open(t, "", &logs)
	mustCreate(t, s, Spec{ID: "a"})
	mustCreate(t, s, Spec{ID: "b"})
	nk, err := s.CreateKey(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// Behind the store's back: app b gets a key with a's key id.
	if _, err := s.st.DB.ExecContext(ctx, `INSERT INTO app_keys (`+keyColumns+`) VALUES ('b', ?, '', ?, 'api', ?, NULL)`,
		nk.ID, strings.Repeat("0", 64), time.Now().UnixNano()); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, Spec{ID: "c"}) // any change rebuilds the snapshot
	if _, _, ok := s.Current().Identities().LookupSecret(nk.ID); ok {
		t.Error("a key id two apps hold signs")
	}
	if a, _, err := s.Current().Authenticate(sha256.Sum256([]byte(nk.Plaintext))); err != nil || a.ID != "a" {
		t.Errorf("a's key as an API key: %v, %v", a, err)
	}
	if !strings.Contains(logs.String(), "a key is held by two apps") || !strings.Contains(logs.String(), nk.ID) {
		t.Errorf("not logged: %s", logs.String())
	}
}
