package jwtauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidTokens(t *testing.T) {
	rs, es := newRSA(t, "r1"), newEC(t, "e1")
	p := newIDP(t, rs.jwk(), es.jwk())
	clk := newClock(testNow)
	is := newIssuer(t, startKeys(t, p, clk, ""))
	for _, s := range []*signer{rs, es} {
		tok := s.sign(map[string]any{"alg": s.alg, "kid": s.kid, "typ": "JWT"}, goodClaims())
		id, err := is.Verify(context.Background(), tok, clk.Now())
		if err != nil {
			t.Fatalf("%s: %v", s.alg, err)
		}
		if id.App != "shop" || id.Subject != "user-1" || !id.HasScope("orders") || id.HasScope("admin") {
			t.Fatalf("%s: identity %+v", s.alg, id)
		}
	}
	// Within the skew on both sides.
	tok := rs.sign(map[string]any{"alg": "RS256", "kid": "r1"}, with(goodClaims(),
		"exp", testNow.Add(-20*time.Second).Unix(), "nbf", testNow.Add(20*time.Second).Unix()))
	if _, err := is.Verify(context.Background(), tok, clk.Now()); err != nil {
		t.Fatalf("within skew: %v", err)
	}
	// A fixed app instead of a claim.
	is2 := *is
	is2.AppClaim, is2.App = "", "fixed"
	id, err := is2.Verify(context.Background(), rs.sign(map[string]any{"alg": "RS256", "kid": "r1"}, with(goodClaims(), "azp", nil)), clk.Now())
	if err != nil || id.App != "fixed" {
		t.Fatalf("fixed app: %+v %v", id, err)
	}
}

