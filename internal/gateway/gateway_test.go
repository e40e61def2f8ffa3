package gateway

import (
	"bufio"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestWeightedRoundRobinEndToEnd: a 3:1 pool gets 3:1 of 10,000 requests
// within ±2 %, in the smooth order; a 0-weight endpoint gets none.
func TestWeightedRoundRobinEndToEnd(t *testing.T) {
	a, aHits := backend(t, "a")
	b, bHits := backend(t, "b")
	c, cHits := backend(t, "c")
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  pool:
    endpoints:
      - {address: %s, weight: 3}
      - {address: %s, weight: 1}
      - {address: %s, weight: 0}
routes:
  - {name: all, match: {path_prefix: /}, upstream: pool}
`, hostPort(a), hostPort(b), hostPort(c)))

	// The first eight picks, one at a time: NGINX's smooth interleaving.
	var order []string
	for range 8 {
		resp := h.get("/")
		order = append(order, resp.Header.Get("X-Backend"))
		resp.Body.Close()
	}
	if got, want := strings.Join(order, ""), "aabaaaba"; got != want {
		t.Fatalf("order of the first 8 picks = %s, want %s", got, want)
	}

	const total = 10000
	var wg sync.WaitGroup
	var failed atomic.Int64
	per := (total - 8) / 8
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range per {
				resp, err := h.client.Get(h.base + "/")
				if err != nil || resp.StatusCode != 200 {
					failed.Add(1)
					if err == nil {
						resp.Body.Close()
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	if failed.Load() != 0 {
		t.Fatalf("%d requests failed", failed.Load())
	}
	na, nb := aHits.Load(), bHits.Load()
	if na+nb != total {
		t.Fatalf("backends saw %d requests, want %d", na+nb, total)
	}
	shareA := float64(na) / float64(total)
	t.Logf("a=%d b=%d c=%d share(a)=%.4f", na, nb, cHits.Load(), shareA)
	if shareA < 0.75-0.02 || shareA > 0.75+0.02 {
		t.Errorf("share of the weight-3 endpoint = %.4f, want 0.75 ± 0.02", shareA)
	}
	if cHits.Load() != 0 {
		t.Errorf("drained endpoint got %d requests, want 0", cHits.Load())
	}
}

// TestRefusals: each refusal levee writes itself has its status, a JSON body
// with its stable reason, and Retry-After on 503.
func TestRefusals(t *testing.T) {
	ok, _ := backend(t, "ok")
	hang := hangingBackend(t)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
server: {max_header_bytes: 4KiB}
upstreams:
  ok:
    endpoints: [{address: %s}]
  dead:
    endpoints: [{address: %s}]
  hang:
    endpoints: [{address: %s}]
    timeouts: {response_header: 200ms}
  drained:
    endpoints: [{address: %s, weight: 0}]
routes:
  - {name: small, match: {path_prefix: /small/}, upstream: ok, max_body_bytes: 1KiB}
  - {name: getonly, match: {path_prefix: /getonly/, methods: [GET]}, upstream: ok}
  - {name: dead, match: {path_prefix: /dead/}, upstream: dead}
  - {name: hang, match: {path_prefix: /hang/}, upstream: hang}
  - {name: drained, match: {path_prefix: /drained/}, upstream: drained}
  - {name: api, match: {host: api.example.com, path_prefix: /}, upstream: ok}
`, hostPort(ok), closedPort(t), hostPort(hang), hostPort(ok)))

	t.Run("404 no_route", func(t *testing.T) {
		expectRefusal(t, h.get("/nowhere"), 404, "no_route")
	})
	t.Run("405 method_not_allowed", func(t *testing.T) {
		resp, err := h.client.Post(h.base+"/getonly/x", "text/plain", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		expectRefusal(t, resp, 405, "method_not_allowed")
	})
	t.Run("431 header_too_large", func(t *testing.T) {
		expectRefusal(t, h.get("/small/", "X-Big", strings.Repeat("x", 5000)), 431, "header_too_large")
	})
	t.Run("431 header_too_large at the server's cut-off", func(t *testing.T) {
		// Beyond twice the limit (plus net/http's 4 KiB slack) the server
		// answers before the handler sees the request: still levee's JSON.
		expectRefusal(t, h.get("/small/", "X-Big", strings.Repeat("x", 16<<10)), 431, "header_too_large")
	})
	t.Run("413 body_too_large by Content-Length", func(t *testing.T) {
		resp, err := h.client.Post(h.base+"/small/", "text/plain", strings.NewReader(strings.Repeat("x", 2048)))
		if err != nil {
			t.Fatal(err)
		}
		expectRefusal(t, resp, 413, "body_too_large")
	})
	t.Run("413 body_too_large while streaming", func(t *testing.T) {
		// No Content-Length: the limit trips while the body is forwarded.
		body := io.MultiReader(strings.NewReader(strings.Repeat("y", 4096)))
		req, _ := http.NewRequest(http.MethodPost, h.base+"/small/", io.NopCloser(body))
		req.ContentLength = -1
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		expectRefusal(t, resp, 413, "body_too_large")
	})
	t.Run("small body passes", func(t *testing.T) {
		resp, err := h.client.Post(h.base+"/small/", "text/plain", strings.NewReader("tiny"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
	t.Run("502 upstream_unavailable", func(t *testing.T) {
		expectRefusal(t, h.get("/dead/"), 502, "upstream_unavailable")
	})
	t.Run("504 upstream_timeout", func(t *testing.T) {
		expectRefusal(t, h.get("/hang/"), 504, "upstream_timeout")
	})
	t.Run("503 no_available_endpoint", func(t *testing.T) {
		expectRefusal(t, h.get("/drained/"), 503, "no_available_endpoint")
	})
	t.Run("host routing", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, h.base+"/anything", nil)
		req.Host = "API.example.com:8080"
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Backend") != "ok" {
			t.Fatalf("status %d backend %q", resp.StatusCode, resp.Header.Get("X-Backend"))
		}
	})
	if got := h.metric(`levee_refusals_total{reason="upstream_timeout",route="hang"}`); got != 1 {
		t.Errorf("levee_refusals_total for upstream_timeout = %v, want 1", got)
	}
	if got := h.metric(`levee_requests_total{code="502",route="dead",upstream="dead"}`); got != 1 {
		t.Errorf("levee_requests_total for 502 = %v, want 1", got)
	}
}

// TestForwardedHeaders: X-Forwarded-*, hop-by-hop removal, request ids and
// traceparent.
func TestForwardedHeaders(t *testing.T) {
	seen := make(chan http.Header, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr := r.Header.Clone()
		hdr.Set("Host", r.Host)
		seen <- hdr
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Upstream", "yes")
		w.Header().Set("Connection", "X-Secret-Hop")
		w.Header().Set("X-Secret-Hop", "leak")
	}))
	t.Cleanup(up.Close)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  up: {endpoints: [{address: %s}]}
