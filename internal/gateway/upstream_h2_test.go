package gateway

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// h2cBackend is a real HTTP/2 server over clear text only (an HTTP/1.1
// request gets nothing it can read): it echoes the body, sends a trailer,
// and counts its connections (opened and closed) and health checks.
type h2cBackend struct {
	addr                  string
	conns, closed, checks atomic.Int64
}

func startH2CBackend(t *testing.T) *h2cBackend {
	t.Helper()
	b := &h2cBackend{}
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Protocols: p,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/healthz" {
				b.checks.Add(1)
				return
			}
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Trailer", "X-Sum")
			w.Header().Set("X-Proto", r.Proto)
			_, _ = w.Write([]byte("echo:"))
			w.(http.Flusher).Flush() // no Content-Length: the trailer can reach an HTTP/1.1 client
			_, _ = w.Write(body)
			w.Header().Set("X-Sum", fmt.Sprint(len(body)))
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				b.conns.Add(1)
			case http.StateClosed:
				b.closed.Add(1)
			}
		},
		ReadHeaderTimeout: 5 * time.Second,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	b.addr = ln.Addr().String()
	return b
}

// TestH2CUpstream: levee reaches an h2c-only upstream over HTTP/2: GET and
// a POST body echoed, the upstream's trailer passed to the client, HTTP/2
// health checks passing (an HTTP/1.1 check would fail it), the requests
// multiplexed on one connection, and levee_upstream_h2_errors_total
// declared at 0.
func TestH2CUpstream(t *testing.T) {
	b := startH2CBackend(t)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  grpcish:
    protocol: h2c
    http2: {max_connections_per_endpoint: 1, max_concurrent_streams: 16}
    endpoints: [{address: %s}]
    health_check: {interval: 50ms, timeout: 50ms, healthy_after: 1, unhealthy_after: 1, http: {path: /healthz}}
routes:
  - {name: r, match: {path_prefix: /}, upstream: grpcish}
`, b.addr))
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		return b.checks.Load() >= 3, fmt.Sprintf("%d checks", b.checks.Load())
	})
	for i := range 5 {
		req, _ := http.NewRequest(http.MethodPost, h.base+"/echo", strings.NewReader(strings.Repeat("x", i*1000)))
		req.Header.Set("TE", "trailers") // levee passes response trailers to a client that accepts them
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(body) != "echo:"+strings.Repeat("x", i*1000) || resp.Header.Get("X-Proto") != "HTTP/2.0" {
			t.Fatalf("request %d: %d %s, %d bytes", i, resp.StatusCode, resp.Header.Get("X-Proto"), len(body))
		}
		if got := resp.Trailer.Get("X-Sum"); got != fmt.Sprint(i*1000) {
			t.Errorf("request %d: trailer X-Sum %q", i, got)
		}
	}
	resp := h.get("/plain")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET: %d", resp.StatusCode)
	}
	// One connection carries the requests; each health check has its own.
	if n, c := b.conns.Load(), b.checks.Load(); n > c+1 {
		t.Errorf("%d connections for %d checks and 6 requests: requests were not multiplexed", n, c)
	}
	m := testkit.Scrape(t, h.admin+"/metrics")
	for _, reason := range []string{"ping_flood", "settings_flood", "reset_flood", "continuation_flood", "goaway", "protocol_error"} {
		if v := m.Value(t, `levee_upstream_h2_errors_total{reason="`+reason+`",upstream="grpcish"}`); v != 0 {
			t.Errorf("%s: %v errors against a healthy upstream", reason, v)
		}
	}
}

// TestH2CEndpointLeftIsClosed: levee's idle HTTP/2 connection to an
// endpoint that leaves its upstream's set is closed at once (the endpoint
// sees it closed; before, it stayed until the idle timeout, 90 s here),
// whether a reload or a discovery push removed it; the kept endpoint's
// connection stays open.
func TestH2CEndpointLeftIsClosed(t *testing.T) {
	a, b := startH2CBackend(t), startH2CBackend(t)
	cfg := `
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  static:
    protocol: h2c
    timeouts: {idle: 90s}
    endpoints: [%s]
  pushed:
    protocol: h2c
    timeouts: {idle: 90s}
    discovery: {push: true}
routes:
  - {name: static, match: {path_prefix: /static/}, upstream: static}
  - {name: pushed, match: {path_prefix: /pushed/}, upstream: pushed}
`
	both := fmt.Sprintf("{address: %s}, {address: %s}", a.addr, b.addr)
	h := start(t, fmt.Sprintf(cfg, both))
	// Requests until both endpoints hold one of levee's connections.
	fill := func(path string) {
		t.Helper()
		testkit.Eventually(t, 5*time.Second, func() (bool, string) {
			resp := h.get(path)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			open := func(s *h2cBackend) int64 { return s.conns.Load() - s.closed.Load() }
			return resp.StatusCode == 200 && open(a) >= 1 && open(b) >= 1, fmt.Sprintf("status %d, open connections A %d, B %d", resp.StatusCode, open(a), open(b))
		})
	}
	fill("/static/x")
	aClosed := a.closed.Load()
	h.writeConfig(fmt.Sprintf(cfg, fmt.Sprintf("{address: %s}", a.addr)))
	resp, err := h.client.Post(h.admin+"/api/v1/reload", "application/json", nil) // h.client sends the admin token
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("reload: %d", resp.StatusCode)
	}
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		return b.conns.Load() == b.closed.Load(), fmt.Sprintf("B (reloaded away): %d opened, %d closed", b.conns.Load(), b.closed.Load())
	})
	if n := a.closed.Load(); n != aClosed {
		t.Errorf("A (kept by the reload): %d connections closed, want %d", n, aClosed)
	}

	if status, doc := pushEndpoints(t, h, "pushed", fmt.Sprintf(`[{"address": %q}, {"address": %q}]`, a.addr, b.addr)); status != 200 || doc["result"] != "applied" {
		t.Fatalf("push of A and B: %d %v", status, doc)
	}
	fill("/pushed/x")
	aClosed = a.closed.Load()
	if status, doc := pushEndpoints(t, h, "pushed", fmt.Sprintf(`[{"address": %q}]`, a.addr)); status != 200 || doc["result"] != "applied" {
		t.Fatalf("push of A alone: %d %v", status, doc)
	}
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		return b.conns.Load() == b.closed.Load(), fmt.Sprintf("B (pushed away): %d opened, %d closed", b.conns.Load(), b.closed.Load())
	})
	if n := a.closed.Load(); n != aClosed {
		t.Errorf("A (kept by the push): %d connections closed, want %d", n, aClosed)
	}
}
