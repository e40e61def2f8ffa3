package auth

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
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

func mustIndex(t testing.TB, entries []KeyEntry) *KeyIndex {
	t.Helper()
	x, err := NewKeyIndex(entries)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func TestKeyIndex(t *testing.T) {
	k1, h1 := NewKey()
	k2, h2 := NewKey()
	_, revoked := NewKey()
	_ = revoked // a revoked key is simply not given to the index
	x := mustIndex(t, []KeyEntry{{"app-1", h1}, {"app-2", h2}, {"app-1", h1}})
	if x.Len() != 2 {
		t.Fatalf("len %d", x.Len())
	}
	for key, app := range map[string]string{k1: "app-1", k2: "app-2"} {
		if got, err := x.Authenticate(key); err != nil || got != app {
			t.Fatalf("Authenticate = %q, %v; want %s", got, err, app)
		}
	}
	if _, err := x.Authenticate("lvk_nope"); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := x.Authenticate(""); !errors.Is(err, ErrMissingCredentials) {
		t.Fatalf("empty key: %v", err)
	}
}

func TestNewKeyIndexRejects(t *testing.T) {
	_, h := NewKey()
	for name, entries := range map[string][]KeyEntry{
		"short hex":       {{"a", "abcd"}},
		"not hex":         {{"a", "zz" + h[2:]}},
		"key in two apps": {{"a", h}, {"b", h}},
	} {
		if _, err := NewKeyIndex(entries); err == nil {
			t.Errorf("%s: accepted", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}

// TestWrongKeysTakeTheSamePath: wrong keys of the stored key's length,
// sharing a long prefix with it or none, take exactly the same steps (hash,
// lookup, no comparison) and fail the same way: nothing in the path
// compares the plaintext, so how much of it is right cannot show.
func TestWrongKeysTakeTheSamePath(t *testing.T) {
	k, h := NewKey()
	x := mustIndex(t, []KeyEntry{{"app", h}})
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
	k, h := NewKey()
	x := mustIndex(t, []KeyEntry{{"app", h}})
	if n := testing.AllocsPerRun(100, func() { x.Authenticate(k) }); n != 0 {
		t.Fatalf("%v allocs", n)
	}
}
