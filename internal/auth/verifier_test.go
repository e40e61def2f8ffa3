package auth

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// The worked example of docs/authentication.md; TestWorkedExample pins it.
const (
	exampleKeyID     = "app-7.k1"
	exampleSecret    = "example-secret-0123456789abcdef!"
	exampleBody      = `{"qty":3}`
	exampleURL       = "http://api.example.com/v1/orders/42?b=2&a=hello+world&a=1&c=%7E%2f"
	exampleDate      = "Tue, 03 Mar 2026 12:00:00 GMT"
	exampleCanonical = "POST\n/v1/orders/42\na=1&a=hello%20world&b=2&c=~%2F\n" + exampleDate + "\n" +
		"0fb24fa07a4a24da9a3ff773eac8e762f3fd262d6543983e7cd142dc45f70752"
	exampleAuthorization = "LEVEE-HMAC-SHA256 keyId=app-7.k1, signature=NMQ+ZbiJBW1S7e3ldSwgO7hXnNha/BRsm6MsRWFp+XU="
)

var exampleNow = time.Date(2026, 3, 3, 12, 0, 0, 0, time.UTC)

func exampleSecrets(t testing.TB) *SecretIndex {
	t.Helper()
	x, err := NewSecretIndex([]SecretEntry{{KeyID: exampleKeyID, AppID: "app-7", Secret: []byte(exampleSecret)}})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func mustVerifier(t testing.TB, o VerifierOptions) *Verifier {
	t.Helper()
	v, err := NewVerifier(o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// signed returns the example request, signed at date with mutate applied
// to it before signing.
func signed(t testing.TB, date time.Time) *http.Request {
	t.Helper()
	r := httptest.NewRequest("POST", exampleURL, nil)
	d := date.UTC().Format(http.TimeFormat)
	canon, err := AppendCanonical(nil, r.Method, r.URL.EscapedPath(), r.URL.RawQuery, d, sha256.Sum256([]byte(exampleBody)))
	if err != nil {
		t.Fatal(err)
	}
	h, err := FormatSignatureHeader(exampleKeyID, MAC([]byte(exampleSecret), canon))
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set("Date", d)
	r.Header.Set("Authorization", h)
	return r
}

// TestWorkedExample pins the example in docs/authentication.md (its MAC
// was also checked with openssl dgst -sha256 -hmac).
func TestWorkedExample(t *testing.T) {
	r := signed(t, exampleNow)
	canon, _ := AppendCanonical(nil, r.Method, r.URL.EscapedPath(), r.URL.RawQuery, exampleDate, sha256.Sum256([]byte(exampleBody)))
	if string(canon) != exampleCanonical {
		t.Fatalf("canonical:\n%s\nwant:\n%s", canon, exampleCanonical)
	}
	if r.Header.Get("Date") != exampleDate || r.Header.Get("Authorization") != exampleAuthorization {
		t.Fatalf("headers: %q", r.Header)
	}
	app, err := mustVerifier(t, VerifierOptions{}).Verify(r, sha256.Sum256([]byte(exampleBody)), exampleSecrets(t), exampleNow)
	if err != nil || app != "app-7" {
		t.Fatalf("Verify = %q, %v", app, err)
	}
}

func TestVerifyFailures(t *testing.T) {
	body := sha256.Sum256([]byte(exampleBody))
	for _, c := range []struct {
		name   string
		mutate func(r *http.Request)
		reason Reason
	}{
		{"no authorization", func(r *http.Request) { r.Header.Del("Authorization") }, ReasonMissingCredentials},
		{"two authorization", func(r *http.Request) { r.Header.Add("Authorization", "x") }, ReasonMalformedCredentials},
		{"bearer instead", func(r *http.Request) { r.Header.Set("Authorization", "Bearer lvk_x") }, ReasonMalformedCredentials},
		{"no date", func(r *http.Request) { r.Header.Del("Date") }, ReasonMalformedCredentials},
		{"two dates", func(r *http.Request) { r.Header.Add("Date", exampleDate) }, ReasonMalformedCredentials},
		{"rfc850 date", func(r *http.Request) { r.Header.Set("Date", "Tuesday, 03-Mar-26 12:00:00 GMT") }, ReasonMalformedCredentials},
		{"unknown key id", func(r *http.Request) {
			r.Header.Set("Authorization", "LEVEE-HMAC-SHA256 keyId=app-8.k1, signature=NMQ+ZbiJBW1S7e3ldSwgO7hXnNha/BRsm6MsRWFp+XU=")
		}, ReasonUnknownKey},
		{"method", func(r *http.Request) { r.Method = "PUT" }, ReasonBadSignature},
		{"path", func(r *http.Request) { r.URL.Path, r.URL.RawPath = "/v1/orders/43", "" }, ReasonBadSignature},
		{"path escaping", func(r *http.Request) { r.URL.Path, r.URL.RawPath = "/v1/orders/42", "/v1/orders/%342" }, ReasonBadSignature},
		{"query value", func(r *http.Request) { r.URL.RawQuery = "b=3&a=hello+world&a=1&c=%7E%2f" }, ReasonBadSignature},
		{"query added", func(r *http.Request) { r.URL.RawQuery += "&d=1" }, ReasonBadSignature},
		{"bad query escape", func(r *http.Request) { r.URL.RawQuery = "a=%zz" }, ReasonBadSignature},
		{"date one second on", func(r *http.Request) { r.Header.Set("Date", "Tue, 03 Mar 2026 12:00:01 GMT") }, ReasonBadSignature},
		{"signature flipped", func(r *http.Request) {
			r.Header.Set("Authorization", "LEVEE-HMAC-SHA256 keyId=app-7.k1, signature=NMQ+ZbiJBW1S7e3ldSwgO7hXnNha/BRsm6MsRWFp+XQ=")
		}, ReasonBadSignature},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := signed(t, exampleNow)
			c.mutate(r)
			_, err := mustVerifier(t, VerifierOptions{}).Verify(r, body, exampleSecrets(t), exampleNow)
			var ae *Error
			if !errors.As(err, &ae) || ae.Reason != c.reason {
				t.Fatalf("got %v, want reason %s", err, c.reason)
			}
		})
	}
	t.Run("body", func(t *testing.T) {
		_, err := mustVerifier(t, VerifierOptions{}).Verify(signed(t, exampleNow), sha256.Sum256([]byte(`{"qty":4}`)), exampleSecrets(t), exampleNow)
		if !errors.Is(err, ErrBadSignature) {
			t.Fatalf("tampered body: %v", err)
		}
	})
}

// TestSkewWindowEdges: |now − Date| = skew passes, one nanosecond more is
// stale, in both directions.
func TestSkewWindowEdges(t *testing.T) {
	body := sha256.Sum256([]byte(exampleBody))
	skew := 90 * time.Second
	for _, c := range []struct {
		now time.Duration // from the Date
		ok  bool
	}{
		{0, true}, {skew, true}, {skew + 1, false}, {-skew, true}, {-skew - 1, false}, {time.Hour, false},
	} {
		v := mustVerifier(t, VerifierOptions{Skew: skew})
		_, err := v.Verify(signed(t, exampleNow), body, exampleSecrets(t), exampleNow.Add(c.now))
		if c.ok && err != nil || !c.ok && !errors.Is(err, ErrStaleDate) {
			t.Errorf("now = Date%+v: %v", c.now, err)
		}
	}
}

func TestReplayRefused(t *testing.T) {
	body := sha256.Sum256([]byte(exampleBody))
	v := mustVerifier(t, VerifierOptions{Skew: time.Minute})
	secrets := exampleSecrets(t)
	if _, err := v.Verify(signed(t, exampleNow), body, secrets, exampleNow); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(signed(t, exampleNow), body, secrets, exampleNow.Add(30*time.Second)); !errors.Is(err, ErrReplayed) {
		t.Fatalf("replay: %v", err)
	}
	// The same request signed a second later is a new signature.
	if _, err := v.Verify(signed(t, exampleNow.Add(time.Second)), body, secrets, exampleNow.Add(time.Second)); err != nil {
		t.Fatalf("re-signed: %v", err)
	}
	// A replay after the skew window is stale, not replayed.
	if _, err := v.Verify(signed(t, exampleNow), body, secrets, exampleNow.Add(time.Minute+1)); !errors.Is(err, ErrStaleDate) {
		t.Fatalf("late replay: %v", err)
	}
	if st := v.Stats(); st.Nonces != 2 || st.NoncesEvicted != 0 {
		t.Fatalf("%+v", st)
	}
}

func TestNewVerifierRejects(t *testing.T) {
	for _, o := range []VerifierOptions{{Skew: time.Millisecond}, {Skew: 2 * time.Hour}, {NonceCapacity: -1}, {NonceCapacity: 1e8}} {
		if _, err := NewVerifier(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

func TestNewSecretIndexRejects(t *testing.T) {
	s := []byte(exampleSecret)
	for name, entries := range map[string][]SecretEntry{
		"short secret": {{KeyID: "k", AppID: "a", Secret: s[:31]}},
		"bad key id":   {{KeyID: "k 1", AppID: "a", Secret: s}},
		"empty key id": {{KeyID: "", AppID: "a", Secret: s}},
		"duplicate":    {{KeyID: "k", AppID: "a", Secret: s}, {KeyID: "k", AppID: "b", Secret: s}},
	} {
		if _, err := NewSecretIndex(entries); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
