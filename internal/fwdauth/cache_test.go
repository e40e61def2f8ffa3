package fwdauth

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestCacheTTLAndBound: an answer is reused until its TTL on the
// checker's clock, only 2xx, 401 and 403 are kept, and the cache never
// holds more than its bound.
func TestCacheTTLAndBound(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		switch r.Header.Get("Authorization") {
		case "a":
			w.WriteHeader(200)
		case "teapot":
			w.WriteHeader(418)
		default:
			w.WriteHeader(401)
		}
	}))
	defer srv.Close()
	now := time.Unix(1000, 0)
	c, err := New(Options{URL: srv.URL, Timeout: 5 * time.Second, MaxInFlight: 4, CacheTTL: time.Minute, CacheEntries: 8,
		CopyRequestHeaders: []string{"Authorization"}, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	check := func(auth string) Decision {
		return c.Check(context.Background(), Request{Method: "GET", Header: http.Header{"Authorization": {auth}}})
	}
	if d := check("a"); d.Result != ResultAllowed || d.Cached {
		t.Fatalf("first: %+v", d)
	}
	now = now.Add(59 * time.Second)
	if d := check("a"); !d.Cached || calls.Load() != 1 {
		t.Fatalf("within TTL: %+v, %d calls", d, calls.Load())
	}
	now = now.Add(time.Second)
	if d := check("a"); d.Cached || calls.Load() != 2 {
		t.Fatalf("at TTL: %+v, %d calls", d, calls.Load())
	}
	check("teapot")
	if d := check("teapot"); d.Cached || d.Result != ResultDenied || d.Status != 418 {
		t.Fatalf("a 418 was cached: %+v", d)
	}
	for i := range 100 {
		check("k" + strconv.Itoa(i))
		if n := c.cache.len(); n > 8 {
			t.Fatalf("cache holds %d entries, bound 8", n)
		}
	}
	if s := c.Stats(); s.CacheHits[ResultAllowed] != 1 || s.Calls[ResultAllowed] != 2 || s.Calls[ResultDenied] != 102 {
		t.Fatalf("stats %+v", s)
	}
}

// TestDigestSeparatesHeaders: absent, empty and split values are
// different credentials.
func TestDigestSeparatesHeaders(t *testing.T) {
	c, err := New(Options{URL: "http://127.0.0.1:1/", Timeout: time.Second, MaxInFlight: 1, CopyRequestHeaders: []string{"A", "B"}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[[32]byte]string{}
	for name, h := range map[string]http.Header{
		"none": {}, "A empty": {"A": {""}}, "B empty": {"B": {""}}, "A x": {"A": {"x"}}, "B x": {"B": {"x"}},
		"A xy": {"A": {"xy"}}, "A x,y": {"A": {"x", "y"}}, "A x B y": {"A": {"x"}, "B": {"y"}},
	} {
		d := c.digest(h)
		if other, dup := seen[d]; dup {
			t.Fatalf("%s and %s share a digest", name, other)
		}
		seen[d] = name
	}
}
