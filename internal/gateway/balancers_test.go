package gateway

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConsistentHashSticksByHeader: the same X-User always reaches the same
// endpoint; different users spread over all of them; a request without the
// header still gets an answer.
func TestConsistentHashSticksByHeader(t *testing.T) {
	names := []string{"a", "b", "c"}
	yamlEps := ""
	for _, n := range names {
		srv, _ := backend(t, n)
		yamlEps += fmt.Sprintf("{address: %s}, ", hostPort(srv))
	}
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  users:
    balancer: consistent_hash
    consistent_hash: {hash_on: "header:X-User"}
    endpoints: [%s]
routes:
  - {name: users, match: {path_prefix: /}, upstream: users}
`, yamlEps))
	seen := map[string]bool{}
	for u := range 60 {
		user := fmt.Sprintf("user-%d", u)
		first := ""
		for range 5 {
			resp := h.get("/", "X-User", user)
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			got := resp.Header.Get("X-Backend")
			if first == "" {
				first = got
			} else if got != first {
				t.Fatalf("%s went to %s, then to %s", user, first, got)
			}
		}
		seen[first] = true
	}
	if len(seen) != len(names) {
		t.Errorf("60 users reached %d of %d endpoints", len(seen), len(names))
	}
	resp := h.get("/")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("request without the key: status %d", resp.StatusCode)
	}
}

// TestLeastRequestAvoidsTheBusyEndpoint: with one endpoint slow (requests
// pile up there), least_request sends most new requests to the fast one.
func TestLeastRequestAvoidsTheBusyEndpoint(t *testing.T) {
	var slowHits, fastHits atomic.Int64
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		slowHits.Add(1)
		time.Sleep(100 * time.Millisecond)
	}))
	t.Cleanup(slow.Close)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fastHits.Add(1) }))
	t.Cleanup(fast.Close)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  pool:
    balancer: least_request
    least_request: {ewma: true}
    endpoints: [{address: %s}, {address: %s}]
routes:
  - {name: pool, match: {path_prefix: /}, upstream: pool}
`, hostPort(slow), hostPort(fast)))
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 25 {
				resp := h.get("/")
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	s, f := slowHits.Load(), fastHits.Load()
	t.Logf("slow endpoint %d requests, fast endpoint %d", s, f)
	if s+f != 200 || float64(s) > 0.25*float64(s+f) {
		t.Errorf("slow endpoint got %d of %d requests; least_request should send it under 25%%", s, s+f)
	}
}