routes:
  - {name: all, match: {path_prefix: /}, upstream: up}
`, hostPort(up)))

	resp := h.get("/x?q=1",
		"X-Forwarded-For", "203.0.113.9",
		"Connection", "X-Drop-Me",
		"X-Drop-Me", "1",
		"Proxy-Authorization", "secret",
		"Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"X-Request-Id", "client-id-42",
		"User-Agent", "levee-test/1")
	resp.Body.Close()
	got := <-seen
	checks := map[string]string{
		"X-Forwarded-For":     "127.0.0.1", // the client's replaced, never appended to (issue 24)
		"X-Forwarded-Proto":   "http",
		"X-Forwarded-Host":    strings.TrimPrefix(h.base, "http://"),
		"X-Request-Id":        "client-id-42",
		"Traceparent":         "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"X-Drop-Me":           "",
		"Proxy-Authorization": "",
		"Host":                strings.TrimPrefix(h.base, "http://"),
		"User-Agent":          "levee-test/1",
	}
	for k, want := range checks {
		if v := got.Get(k); v != want {
			t.Errorf("upstream saw %s = %q, want %q", k, v, want)
		}
	}
	if resp.Header.Get("X-Upstream") != "yes" || resp.Header.Get("Keep-Alive") != "" || resp.Header.Get("X-Secret-Hop") != "" {
		t.Errorf("response headers not filtered: %v", resp.Header)
	}
	if resp.Header.Get("X-Request-Id") != "client-id-42" {
		t.Errorf("response X-Request-Id = %q", resp.Header.Get("X-Request-Id"))
	}

	// Without a client id levee makes one, passes it on and returns it; a
	// request without User-Agent gets none added.
	req, _ := http.NewRequest(http.MethodGet, h.base+"/y", nil)
	req.Header["User-Agent"] = []string{""} // net/http then sends no User-Agent
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got = <-seen
	if ua, ok := got["User-Agent"]; ok {
		t.Errorf("upstream saw User-Agent %q for a request without one", ua)
	}
	id := got.Get("X-Request-Id")
	if len(id) != 16 || resp.Header.Get("X-Request-Id") != id {
		t.Errorf("generated id %q, response id %q", id, resp.Header.Get("X-Request-Id"))
	}
}

// TestWebSocketEcho: an Upgrade passes through, and bytes flow both ways.
func TestWebSocketEcho(t *testing.T) {
	up := newWebSocketEchoUpstream(t, "")
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  ws: {endpoints: [{address: %s}]}
routes:
  - {name: ws, match: {path_prefix: /ws}, upstream: ws}
`, hostPort(up)))

	conn, err := net.Dial("tcp", strings.TrimPrefix(h.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	wsHandshakeAndEcho(t, conn, bufio.NewReader(conn))
}

func acceptKey(key string) string {
	s := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(s[:])
}

// maskedFrame is a client text frame (payload < 126 bytes).
func maskedFrame(msg string) []byte {
	mask := [4]byte{1, 2, 3, 4}
	f := []byte{0x81, 0x80 | byte(len(msg)), mask[0], mask[1], mask[2], mask[3]}
	for i := 0; i < len(msg); i++ {
		f = append(f, msg[i]^mask[i%4])
	}
	return f
}

func readFrame(r *bufio.Reader) ([]byte, error) {
	hdr := make([]byte, 6)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	n := int(hdr[1] & 0x7f)
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return nil, err
	}
	for i := range p {
		p[i] ^= hdr[2+i%4]
	}
	return p, nil
}

