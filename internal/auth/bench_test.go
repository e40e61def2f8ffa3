package auth

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"testing"
)

// BenchmarkAuthenticateKey: one API key lookup in an index of 100,000 apps.
func BenchmarkAuthenticateKey(b *testing.B) {
	entries := make([]Credential, 100_000)
	var key string
	for i := range entries {
		k, _ := NewKey()
		entries[i] = cred(fmt.Sprint("app-", i), k)
		if i == 54_321 {
			key = k
		}
	}
	x := mustIndex(b, entries)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.Authenticate(key); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifySignature: one signed request verified (parse, date,
// lookup, canonical string, HMAC, replay cache), its body digest given.
// Requests differ by a query parameter so no signature repeats; the
// verifier (its replay cache) is replaced, untimed, every n requests.
func BenchmarkVerifySignature(b *testing.B) {
	secrets := exampleSecrets(b)
	body := sha256.Sum256([]byte(exampleBody))
	const n = 4096
	reqs := make([]*http.Request, n)
	for i := range reqs {
		reqs[i] = signed(b, exampleNow)
		reqs[i].URL.RawQuery = fmt.Sprintf("page=%d&sort=name", i)
		d := reqs[i].Header.Get("Date")
		canon, _ := AppendCanonical(nil, "POST", reqs[i].URL.EscapedPath(), reqs[i].URL.RawQuery, d, body)
		h, _ := FormatSignatureHeader(exampleKeyID, MAC([]byte(exampleSecret), canon))
		reqs[i].Header.Set("Authorization", h)
	}
	v := mustVerifier(b, VerifierOptions{NonceCapacity: n})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i == n {
			b.StopTimer()
			v, i = mustVerifier(b, VerifierOptions{NonceCapacity: n}), 0
			b.StartTimer()
		}
		if _, err := v.Verify(reqs[i], body, secrets, exampleNow); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
