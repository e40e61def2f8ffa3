package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// authService is a real authorization service on loopback with its own
// logic, by the Authorization header: "Bearer good" 200 with X-User:
// alice (and X-Internal, not copied); "Bearer bad" 401 with a body, a
// WWW-Authenticate and X-Secret (not a safe header); "Bearer slow" waits
// until the caller gives up or release is closed; anything else 403.
type authService struct {
	srv     *httptest.Server
	calls   atomic.Int64
	waiting atomic.Int64
	release chan struct{}
	mu      sync.Mutex
	last    http.Header // the last call's headers
	method  string
}

func newAuthService(t *testing.T) *authService {
	a := &authService{release: make(chan struct{})}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.calls.Add(1)
		a.mu.Lock()
		a.last, a.method = r.Header.Clone(), r.Method
		a.mu.Unlock()
		switch r.Header.Get("Authorization") {
		case "Bearer good":
			w.Header().Set("X-User", "alice")
			w.Header().Set("X-Internal", "not-copied")
			w.WriteHeader(200)
		case "Bearer bad":
			w.Header().Set("WWW-Authenticate", `Bearer realm="corp"`)
			w.Header().Set("X-Secret", "internal")
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			io.WriteString(w, `{"msg":"token revoked"}`)
		case "Bearer slow":
			a.waiting.Add(1)
			defer a.waiting.Add(-1)
			select {
			case <-r.Context().Done():
			case <-a.release:
			case <-time.After(10 * time.Second): // bound: never outlives the test
			}
			w.WriteHeader(200)
		default:
			w.WriteHeader(403)
		}
	}))
	t.Cleanup(func() {
		select {
		case <-a.release:
		default:
			close(a.release)
		}
		a.srv.Close()
	})
	return a
}

func (a *authService) lastCall() (http.Header, string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last, a.method
}

// headerEcho answers the request's headers as JSON.
func headerEcho(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(r.Header)
	}))
	t.Cleanup(srv.Close)
	return hostPort(srv)
}

