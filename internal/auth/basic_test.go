package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func basicHeader(userpass string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(userpass))
}

func TestParseBasic(t *testing.T) {
	good := map[string][2]string{
		basicHeader("app1:s3cret"):                                  {"app1", "s3cret"},
		"bAsIc " + base64.StdEncoding.EncodeToString([]byte("a:b")): {"a", "b"},
		basicHeader("app:pass word"):                                {"app", "pass word"},
	}
	for h, want := range good {
		u, p, err := ParseBasicValue(h)
		if err != nil || u != want[0] || p != want[1] {
			t.Errorf("%q: %q %q %v, want %q", h, u, p, err, want)
		}
	}
	bad := []string{
		"", "Basic", "Basic ", "Bearer abc", basicHeader("nocolon"), basicHeader(":pass"), basicHeader("user:"),
		basicHeader("a:b:c"), basicHeader("a:b\x00"), basicHeader("a\x7f:b"), basicHeader("a:b\n"),
		"Basic " + base64.RawStdEncoding.EncodeToString([]byte("ab:cd1")) + "!",              // not base64
		"Basic " + base64.URLEncoding.EncodeToString([]byte("a:\xfb\xff")),                   // URL alphabet
		"Basic " + strings.TrimRight(base64.StdEncoding.EncodeToString([]byte("a:bc")), "="), // unpadded
		"Basic " + strings.Repeat("QUFB", MaxBasicCredentials/4+1),
		"Basic  " + base64.StdEncoding.EncodeToString([]byte("a:b")),
	}
	for _, h := range bad {
		if u, p, err := ParseBasicValue(h); !errors.Is(err, ErrMalformedCredentials) {
			t.Errorf("%q: %q %q %v, want malformed_credentials", h, u, p, err)
		}
	}
	if _, _, err := ParseBasic(http.Header{}); !errors.Is(err, ErrMissingCredentials) {
		t.Errorf("no header: %v", err)
	}
	if _, _, err := ParseBasic(http.Header{"Authorization": {basicHeader("a:b"), basicHeader("a:b")}}); !errors.Is(err, ErrMalformedCredentials) {
		t.Errorf("two headers: %v", err)
	}
}

func TestPasswordDigest(t *testing.T) {
	s, err := HashPassword("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(s, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("digest %q", s)
	}
	d, err := ParsePasswordDigest(s)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Matches("correct horse") || d.Matches("correct horsE") || d.Matches("") {
		t.Fatal("Matches disagrees")
	}
	for _, bad := range []string{"", "$argon2i$v=19$m=19456,t=2,p=1$c2FsdHNhbHQ$aGFzaGhhc2hoYXNoaGFzaA",
		strings.Replace(s, "m=19456", "m=999999999", 1), strings.Replace(s, "t=2", "t=0", 1), strings.Replace(s, "t=2", "t=02", 1),
		strings.Replace(s, "v=19", "v=16", 1), s + "$",
		// A hash cut below 16 bytes (cut to 17 it would still be a valid
		// digest one time in four: whenever its last base64 digit's spare
		// bits happen to be zero).
		s[:len(s)-30]} {
		if _, err := ParsePasswordDigest(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestBasicGuard: a success is cached (a second check runs no argon2), a
// cached success of a password no longer active does not match, and the
// failure limit blocks an address for its window only, on a fake clock.
func TestBasicGuard(t *testing.T) {
	g, err := NewBasicGuard(BasicOptions{MaxFailures: 3, FailureWindow: time.Minute, CacheEntries: 2})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := HashPassword("pw1")
	d, _ := ParsePasswordDigest(s)
	pws := []StoredPassword{{ID: "p1", Digest: d}}
	now := time.Unix(1_800_000_000, 0)
	ctx := context.Background()
	if id, err := g.Verify(ctx, "app", "pw1", pws, now); err != nil || id != "p1" {
		t.Fatalf("right password: %q %v", id, err)
	}
	start := time.Now()
	for range 100 {
		if _, err := g.Verify(ctx, "app", "pw1", pws, now); err != nil {
			t.Fatal(err)
		}
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Errorf("100 cached verifications took %v: the cache is not used", el)
	}
	if _, err := g.Verify(ctx, "app", "pw2", pws, now); !errors.Is(err, ErrBadPassword) {
		t.Fatalf("wrong password: %v", err)
	}
	if _, err := g.Verify(ctx, "other", "pw1", nil, now); !errors.Is(err, ErrBadPassword) {
		t.Fatalf("revoked (no active password): %v", err)
	}
	// The password revoked and another set: the cached pair no longer matches.
	s2, _ := HashPassword("pw2")
	d2, _ := ParsePasswordDigest(s2)
	if _, err := g.Verify(ctx, "app", "pw1", []StoredPassword{{ID: "p2", Digest: d2}}, now); !errors.Is(err, ErrBadPassword) {
		t.Fatalf("changed password still matched from the cache: %v", err)
	}
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	for i := range 3 {
		if _, blocked := g.Blocked(a, now); blocked {
			t.Fatalf("blocked after %d failures", i)
		}
		g.Failed(a, now.Add(time.Duration(i)*time.Second))
	}
	if until, blocked := g.Blocked(a, now.Add(10*time.Second)); !blocked || !until.Equal(now.Add(time.Minute)) {
		t.Fatalf("after 3 failures: blocked %v until %v", blocked, until)
	}
	if _, blocked := g.Blocked(b, now); blocked {
		t.Fatal("another address blocked")
	}
	if _, blocked := g.Blocked(a, now.Add(time.Minute)); blocked {
		t.Fatal("still blocked after the window")
	}
	// The cache is bounded.
	for i := range 5 {
		g.remember([32]byte{byte(i)}, cacheEntry{expires: now.Add(time.Hour)}, now)
	}
	if n := g.CacheLen(); n > 2 {
		t.Fatalf("cache holds %d entries, bound 2", n)
	}
}

func FuzzParseBasic(f *testing.F) {
	for _, s := range []string{basicHeader("a:b"), basicHeader("a:b:c"), "Basic ====", "basic YTpi", "Basic " + strings.Repeat("A", 600)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, p, err := ParseBasicValue(s)
		if err != nil {
			return
		}
		if u == "" || p == "" || strings.Contains(u, ":") || strings.Contains(p, ":") {
			t.Fatalf("%q: accepted %q %q", s, u, p)
		}
		for _, c := range []byte(u + p) {
			if c < 0x20 || c == 0x7f {
				t.Fatalf("%q: control byte accepted", s)
			}
		}
		if got := basicHeader(u + ":" + p); !strings.EqualFold(got[:6], s[:6]) || got[6:] != s[6:] {
			t.Fatalf("%q: not the canonical encoding of %q:%q", s, u, p)
		}
	})
}