// TestHostileTokens: every token is refused with its fixed detail. Tokens
// whose claims are bad are validly signed (so the claim check is what
// refuses them); forged ones with bad claims too must say invalid_token,
// proving the signature is checked first and never skipped.
func TestHostileTokens(t *testing.T) {
	rs, es := newRSA(t, "r1"), newEC(t, "e1")
	evil, evilEC := newRSA(t, "r1"), newEC(t, "e1")
	p := newIDP(t, rs.jwk(), es.jwk())
	clk := newClock(testNow)
	is := newIssuer(t, startKeys(t, p, clk, ""))
	rh := map[string]any{"alg": "RS256", "kid": "r1"}
	good := rs.sign(rh, goodClaims())
	parts := strings.Split(good, ".")
	evilJWK := evil.jwk()
	evilJWKJSON := js(evilJWK)
	var evilJWKMap map[string]any
	_ = jsonUnmarshal(evilJWKJSON, &evilJWKMap)
	pubPEM := pemOf(t, rs.key.Public())
	n := rs.key.Public().(*rsa.PublicKey).N.Bytes()
	tamperedPayload := b64(js(with(goodClaims(), "azp", "admin-app")))
	otherHeaderSig := rs.sign(map[string]any{"alg": "RS256", "kid": "r1", "typ": "other"}, goodClaims())

	cases := []struct {
		name, token string
		want        Detail
	}{
		{"alg none, empty signature", b64(js(map[string]any{"alg": "none"})) + "." + parts[1] + ".", DetailMalformed},
		{"alg none with a signature", b64(js(map[string]any{"alg": "none", "kid": "r1"})) + "." + parts[1] + "." + parts[2], DetailInvalid},
		{"alg None casing", b64(js(map[string]any{"alg": "None", "kid": "r1"})) + "." + parts[1] + "." + parts[2], DetailInvalid},
		{"HS256 keyed by the RSA public key PEM", hs256(map[string]any{"alg": "HS256", "kid": "r1"}, goodClaims(), pubPEM), DetailInvalid},
		{"HS256 keyed by the RSA modulus", hs256(map[string]any{"alg": "HS256", "kid": "r1"}, goodClaims(), n), DetailInvalid},
		{"HS512 keyed by the JWK JSON", hs256(map[string]any{"alg": "HS512", "kid": "r1"}, goodClaims(), js(rs.jwk())), DetailInvalid},
		{"kid a file path", evil.sign(map[string]any{"alg": "RS256", "kid": "../../../../etc/passwd"}, goodClaims()), DetailInvalid},
		{"kid SQL", evil.sign(map[string]any{"alg": "RS256", "kid": "' OR 1=1 --"}, goodClaims()), DetailInvalid},
		{"kid unknown", evil.sign(map[string]any{"alg": "RS256", "kid": "nope"}, goodClaims()), DetailInvalid},
		{"jku elsewhere", evil.sign(map[string]any{"alg": "RS256", "kid": "r1", "jku": "https://evil.test/jwks"}, goodClaims()), DetailInvalid},
		{"x5u elsewhere", evil.sign(map[string]any{"alg": "RS256", "kid": "r1", "x5u": "https://evil.test/cert.pem"}, goodClaims()), DetailInvalid},
		{"embedded jwk", evil.sign(map[string]any{"alg": "RS256", "kid": "r1", "jwk": evilJWKMap}, goodClaims()), DetailInvalid},
		{"embedded x5c", evil.sign(map[string]any{"alg": "RS256", "kid": "r1", "x5c": []string{"MIIB"}}, goodClaims()), DetailInvalid},
		{"jku on a valid signature", rs.sign(map[string]any{"alg": "RS256", "kid": "r1", "jku": "https://evil.test/jwks"}, goodClaims()), DetailInvalid},
		{"unknown crit", rs.sign(map[string]any{"alg": "RS256", "kid": "r1", "crit": []string{"exp2"}, "exp2": 1}, goodClaims()), DetailInvalid},
		{"crit b64", rs.sign(map[string]any{"alg": "RS256", "kid": "r1", "crit": []string{"b64"}, "b64": true}, goodClaims()), DetailInvalid},
		{"signed by another RSA key, same kid", evil.sign(rh, goodClaims()), DetailInvalid},
		{"signed by another EC key, same kid", evilEC.sign(map[string]any{"alg": "ES256", "kid": "e1"}, goodClaims()), DetailInvalid},
		{"ES256 alg naming the RSA key", es.sign(map[string]any{"alg": "ES256", "kid": "r1"}, goodClaims()), DetailInvalid},
		{"RS256 alg naming the EC key", rs.sign(map[string]any{"alg": "RS256", "kid": "e1"}, goodClaims()), DetailInvalid},
		{"PS256 not allowed", b64(js(map[string]any{"alg": "PS256", "kid": "r1"})) + "." + parts[1] + "." + parts[2], DetailInvalid},
		{"alg changed, signature kept", b64(js(map[string]any{"alg": "RS384", "kid": "r1"})) + "." + parts[1] + "." + parts[2], DetailInvalid},
		{"stripped signature", parts[0] + "." + parts[1] + ".", DetailMalformed},
		{"truncated signature", good[:len(good)-10], DetailInvalid},
		{"payload tampered", parts[0] + "." + tamperedPayload + "." + parts[2], DetailInvalid},
		{"header from another token", strings.Split(otherHeaderSig, ".")[0] + "." + parts[1] + "." + parts[2], DetailInvalid},
		{"expired", rs.sign(rh, with(goodClaims(), "exp", testNow.Add(-31*time.Second).Unix())), DetailExpired},
		{"expired and forged", evil.sign(rh, with(goodClaims(), "exp", testNow.Add(-time.Hour).Unix())), DetailInvalid},
		{"no exp", rs.sign(rh, with(goodClaims(), "exp", nil)), DetailExpired},
		{"not yet valid", rs.sign(rh, with(goodClaims(), "nbf", testNow.Add(time.Minute).Unix())), DetailNotYetValid},
		{"issued in the future", rs.sign(rh, with(goodClaims(), "iat", testNow.Add(time.Hour).Unix())), DetailNotYetValid},
		{"wrong iss", rs.sign(rh, with(goodClaims(), "iss", "https://evil.test")), DetailWrongIssuer},
		{"no iss", rs.sign(rh, with(goodClaims(), "iss", nil)), DetailWrongIssuer},
		{"wrong aud", rs.sign(rh, with(goodClaims(), "aud", []string{"billing"})), DetailWrongAudience},
		{"no aud", rs.sign(rh, with(goodClaims(), "aud", nil)), DetailWrongAudience},
		{"no app claim", rs.sign(rh, with(goodClaims(), "azp", nil)), DetailNoApp},
		{"app claim not a string", rs.sign(rh, with(goodClaims(), "azp", 7)), DetailNoApp},
		{"over max_token_bytes", rs.sign(rh, with(goodClaims(), "pad", strings.Repeat("x", 9000))), DetailTooLarge},
		{"two parts", parts[0] + "." + parts[1], DetailMalformed},
		{"JWE-shaped, five parts", good + ".a.b", DetailMalformed},
		{"header not JSON", b64([]byte("not json")) + "." + parts[1] + "." + parts[2], DetailMalformed},
		{"header not base64url", "!!!." + parts[1] + "." + parts[2], DetailMalformed},
		{"JSON serialisation", `{"payload":"` + parts[1] + `","protected":"` + parts[0] + `","signature":"` + parts[2] + `"}`, DetailMalformed},
		{"empty", "", DetailMalformed},
	}
	if len(cases) < 25 {
		t.Fatalf("only %d hostile tokens", len(cases))
	}
	for _, c := range cases {
		_, err := is.Verify(context.Background(), c.token, clk.Now())
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("%s: accepted or untyped error %v", c.name, err)
			continue
		}
		if e.Detail != c.want {
			t.Errorf("%s: detail %s, want %s", c.name, e.Detail, c.want)
		}
	}
	t.Logf("%d hostile tokens refused", len(cases))
	if _, err := is.Verify(context.Background(), good, clk.Now()); err != nil {
		t.Fatalf("the good token after the table: %v", err)
	}
}

