package auth

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestNewKey(t *testing.T) {
	k, h := NewKey()
	if !regexp.MustCompile(`^lvk_[A-Za-z0-9_-]{43}$`).MatchString(k) {
		t.Fatalf("key %q", k)
	}
	d := HashKey(k)
	if h != hex.EncodeToString(d[:]) {
		t.Fatalf("hash %s is not the key's SHA-256", h)
	}
	if k2, _ := NewKey(); k2 == k {
		t.Fatal("two equal keys")
	}
	if err := checkKey("test", k); err != nil {
		t.Fatalf("NewKey's key fails extraction: %v", err)
	}
}

func TestExtractAPIKey(t *testing.T) {
	long := "k" + string(make([]byte, 0)) + fmt.Sprintf("%0300d", 0)
	for _, c := range []struct {
		name    string
		headers map[string][]string
		key     string
		reason  Reason
	}{
		{"bearer", map[string][]string{"Authorization": {"Bearer lvk_abc"}}, "lvk_abc", ""},
		{"bearer lower-case scheme", map[string][]string{"Authorization": {"bearer lvk_abc"}}, "lvk_abc", ""},
		{"x-api-key", map[string][]string{"X-Api-Key": {" lvk_abc "}}, "lvk_abc", ""},
		{"both equal", map[string][]string{"Authorization": {"Bearer lvk_abc"}, "X-Api-Key": {"lvk_abc"}}, "lvk_abc", ""},
		{"token68 padding", map[string][]string{"X-Api-Key": {"abc+/=="}}, "abc+/==", ""},
		{"none", map[string][]string{}, "", ReasonMissingCredentials},
		{"both different", map[string][]string{"Authorization": {"Bearer lvk_abc"}, "X-Api-Key": {"lvk_xyz"}}, "", ReasonMalformedCredentials},
		{"basic scheme", map[string][]string{"Authorization": {"Basic dXNlcjpwYXNz"}}, "", ReasonMalformedCredentials},
		{"scheme only", map[string][]string{"Authorization": {"Bearer"}}, "", ReasonMalformedCredentials},
		{"empty bearer", map[string][]string{"Authorization": {"Bearer "}}, "", ReasonMalformedCredentials},
		{"empty header", map[string][]string{"X-Api-Key": {""}}, "", ReasonMalformedCredentials},
		{"two authorization", map[string][]string{"Authorization": {"Bearer a", "Bearer a"}}, "", ReasonMalformedCredentials},
		{"two x-api-key", map[string][]string{"X-Api-Key": {"a", "b"}}, "", ReasonMalformedCredentials},
		{"space inside", map[string][]string{"X-Api-Key": {"lvk abc"}}, "", ReasonMalformedCredentials},
		{"char after padding", map[string][]string{"X-Api-Key": {"ab=c"}}, "", ReasonMalformedCredentials},
		{"too long", map[string][]string{"X-Api-Key": {long}}, "", ReasonMalformedCredentials},
	} {
		t.Run(c.name, func(t *testing.T) {
			key, err := ExtractAPIKey(http.Header(c.headers))
			if c.reason == "" {
				if err != nil || key != c.key {
					t.Fatalf("got %q, %v; want %q", key, err, c.key)
				}
				return
			}
			var ae *Error
			if !errors.As(err, &ae) || ae.Reason != c.reason {
				t.Fatalf("got %q, %v; want reason %s", key, err, c.reason)
			}
		})
	}
}

func TestIsSigned(t *testing.T) {
	if !IsSigned(http.Header{"Authorization": {"LEVEE-HMAC-SHA256 keyId=a, signature=b"}}) {
		t.Fatal("signed header not recognised")
	}
	if IsSigned(http.Header{"Authorization": {"Bearer x"}}) || IsSigned(http.Header{}) {
		t.Fatal("unsigned header recognised as signed")
	}
}

func mustIndex(t testing.TB, creds []Credential) *Index {
	t.Helper()
	x, err := NewIndex(creds)
	if err != nil {
		t.Fatal(err)
	}
	if c := x.Conflicts(); len(c) > 0 {
		t.Fatalf("conflicts: %v", c)
	}
	return x
}

// cred is the credential of key for app, its key ID the digest's first 6
// bytes in hex, as the app store derives it.
func cred(app, key string) Credential {
	d := HashKey(key)
	return Credential{AppID: app, KeyID: hex.EncodeToString(d[:6]), Digest: d}
}