// TestAdminAPI: the admin listener's endpoints.
func TestAdminAPI(t *testing.T) {
	a, _ := backend(t, "a")
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  video:
    endpoints: [{address: %s, weight: 3}, {address: 127.0.0.1:1, weight: 0}]
routes:
  - {name: video, match: {path_prefix: /}, upstream: video}
`, hostPort(a)))
	h.get("/").Body.Close()
	for _, path := range []string{"/healthz", "/readyz", "/debug/pprof/"} {
		resp, err := h.client.Get(h.admin + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: status %d", path, resp.StatusCode)
		}
	}
	resp, err := h.client.Get(h.admin + "/api/v1/upstreams")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Upstreams []struct {
			Name      string `json:"name"`
			Endpoints []struct {
				Address  string `json:"address"`
				Weight   int    `json:"weight"`
				State    string `json:"state"`
				Requests int    `json:"requests"`
			} `json:"endpoints"`
		} `json:"upstreams"`
	}
	err = json.NewDecoder(resp.Body).Decode(&doc)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.Upstreams) != 1 || len(doc.Upstreams[0].Endpoints) != 2 {
		t.Fatalf("upstreams = %+v", doc)
	}
	e0, e1 := doc.Upstreams[0].Endpoints[0], doc.Upstreams[0].Endpoints[1]
	if e0.Address != hostPort(a) || e0.Weight != 3 || e0.State != "healthy" || e0.Requests != 1 {
		t.Errorf("endpoint 0 = %+v", e0)
	}
	if e1.State != "drained" || e1.Weight != 0 {
		t.Errorf("endpoint 1 = %+v", e1)
	}
	for _, name := range []string{"levee_requests_total", "levee_request_duration_seconds_bucket", "levee_upstream_request_duration_seconds_bucket", "levee_inflight_requests", "go_goroutines", "process_cpu_seconds_total"} {
		resp, _ := h.client.Get(h.admin + "/metrics")
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// TestConnectionCaps: server.max_connections caps the data listener (503)
// and server.max_connections_per_ip one client address (429); the excess
// connection gets connection_limit, counted in levee_refusals_total.
func TestConnectionCaps(t *testing.T) {
	a, _ := backend(t, "a")
	for _, tc := range []struct {
		server string
		status int
	}{
		{"{max_connections: 1}", 503},
		{"{max_connections_per_ip: 1}", 429},
	} {
		t.Run(tc.server, func(t *testing.T) {
			h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
server: %s
upstreams:
  a: {endpoints: [{address: %s}]}
routes:
  - {name: all, match: {path_prefix: /}, upstream: a}
`, tc.server, hostPort(a)))
			// The harness client holds one keep-alive connection open (its
			// body read to the end, or net/http would close it).
			first := h.get("/")
			io.Copy(io.Discard, first.Body)
			first.Body.Close()
			other := &http.Client{Transport: &http.Transport{}}
			resp, err := other.Get(h.base + "/")
			if err != nil {
				t.Fatal(err)
			}
			expectRefusal(t, resp, tc.status, "connection_limit")
			if got := h.metric(`levee_refusals_total{reason="connection_limit",route=""}`); got != 1 {
				t.Errorf("connection_limit refusals = %v, want 1", got)
			}
		})
	}
}

