package client

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/auth"
)

var signSecret = []byte("round-trip-secret-0123456789abcdef")

// TestSignRoundTrip: requests signed by Sign and sent over a real
// connection verify on the server; tampering with any signed element after
// signing is refused with bad_signature.
func TestSignRoundTrip(t *testing.T) {
	now := time.Date(2026, 3, 3, 12, 0, 0, 0, time.UTC)
	secrets, err := auth.NewSecretIndex([]auth.SecretEntry{{KeyID: "k1", AppID: "app-1", Secret: signSecret}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := auth.NewVerifier(auth.VerifierOptions{})
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, auth.MaxSignedBodyBytes))
		app, err := v.Verify(r, sha256.Sum256(body), secrets, now)
		if err == nil && app != "app-1" {
			err = errors.New("wrong app " + app)
		}
		results <- err
	}))
	defer srv.Close()

	// Each request is signed a second after the last: two requests signed
	// alike at one instant have one signature, and the second is a replay
	// (GET "" and GET "/" are the same request).
	signAt := now
	send := func(method, target string, body []byte, tamper func(r *http.Request) []byte) error {
		t.Helper()
		r, err := http.NewRequest(method, srv.URL+target, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		signAt = signAt.Add(time.Second)
		if err := Sign(r, "k1", signSecret, body, signAt); err != nil {
			t.Fatal(err)
		}
		if tamper != nil {
			if b := tamper(r); b != nil {
				r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
			}
		}
		resp, err := srv.Client().Do(r)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return <-results
	}
	for _, c := range []struct{ method, target, body string }{
		{"GET", "/", ""},
		{"GET", "", ""},
		{"POST", "/v1/orders?b=2&a=x+y&a=%7E&empty=&flag", `{"qty":3}`},
		{"DELETE", "/files/a%2Fb/%E2%82%AC", ""},
	} {
		if err := send(c.method, c.target, []byte(c.body), nil); err != nil {
			t.Errorf("%s %s: %v", c.method, c.target, err)
		}
	}
	for name, tamper := range map[string]func(r *http.Request) []byte{
		"method": func(r *http.Request) []byte { r.Method = "PUT"; return nil },
		"path":   func(r *http.Request) []byte { r.URL.Path = "/v1/order"; return nil },
		"query":  func(r *http.Request) []byte { r.URL.RawQuery = "b=3"; return nil },
		"date": func(r *http.Request) []byte {
			r.Header.Set("Date", signAt.Add(time.Second).Format(http.TimeFormat))
			return nil
		},
		"body": func(r *http.Request) []byte { return []byte(`{"qty":4}`) },
	} {
		if err := send("POST", "/v1/orders?b=2", []byte(`{"qty":3}`), tamper); !errors.Is(err, auth.ErrBadSignature) {
			t.Errorf("tampered %s: %v, want bad_signature", name, err)
		}
	}
}

func TestSignRejectsBadInput(t *testing.T) {
	r, _ := http.NewRequest("GET", "http://x/", nil)
	if err := Sign(r, "bad id", signSecret, nil, time.Now()); err == nil {
		t.Fatal("a key ID with a space was accepted")
	}
	r.URL.Opaque = "//x/y"
	if err := Sign(r, "k1", signSecret, nil, time.Now()); err == nil {
		t.Fatal("an opaque URL was accepted")
	}
}
