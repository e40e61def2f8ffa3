package jwtauth

import (
	"errors"
	"testing"
)

// FuzzPreCheck: the pre-parse never panics, refuses only with *Error,
// and never lets through alg none, HS*, or a header naming its own key.
func FuzzPreCheck(f *testing.F) {
	for _, s := range []string{
		"eyJhbGciOiJSUzI1NiIsImtpZCI6InIxIn0.e30.c2ln",
		"eyJhbGciOiJub25lIn0.e30.",
		"eyJhbGciOiJIUzI1NiJ9.e30.c2ln",
		"eyJhbGciOiJSUzI1NiIsImprdSI6Imh0dHA6Ly94In0.e30.c2ln",
		"a.b", "", "...", "eyJ9.e30.x",
	} {
		f.Add(s)
	}
	allowed := []string{"RS256", "ES256", "EdDSA"}
	f.Fuzz(func(t *testing.T, tok string) {
		h, err := PreCheck(tok, 8192, allowed)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if !algAllowed(h.Alg, allowed) || len(tok) > 8192 {
			t.Fatalf("accepted %q: alg %q", tok, h.Alg)
		}
	})
}

// FuzzMaxAge: always within the bounds.
func FuzzMaxAge(f *testing.F) {
	f.Add("max-age=60")
	f.Add("public, max-age=-1")
	f.Fuzz(func(t *testing.T, cc string) {
		if d := MaxAge(cc); d < MinRefreshAge || d > MaxRefreshAge {
			t.Fatalf("MaxAge(%q) = %v", cc, d)
		}
	})
}
