package jwtauth

import (
	"context"
	"encoding/json"
	"maps"
	"testing"
)

// TestKeptClaims: a verified token's bound claims are kept as text, a
// string as it is and a number exactly as written; other kinds, and
// claims not asked for, are not kept; an issuer that keeps none has nil.
func TestKeptClaims(t *testing.T) {
	rs := newRSA(t, "r1")
	p := newIDP(t, rs.jwk())
	clk := newClock(testNow)
	is := newIssuer(t, startKeys(t, p, clk, ""))
	claims := with(goodClaims(),
		"tenant_id", "acme", "org", json.Number("9007199254740993"), "ratio", json.Number("-1.5e3"),
		"admin", true, "groups", []string{"a", "b"}, "nested", map[string]any{"x": 1}, "none", json.RawMessage("null"),
		"https://example.com/tenant", "ns", "extra", "not asked")
	tok := rs.sign(map[string]any{"alg": "RS256", "kid": "r1"}, claims)

	id, err := is.Verify(context.Background(), tok, clk.Now())
	if err != nil || id.Claims != nil {
		t.Fatalf("issuer keeping no claims: %v %v", id.Claims, err)
	}
	keep := *is
	keep.Claims = []string{"tenant_id", "org", "ratio", "admin", "groups", "nested", "none", "absent", "https://example.com/tenant"}
	id, err = keep.Verify(context.Background(), tok, clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"tenant_id": "acme", "org": "9007199254740993", "ratio": "-1.5e3", "https://example.com/tenant": "ns"}
	if !maps.Equal(id.Claims, want) {
		t.Fatalf("kept %v, want %v", id.Claims, want)
	}
	if id.App != "shop" || id.Subject != "user-1" {
		t.Fatalf("identity %+v", id)
	}
	// A forged token keeps nothing: it is refused before its claims are read.
	forged := tok[:len(tok)-4] + "AAAA"
	if id, err := keep.Verify(context.Background(), forged, clk.Now()); err == nil || id.Claims != nil {
		t.Fatalf("forged: %+v %v", id, err)
	}
}

// FuzzKeepClaims: any payload keeps at most the wanted claims, each a
// bounded string, and a number's text parses as JSON.
func FuzzKeepClaims(f *testing.F) {
	for _, s := range []string{`{"tenant_id":"a","org":12}`, `{"org":1e999}`, `{"org":"\u0000"}`, `[]`, `{"org":[1]}`, `{"tenant_id":-0.0}`, `{`} {
		f.Add([]byte(s))
	}
	want := []string{"tenant_id", "org"}
	f.Fuzz(func(t *testing.T, payload []byte) {
		got := KeepClaims(payload, want)
		if len(got) > len(want) {
			t.Fatalf("kept %d claims", len(got))
		}
		for k, v := range got {
			if k != "tenant_id" && k != "org" {
				t.Fatalf("kept %q", k)
			}
			if len(v) > MaxClaimValue {
				t.Fatalf("value of %d bytes", len(v))
			}
		}
	})
}

// BenchmarkVerifyKeepClaims: what keeping two bound claims adds to a
// verification (RS256, the same token), beside the same issuer keeping
// none.
func BenchmarkVerifyKeepClaims(b *testing.B) {
	s := newRSA(b, "k")
	p := newIDP(b, s.jwk())
	clk := newClock(testNow)
	is := newIssuer(b, startKeys(b, p, clk, ""))
	tok := s.sign(map[string]any{"alg": s.alg, "kid": "k"}, with(goodClaims(), "tenant_id", "acme", "org", 42))
	keep := *is
	keep.Claims = []string{"tenant_id", "org"}
	for _, c := range []struct {
		name string
		is   *Issuer
	}{{"none", is}, {"two", &keep}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := c.is.Verify(context.Background(), tok, clk.Now()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