// TestForwardAuthOverSockets: levee asks a real authorization service:
// allowed with the named answer header (the client's own value of it
// dropped), denied with the service's 401 body and safe headers, denied
// answers and allowed ones cached (the second call does not reach it),
// a slow service answered 503 auth_unavailable within its timeout, a
// closed port 503 at once, on_error: allow passing, max_in_flight full
// 503 auth_busy; and the metrics of each.
func TestForwardAuthOverSockets(t *testing.T) {
	as := newAuthService(t)
	up := headerEcho(t)
	down := closedPort(t)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  app: {endpoints: [{address: %[1]s}]}
routes:
  - name: cached
    match: {path_prefix: /c/}
    upstream: app
    auth: forward
    forward_auth: {url: "%[2]s/check", timeout: 300ms, copy_request_headers: [Authorization, X-Tenant], copy_response_headers: [X-User], cache_ttl: 1m}
  - name: slow
    match: {path_prefix: /s/}
    upstream: app
    auth: forward
    forward_auth: {url: "%[2]s/check", timeout: 300ms}
  - name: busy
    match: {path_prefix: /b/}
    upstream: app
    auth: forward
    forward_auth: {url: "%[2]s/check", timeout: 5s, max_in_flight: 1}
  - name: down
    match: {path_prefix: /d/}
    upstream: app
    auth: forward
    forward_auth: {url: "http://%[3]s/check"}
  - name: open
    match: {path_prefix: /o/}
    upstream: app
    auth: forward
    forward_auth: {url: "http://%[3]s/check", on_error: allow, copy_response_headers: [X-User]}
`, up, as.srv.URL, down))

	type answer struct {
		code int
		hdr  http.Header
		body []byte
	}
	call := func(path string, hdr ...string) answer {
		t.Helper()
		resp := h.get(path, hdr...)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return answer{resp.StatusCode, resp.Header, b}
	}
	upstreamSaw := func(a answer) http.Header {
		t.Helper()
		var hd http.Header
		if err := json.Unmarshal(a.body, &hd); err != nil {
			t.Fatalf("upstream answer %d %q: %v", a.code, a.body, err)
		}
		return hd
	}

	// Allowed: X-User from the service replaces the client's; X-Internal
	// is not copied; the service saw the credentials and X-Forwarded-*.
	a := call("/c/orders?x=1", "Authorization", "Bearer good", "X-User", "mallory", "X-Tenant", "t1", "Cookie", "c=1")
	if a.code != 200 {
		t.Fatalf("allowed: %d %s", a.code, a.body)
	}
	seen := upstreamSaw(a)
	if got := seen.Values("X-User"); len(got) != 1 || got[0] != "alice" || seen.Get("X-Internal") != "" {
		t.Fatalf("upstream saw X-User %q X-Internal %q", got, seen.Get("X-Internal"))
	}
	last, method := as.lastCall()
	if method != "GET" || last.Get("Authorization") != "Bearer good" || last.Get("X-Tenant") != "t1" || last.Get("Cookie") != "" ||
		last.Get("X-Forwarded-Method") != "GET" || last.Get("X-Forwarded-Uri") != "/c/orders?x=1" ||
		last.Get("X-Forwarded-Host") == "" || last.Get("X-Forwarded-Proto") != "http" || last.Get("X-Forwarded-For") != "127.0.0.1" {
		t.Fatalf("service saw %s %v", method, last)
	}
	// Cached: the same credentials again do not reach the service.
	calls := as.calls.Load()
	if a := call("/c/orders", "Authorization", "Bearer good", "X-Tenant", "t1"); a.code != 200 || upstreamSaw(a).Get("X-User") != "alice" {
		t.Fatalf("cached allow: %d %s", a.code, a.body)
	}
	if as.calls.Load() != calls {
		t.Fatalf("a cached answer reached the service (%d calls, was %d)", as.calls.Load(), calls)
	}
	// Other credentials (another X-Tenant) are another cache key.
	if a := call("/c/orders", "Authorization", "Bearer good", "X-Tenant", "t2"); a.code != 200 || as.calls.Load() != calls+1 {
		t.Fatalf("other tenant: %d, %d calls", a.code, as.calls.Load()-calls)
	}

	// Denied: the service's 401, its body and safe headers; X-Secret not.
	for i := range 2 {
		a = call("/c/orders", "Authorization", "Bearer bad")
		if a.code != 401 || string(a.body) != `{"msg":"token revoked"}` || a.hdr.Get("Www-Authenticate") != `Bearer realm="corp"` ||
			a.hdr.Get("Content-Type") != "application/json" || a.hdr.Get("X-Secret") != "" {
			t.Fatalf("denied #%d: %d %v %s", i, a.code, a.hdr, a.body)
		}
	}
	if as.calls.Load() != calls+2 {
		t.Fatalf("the denial was not cached: %d calls", as.calls.Load()-calls)
	}
	if a := call("/c/orders", "Authorization", "Bearer other"); a.code != 403 {
		t.Fatalf("403: %d %s", a.code, a.body)
	}

	// Timeout: a slow service; the request answers within the timeout.
	t0 := time.Now()
	a = call("/s/x", "Authorization", "Bearer slow")
	took := time.Since(t0)
	expectRefusalBody(t, "slow", a.code, a.body, 503, "auth_unavailable", "timeout")
	if took > 2*time.Second {
		t.Fatalf("timed-out check took %v (timeout 300ms)", took)
	}
	t.Logf("slow service: 503 after %v (timeout 300ms)", took)

	// Down: a closed port answers 503 at once.
	t0 = time.Now()
	a = call("/d/x", "Authorization", "Bearer good")
	expectRefusalBody(t, "down", a.code, a.body, 503, "auth_unavailable", "unreachable")
	t.Logf("closed port: 503 after %v", time.Since(t0))

	// on_error: allow lets the request through, the client's X-User gone.
	a = call("/o/x", "X-User", "mallory")
	if a.code != 200 || upstreamSaw(a).Get("X-User") != "" {
		t.Fatalf("on_error allow: %d %s", a.code, a.body)
	}

	// max_in_flight 1: a second call while one waits is 503 auth_busy.
	done := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("GET", h.base+"/b/y", nil)
		req.Header.Set("Authorization", "Bearer slow")
		resp, err := h.client.Do(req)
		if err != nil {
			done <- answer{}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		done <- answer{resp.StatusCode, resp.Header, b}
	}()
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		n := as.waiting.Load()
		return n == 1, fmt.Sprintf("%d calls waiting", n)
	})
	a = call("/b/z", "Authorization", "Bearer good")
	expectRefusalBody(t, "busy", a.code, a.body, 503, "auth_busy", "")
	close(as.release)
	if a := <-done; a.code != 200 {
		t.Fatalf("the waiting call: %d %s", a.code, a.body)
	}

	for series, want := range map[string]float64{
		`levee_forward_auth_calls_total{result="allowed",route="cached"}`:      2,
		`levee_forward_auth_calls_total{result="denied",route="cached"}`:       2,
		`levee_forward_auth_cache_hits_total{result="allowed",route="cached"}`: 1,
		`levee_forward_auth_cache_hits_total{result="denied",route="cached"}`:  1,
		`levee_forward_auth_calls_total{result="timeout",route="slow"}`:        1,
		`levee_forward_auth_calls_total{result="allowed",route="busy"}`:        1,
		`levee_forward_auth_calls_total{result="busy",route="busy"}`:           1,
		`levee_forward_auth_calls_total{result="unreachable",route="down"}`:    1,
		`levee_forward_auth_passed_on_error_total{route="open"}`:               1,
		`levee_auth_requests_total{result="accepted",scheme="forward"}`:        4,
		`levee_auth_requests_total{result="unauthenticated",scheme="forward"}`: 2,
		`levee_auth_requests_total{result="forbidden",scheme="forward"}`:       1,
		`levee_refusals_total{reason="auth_unavailable",route="slow"}`:         1,
		`levee_refusals_total{reason="auth_busy",route="busy"}`:                1,
	} {
		if got := h.metric(series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// expectRefusalBody asserts a levee refusal's status, reason and detail.
func expectRefusalBody(t *testing.T, step string, code int, body []byte, status int, reason, detail string) {
	t.Helper()
	var r consumerRefusal
	json.Unmarshal(body, &r)
	if code != status || r.Reason != reason || r.Detail != detail {
		t.Fatalf("%s: %d %s, want %d %s %q", step, code, body, status, reason, detail)
	}
}