// TestKeyRotation: a new kid published beside the old one is picked up on
// its first use; tokens of both verify until the old key is removed.
func TestKeyRotation(t *testing.T) {
	k1, k2 := newRSA(t, "k1"), newRSA(t, "k2")
	p := newIDP(t, k1.jwk())
	clk := newClock(testNow)
	is := newIssuer(t, startKeys(t, p, clk, ""))
	t1 := k1.sign(map[string]any{"alg": "RS256", "kid": "k1"}, goodClaims())
	t2 := k2.sign(map[string]any{"alg": "RS256", "kid": "k2"}, goodClaims())
	fails := 0
	verify := func(tok string) error {
		_, err := is.Verify(context.Background(), tok, clk.Now())
		return err
	}
	for i := 0; i < 100; i++ {
		if verify(t1) != nil {
			fails++
		}
	}
	p.set(false, k1.jwk(), k2.jwk())
	clk.Add(DefaultMinInterval) // the last fetch was at start
	for i := 0; i < 100; i++ {
		if verify(t1) != nil || verify(t2) != nil {
			fails++
		}
	}
	if fails != 0 {
		t.Fatalf("%d failures during the rotation", fails)
	}
	p.set(false, k2.jwk())
	clk.Add(time.Hour) // past max-age=300: the set is refetched, in the background
	if err := verify(t2); err != nil {
		t.Fatal(err)
	}
	// The stale set answered at once; the refetch drops k1 soon after.
	for deadline := time.Now().Add(10 * time.Second); verify(t1) == nil; {
		if time.Now().After(deadline) {
			t.Fatal("the removed key still verifies")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("rotation: 0 failures in 300 verifications, %d fetches", p.fetches.Load())
}

// TestRandomKidFlood: 10,000 tokens with random kids cost at most one
// JWKS fetch per minimum interval, counted at the JWKS server.
func TestRandomKidFlood(t *testing.T) {
	rs := newEC(t, "e1") // ECDSA: signing 10,000 tokens stays fast
	p := newIDP(t, rs.jwk())
	clk := newClock(testNow)
	is := newIssuer(t, startKeys(t, p, clk, ""))
	base := p.fetches.Load()
	intervals := 0
	for i := 0; i < 10000; i++ {
		if i%2500 == 0 && i > 0 {
			clk.Add(DefaultMinInterval)
			intervals++
		} else {
			clk.Add(time.Millisecond)
		}
		tok := rs.sign(map[string]any{"alg": "ES256", "kid": fmt.Sprintf("rnd-%d", i)}, goodClaims())
		if _, err := is.Verify(context.Background(), tok, clk.Now()); err == nil {
			t.Fatal("random kid accepted")
		}
	}
	got := p.fetches.Load() - base
	if got > int64(intervals+1) {
		t.Fatalf("%d fetches for 10000 random kids over %d intervals", got, intervals+1)
	}
	t.Logf("10000 random kids over %d intervals: %d JWKS fetches", intervals+1, got)
}

// TestIdPDown: cached keys keep verifying past their max-age while the
// JWKS answers 503; a new KeySet started with the IdP down reads the
// state file (0600).
func TestIdPDown(t *testing.T) {
	rs := newRSA(t, "r1")
	p := newIDP(t, rs.jwk())
	clk := newClock(testNow)
	state := filepath.Join(t.TempDir(), "jwks-corp.json")
	is := newIssuer(t, startKeys(t, p, clk, state))
	fi, err := os.Stat(state)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("state file: %v %v", fi, err)
	}
	tok := rs.sign(map[string]any{"alg": "RS256", "kid": "r1"}, goodClaims())
	p.set(true)
	before := p.fetches.Load()
	for i := 0; i < 5; i++ {
		clk.Add(10 * time.Minute) // past max-age: each Verify may refetch, and fails
		if _, err := is.Verify(context.Background(), tok, clk.Now()); err != nil {
			t.Fatalf("cached keys with the IdP down: %v", err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); p.fetches.Load() == before; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no refetch was tried past max-age")
		}
	}
	// Restart with the IdP down.
	ks2, err := NewKeySet(KeySetOptions{JWKSURI: p.srv.URL + "/jwks", Now: clk.Now, StateFile: state, Client: p.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ks2.Start(context.Background()); err != nil {
		t.Fatalf("start from state: %v", err)
	}
	if _, err := newIssuer(t, ks2).Verify(context.Background(), tok, clk.Now()); err != nil {
		t.Fatalf("keys from state_dir: %v", err)
	}
	// No IdP and no state: key_unavailable.
	ks3, _ := NewKeySet(KeySetOptions{JWKSURI: p.srv.URL + "/jwks", Now: clk.Now, Client: p.srv.Client()})
	if err := ks3.Start(context.Background()); err == nil {
		t.Fatal("start without keys succeeded")
	}
	_, err = newIssuer(t, ks3).Verify(context.Background(), tok, clk.Now())
	var e *Error
	if !errors.As(err, &e) || e.Detail != DetailKeyUnavailable {
		t.Fatalf("no keys: %v", err)
	}
}

func TestDiscovery(t *testing.T) {
	es := newEC(t, "e1")
	p := newIDP(t, es.jwk())
	clk := newClock(testNow)
	ks, err := NewKeySet(KeySetOptions{Discovery: p.srv.URL, Now: clk.Now, Client: p.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := newIssuer(t, ks).Verify(context.Background(), es.sign(map[string]any{"alg": "ES256", "kid": "e1"}, goodClaims()), clk.Now()); err != nil {
		t.Fatal(err)
	}
}

func TestMaxAge(t *testing.T) {
	for cc, want := range map[string]time.Duration{
		"": DefaultRefreshAge, "max-age=5": MinRefreshAge, "public, max-age=600": 10 * time.Minute,
		"max-age=99999999999": MaxRefreshAge, "max-age=x": DefaultRefreshAge, "no-cache": DefaultRefreshAge,
	} {
		if got := MaxAge(cc); got != want {
			t.Errorf("MaxAge(%q) = %v, want %v", cc, got, want)
		}
	}
}

// BenchmarkVerify: warm verifies the same token again and again; cold a
// different token (own jti and signature) each time, signed ahead of the
// timer. Both find the key in the cached key set: levee keeps no cache of
// verified tokens, so every request pays the signature check.
func BenchmarkVerify(b *testing.B) {
	for _, mk := range []func(testing.TB, string) *signer{newRSA, newEC} {
		s := mk(b, "k")
		p := newIDP(b, s.jwk())
		clk := newClock(testNow)
		is := newIssuer(b, startKeys(b, p, clk, ""))
		tok := s.sign(map[string]any{"alg": s.alg, "kid": "k"}, goodClaims())
		b.Run(s.alg+"/warm", func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := is.Verify(context.Background(), tok, clk.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(s.alg+"/cold", func(b *testing.B) {
			toks := make([]string, b.N)
			for i := range toks {
				toks[i] = s.sign(map[string]any{"alg": s.alg, "kid": "k"}, with(goodClaims(), "jti", fmt.Sprint(i)))
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := processCPU()
			for i := 0; i < b.N; i++ {
				if _, err := is.Verify(context.Background(), toks[i], clk.Now()); err != nil {
					b.Fatal(err)
				}
			}
			// The process's CPU time (user + system) per token: what a
			// cold verification costs, less moved by other load on a
			// shared machine than ns/op (wall time).
			b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
		})
	}
}

var _ = ecdsa.GenerateKey
var _ = elliptic.P256
var _ = rand.Reader