func TestIndex(t *testing.T) {
	k1, _ := NewKey()
	k2, _ := NewKey()
	x := mustIndex(t, []Credential{cred("app-1", k1), cred("app-2", k2), cred("app-1", k1)})
	if x.Len() != 2 {
		t.Fatalf("len %d", x.Len())
	}
	for key, app := range map[string]string{k1: "app-1", k2: "app-2"} {
		if got, err := x.Authenticate(key); err != nil || got != app {
			t.Fatalf("Authenticate = %q, %v; want %s", got, err, app)
		}
		c := cred(app, key)
		if got, keyID, ok := x.LookupKey(c.Digest); !ok || got != app || keyID != c.KeyID {
			t.Fatalf("LookupKey = %q, %q, %v; want %s, %s", got, keyID, ok, app, c.KeyID)
		}
		if got, secret, ok := x.LookupSecret(c.KeyID); !ok || got != app || !bytes.Equal(secret, c.Digest[:]) {
			t.Fatalf("LookupSecret(%s) = %q, %x, %v; want %s and the key's digest", c.KeyID, got, secret, ok, app)
		}
	}
	if _, err := x.Authenticate("lvk_nope"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := x.Authenticate(""); !errors.Is(err, ErrMissingCredentials) {
		t.Fatalf("empty key: %v", err)
	}
	if _, _, ok := x.LookupSecret("000000000000"); ok {
		t.Fatal("unknown key ID found")
	}
	var none *Index
	if _, _, ok := none.LookupKey(HashKey(k1)); ok || none.Len() != 0 {
		t.Fatal("a nil index holds a key")
	}
	if _, _, ok := none.LookupSecret(cred("", k1).KeyID); ok {
		t.Fatal("a nil index holds a secret")
	}
	if _, err := NewIndex(make([]Credential, maxIndexEntries+1)); err == nil {
		t.Fatal("an index over its bound was built")
	}
}

// TestIndexRefusesSharedDigest: a key held by two (or three) apps
// authenticates as none of them, whatever the order they come in, and is
// reported; the other keys are unaffected. The request path once let the
// last app win such a key.
func TestIndexRefusesSharedDigest(t *testing.T) {
	shared, _ := NewKey()
	own, _ := NewKey()
	for _, creds := range [][]Credential{
		{cred("a", shared), cred("b", shared), cred("b", own)},
		{cred("b", own), cred("b", shared), cred("a", shared)},
		{cred("a", shared), cred("b", shared), cred("c", shared), cred("b", own)},
	} {
		x, err := NewIndex(creds)
		if err != nil {
			t.Fatal(err)
		}
		if app, err := x.Authenticate(shared); !errors.Is(err, ErrUnknownKey) {
			t.Errorf("%v: the shared key authenticates as %q, %v; want unknown_key", creds, app, err)
		}
		if _, _, ok := x.LookupSecret(cred("", shared).KeyID); ok {
			t.Errorf("%v: the shared key signs", creds)
		}
		if app, err := x.Authenticate(own); err != nil || app != "b" {
			t.Errorf("the other key: %q, %v", app, err)
		}
		c := x.Conflicts()
		if len(c) != len(creds)-2 || c[0].What != "digest" || c[0].Key != cred("", shared).KeyID {
			t.Errorf("%v: conflicts %v", creds, c)
		}
		t.Logf("%v", c)
	}
}

// TestIndexRefusesSharedKeyID: two different keys of two apps with the
// same key ID (their digests' first 6 bytes alike) still authenticate as
// API keys, but neither signs: the secret to check a signature against
// would be a guess.
func TestIndexRefusesSharedKeyID(t *testing.T) {
	k1, _ := NewKey()
	k2, _ := NewKey()
	c1, c2 := cred("a", k1), cred("b", k2)
	c2.KeyID = c1.KeyID
	x, err := NewIndex([]Credential{c1, c2})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, ok := x.LookupSecret(c1.KeyID); ok {
		t.Error("a key ID two apps hold signs")
	}
	for key, app := range map[string]string{k1: "a", k2: "b"} {
		if got, err := x.Authenticate(key); err != nil || got != app {
			t.Errorf("Authenticate = %q, %v; want %s", got, err, app)
		}
	}
	if c := x.Conflicts(); len(c) != 1 || c[0].What != "key id" || c[0].Apps != [2]string{"a", "b"} {
		t.Errorf("conflicts %v", c)
	}
}

func TestParseDigest(t *testing.T) {
	_, h := NewKey()
	if d, err := ParseDigest(strings.ToUpper(h)); err != nil || hex.EncodeToString(d[:]) != h {
		t.Fatalf("ParseDigest(upper case) = %x, %v", d, err)
	}
	for name, s := range map[string]string{"short hex": "abcd", "not hex": "zz" + h[2:]} {
		if _, err := ParseDigest(s); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestWrongKeysTakeTheSamePath: wrong keys of the stored key's length,
// sharing a long prefix with it or none, take exactly the same steps (hash,
// lookup, no comparison) and fail the same way: nothing in the path
// compares the plaintext, so how much of it is right cannot show.
func TestWrongKeysTakeTheSamePath(t *testing.T) {
	k, _ := NewKey()
	x := mustIndex(t, []Credential{cred("app", k)})
	var steps []string
	x.trace = func(s string) { steps = append(steps, s) }
	flip := func(i int) string {
		b := []byte(k)
		b[i] ^= 1
		return string(b)
	}
	other, _ := NewKey()
	var paths [][]string
	for _, wrong := range []string{flip(len(k) - 1), flip(len(KeyPrefix)), flip(0), other} {
		steps = nil
		if _, err := x.Authenticate(wrong); !errors.Is(err, ErrUnknownKey) {
			t.Fatalf("%q: %v", wrong, err)
		}
		paths = append(paths, steps)
	}
	for _, p := range paths[1:] {
		if !slices.Equal(p, paths[0]) {
			t.Fatalf("wrong keys took different paths: %q", paths)
		}
	}
	steps = nil
	x.Authenticate(k)
	if !slices.Equal(steps, []string{"hash", "lookup", "compare"}) {
		t.Fatalf("right key's path: %q", steps)
	}
}

func TestAuthenticateDoesNotAllocate(t *testing.T) {
	k, _ := NewKey()
	c := cred("app", k)
	x := mustIndex(t, []Credential{c})
	if n := testing.AllocsPerRun(100, func() { x.Authenticate(k); x.LookupSecret(c.KeyID) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}
