package jwtauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// TestFetchWaitHangingJWKS: a JWKS server over a real socket that hangs
// on every fetch after the first. A token with an unknown kid waits for
// the fetch it started at most FetchWait, then is refused
// key_unavailable; requests during the hang start no second fetch (single
// flight) and each waits at most FetchWait; known kids verify at once
// throughout; when the server answers, the fetch that went on in the
// background brings the new key in, without a fetch of its own.
func TestFetchWaitHangingJWKS(t *testing.T) {
	k1, k2 := newEC(t, "k1"), newEC(t, "k2")
	release := make(chan struct{})
	var once sync.Once
	var fetches atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := fetches.Add(1)
		keys := []jose.JSONWebKey{k1.jwk()}
		if n > 1 {
			select { // hangs until released (bounded: the test's cleanup releases it)
			case <-release:
			case <-r.Context().Done():
				return
			}
			keys = append(keys, k2.jwk())
		}
		w.Header().Set("Cache-Control", "max-age=300")
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: keys})
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	const wait = 200 * time.Millisecond
	ks, err := NewKeySet(KeySetOptions{JWKSURI: srv.URL, Client: srv.Client(), MinInterval: time.Millisecond,
		FetchWait: wait, FetchTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if err := ks.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	is := newIssuer(t, ks)
	claims := with(goodClaims(), "exp", time.Now().Add(time.Hour).Unix(), "iat", time.Now().Unix())
	t1 := k1.sign(map[string]any{"alg": "ES256", "kid": "k1"}, claims)
	t2 := k2.sign(map[string]any{"alg": "ES256", "kid": "k2"}, claims)
	var slowest time.Duration
	for i := 0; i < 5; i++ {
		start := time.Now()
		_, err := is.Verify(context.Background(), t2, time.Now())
		took := time.Since(start)
		slowest = max(slowest, took)
		var e *Error
		if !errors.As(err, &e) || e.Detail != DetailKeyUnavailable {
			t.Fatalf("unknown kid during a hanging fetch: %v, want key_unavailable", err)
		}
		if took > wait+2*time.Second {
			t.Fatalf("a request waited %v for the fetch (FetchWait %v)", took, wait)
		}
		start = time.Now()
		if _, err := is.Verify(context.Background(), t1, time.Now()); err != nil {
			t.Fatalf("known kid during the hang: %v", err)
		}
		if took := time.Since(start); took > time.Second {
			t.Fatalf("a known kid waited %v", took)
		}
	}
	if n := fetches.Load(); n != 2 {
		t.Fatalf("%d fetches, want 2 (start, then one in flight for every unknown kid)", n)
	}
	once.Do(func() { close(release) })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := is.Verify(context.Background(), t2, time.Now()); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the background fetch never brought k2 in")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("hanging JWKS: unknown kid refused key_unavailable after at most %v (FetchWait %v), %d fetches in all", slowest.Round(time.Millisecond), wait, fetches.Load())
}