// newWebSocketEchoUpstream is a WebSocket upstream that answers the
// upgrade and echoes each masked client frame unmasked. With proto set, it
// refuses an upgrade whose X-Forwarded-Proto differs.
func newWebSocketEchoUpstream(t *testing.T, proto string) *httptest.Server {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") || (proto != "" && r.Header.Get("X-Forwarded-Proto") != proto) {
			http.Error(w, "expected a websocket upgrade (forwarded from "+proto+")", 400)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprintf(brw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
			acceptKey(r.Header.Get("Sec-WebSocket-Key")))
		brw.Flush()
		// Echo frames: read one masked client frame, answer it unmasked.
		for {
			payload, err := readFrame(brw.Reader)
			if err != nil {
				return
			}
			conn.Write(append([]byte{0x81, byte(len(payload))}, payload...))
		}
	}))
	t.Cleanup(up.Close)
	return up
}

// wsHandshakeAndEcho upgrades the connection w (read through br) to a
// WebSocket at /ws and checks that three frames come back echoed.
func wsHandshakeAndEcho(t *testing.T, w io.Writer, br *bufio.Reader) {
	t.Helper()
	key := "dGhlIHNhbXBsZSBub25jZQ=="
	fmt.Fprintf(w, "GET /ws HTTP/1.1\r\nHost: example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", key)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Sec-WebSocket-Accept") != acceptKey(key) {
		t.Fatalf("handshake: status %d accept %q", resp.StatusCode, resp.Header.Get("Sec-WebSocket-Accept"))
	}
	for _, msg := range []string{"hello", "levee", strings.Repeat("z", 100)} {
		w.Write(maskedFrame(msg))
		hdr := make([]byte, 2)
		if _, err := io.ReadFull(br, hdr); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, hdr[1])
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatal(err)
		}
		if string(got) != msg {
			t.Fatalf("echo = %q, want %q", got, msg)
		}
	}
}
