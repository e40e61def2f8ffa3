package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFastPathReusesOneConnection: sequential requests share one upstream
// connection, and it is the fast path's pool that holds it.
func TestFastPathReusesOneConnection(t *testing.T) {
	up := newCountingServer(t, hello)
	r := newRig(t, up.addr(), defaultOpts(), false)
	for i := range 20 {
		if code, body, _ := r.get(fmt.Sprintf("/n/%d", i)); code != 200 || body != "hello" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
	}
	if n := up.opened.Load(); n != 1 {
		t.Errorf("upstream accepted %d connections for 20 sequential requests, want 1", n)
	}
	if n := r.tr.IdleConns(up.addr()); n != 1 {
		t.Errorf("fast-path pool holds %d idle connections, want 1", n)
	}
	if f := r.ep.Stats.Failures.Load(); f != 0 {
		t.Errorf("%d endpoint failures", f)
	}
}

// TestFastPathIdleBound: after a burst of concurrent requests, at most
// MaxIdlePerEndpoint connections stay pooled and the rest are closed.
func TestFastPathIdleBound(t *testing.T) {
	const burst, maxIdle = 6, 2
	var arrived sync.WaitGroup
	arrived.Add(burst)
	release := make(chan struct{})
	up := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/burst" {
			arrived.Done()
			<-release
		}
		hello(w, r)
	}))
	o := defaultOpts()
	o.MaxIdlePerEndpoint = maxIdle
	r := newRig(t, up.addr(), o, false)
	var done sync.WaitGroup
	for range burst {
		done.Add(1)
		go func() {
			defer done.Done()
			resp, err := r.client.Get(r.front.URL + "/burst")
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	arrived.Wait() // all six hold an upstream connection at once
	close(release)
	done.Wait()
	if n := up.opened.Load(); n != burst {
		t.Fatalf("upstream accepted %d connections, want %d", n, burst)
	}
	if n := r.tr.IdleConns(up.addr()); n != maxIdle {
		t.Errorf("pool holds %d idle connections, want %d", n, maxIdle)
	}
	eventually(t, "surplus connections to close", func() bool { return up.closed.Load() == burst-maxIdle })
}

// TestFastPathIdleExpiry: SweepIdle closes a connection idle for Idle
// without any traffic. (That one idle for Idle is not reused when taken is
// upstream's TestExpiredConnectionNotTaken.)
func TestFastPathIdleExpiry(t *testing.T) {
	up := newCountingServer(t, hello)
	o := defaultOpts()
	o.Idle = 50 * time.Millisecond
	r := newRig(t, up.addr(), o, false)

	r.get("/")
	if n := r.tr.SweepIdle(time.Now()); n != 0 {
		t.Fatalf("sweep closed %d fresh connections", n)
	}
	if n := r.tr.SweepIdle(time.Now().Add(o.Idle)); n != 1 {
		t.Fatalf("sweep after Idle closed %d connections, want 1", n)
	}
	if n := r.tr.IdleConns(up.addr()); n != 0 {
		t.Fatalf("%d idle connections left after the sweep", n)
	}
	eventually(t, "the upstream to see the swept connection close", func() bool { return up.closed.Load() == 1 })

}

// TestFastPathRetriesStaleConnection: the upstream closes each connection
// right after its response (without saying so); the next request, sent on
// the dead pooled connection, is retried on a new one and succeeds, and
// the endpoint is not blamed.
func TestFastPathRetriesStaleConnection(t *testing.T) {
	up := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		brw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		brw.Flush()
		conn.Close()
	}))
	r := newRig(t, up.addr(), defaultOpts(), false)
	for i := range 5 {
		if code, body, _ := r.get("/"); code != 200 || body != "ok" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
		// Be sure the close reached levee's side before the next request
		// on one round, and race it on the others.
		if i == 1 {
			eventually(t, "the upstream close", func() bool { return up.closed.Load() == 2 })
			time.Sleep(10 * time.Millisecond)
		}
	}
	if f := r.ep.Stats.Failures.Load(); f != 0 {
		t.Errorf("%d endpoint failures counted for stale connections", f)
	}
	if n := up.opened.Load(); n != 5 {
		t.Errorf("upstream accepted %d connections, want 5 (one per request)", n)
	}
}

// rawUpstream is a scripted HTTP/1.1 origin: it answers each request with
// the raw bytes scripted for its path, then closes the connection if
// scripted so. It counts accepted connections.
type rawUpstream struct {
	ln       net.Listener
	script   map[string]rawAnswer
	accepted atomic.Int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
}

type rawAnswer struct {
	bytes string
	close bool
}

func newRawUpstream(t *testing.T, script map[string]rawAnswer) *rawUpstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln, script: script, conns: map[net.Conn]struct{}{}}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.accepted.Add(1)
			u.mu.Lock()
			u.conns[c] = struct{}{}
			u.mu.Unlock()
			u.wg.Add(1)
			go u.serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		u.mu.Lock()
		for c := range u.conns {
			c.Close()
		}
		u.mu.Unlock()
		u.wg.Wait()
	})
	return u
}

func (u *rawUpstream) serve(c net.Conn) {
	defer u.wg.Done()
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		a, ok := u.script[req.URL.Path]
		if !ok {
			a = rawAnswer{bytes: "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"}
		}
		if _, err := io.WriteString(c, a.bytes); err != nil || a.close {
			return
		}
	}
}

// TestFastPathFraming: each way an HTTP/1.x response can be framed reaches
// the client intact, and the connection is pooled exactly when the framing
// leaves it usable (a follow-up request then works on it).
func TestFastPathFraming(t *testing.T) {
	for _, tc := range []struct {
		name     string
		method   string
		answer   rawAnswer
		status   int
		body     string
		header   map[string]string // expected response headers
		trailer  map[string]string
		reusable bool
	}{
		{name: "content-length", answer: rawAnswer{bytes: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"},
			status: 200, body: "hello", reusable: true},
		{name: "chunked with trailers", answer: rawAnswer{bytes: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
			"3\r\nhel\r\n2\r\nlo\r\n0\r\nX-Sum: 42\r\n\r\n"},
			status: 200, body: "hello", trailer: map[string]string{"X-Sum": "42"}, reusable: true},
		{name: "close-delimited HTTP/1.0", answer: rawAnswer{bytes: "HTTP/1.0 200 OK\r\n\r\nhello", close: true},
			status: 200, body: "hello"},
		{name: "no length, Connection: close", answer: rawAnswer{bytes: "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello", close: true},
			status: 200, body: "hello"},
		{name: "HEAD with Content-Length", method: "HEAD", answer: rawAnswer{bytes: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"},
			status: 200, header: map[string]string{"Content-Length": "5"}, reusable: true},
		{name: "204", answer: rawAnswer{bytes: "HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n"},
			status: 204, header: map[string]string{"X-A": "1"}, reusable: true},
		{name: "304", answer: rawAnswer{bytes: "HTTP/1.1 304 Not Modified\r\nEtag: \"v1\"\r\n\r\n"},
			status: 304, header: map[string]string{"Etag": `"v1"`}, reusable: true},
		{name: "bytes after the response", answer: rawAnswer{bytes: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n"},
			status: 200, body: "ok"},
		{name: "103 Early Hints then 200", answer: rawAnswer{bytes: "HTTP/1.1 103 Early Hints\r\nLink: </s.css>; rel=preload\r\n\r\n" +
			"HTTP/1.1 100 Continue\r\n\r\n" +
			"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nX-Final: yes\r\n\r\nok"},
			status: 200, body: "ok", header: map[string]string{"X-Final": "yes"}, reusable: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := newRawUpstream(t, map[string]rawAnswer{
				"/case": tc.answer,
				"/next": {bytes: "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext"},
			})
			addr := up.ln.Addr().String()
			r := newRig(t, addr, defaultOpts(), false)
			method := tc.method
			if method == "" {
				method = http.MethodGet
			}
			code, body, resp := r.do(r.req(method, "/case"))
			if code != tc.status || body != tc.body {
				t.Fatalf("got %d %q, want %d %q", code, body, tc.status, tc.body)
			}
			for k, v := range tc.header {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("header %s = %q, want %q", k, got, v)
				}
			}
			for k, v := range tc.trailer {
				if got := resp.Trailer.Get(k); got != v {
					t.Errorf("trailer %s = %q, want %q (trailers %v)", k, got, v, resp.Trailer)
				}
			}
			want := 0
			if tc.reusable {
				want = 1
			}
			if n := r.tr.IdleConns(addr); n != want {
				t.Fatalf("%d pooled connections after the response, want %d", n, want)
			}
			if code, body, _ := r.get("/next"); code != 200 || body != "next" {
				t.Fatalf("follow-up: %d %q", code, body)
			}
			wantConns := int64(2)
			if tc.reusable {
				wantConns = 1
			}
			if n := up.accepted.Load(); n != wantConns {
				t.Errorf("upstream accepted %d connections, want %d", n, wantConns)
			}
		})
	}
}

// TestFastPathUnsolicitedSwitchIs502: a 101 to a request that asked for no
// upgrade is the endpoint's error, not a response to pass on.
func TestFastPathUnsolicitedSwitchIs502(t *testing.T) {
	up := newRawUpstream(t, map[string]rawAnswer{"/": {bytes: "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: Upgrade\r\n\r\n"}})
	r := newRig(t, up.ln.Addr().String(), defaultOpts(), false)
	if code, body, _ := r.get("/"); code != 502 || !strings.Contains(body, string(ReasonUpstreamUnavailable)) {
		t.Fatalf("got %d %q, want 502 upstream_unavailable", code, body)
	}
}

func TestFastPathResponseHeaderTimeoutIs504(t *testing.T) {
	up := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // levee gives up and closes the connection
	}))
	o := defaultOpts()
	o.ResponseHeader = 50 * time.Millisecond
	r := newRig(t, up.addr(), o, false)
	code, body, _ := r.get("/")
	if code != 504 || !strings.Contains(body, string(ReasonUpstreamTimeout)) {
		t.Fatalf("got %d %q, want 504 upstream_timeout", code, body)
	}
	if f := r.ep.Stats.Failures.Load(); f != 1 {
		t.Errorf("%d endpoint failures, want 1", f)
	}
}

func TestFastPathRefusedIs502(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := newRig(t, addr, defaultOpts(), false)
	code, body, _ := r.get("/")
	if code != 502 || !strings.Contains(body, string(ReasonUpstreamUnavailable)) {
		t.Fatalf("got %d %q, want 502 upstream_unavailable", code, body)
	}
}

// TestFastPathClientGoneCancelsUpstream: a client that gives up while levee
// waits for the response headers frees the upstream request at once (the
// endpoint sees its request context cancelled), and the request is
// recorded as 499, never as a 504.
func TestFastPathClientGoneCancelsUpstream(t *testing.T) {
	arrived := make(chan struct{})
	cancelled := make(chan struct{})
	up := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	}))
	o := defaultOpts()
	o.ResponseHeader = 30 * time.Second
	r := newRig(t, up.addr(), o, false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := r.req(http.MethodGet, "/").WithContext(ctx)
	errc := make(chan error, 1)
	go func() {
		resp, err := r.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	<-arrived
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("client error %v, want context.Canceled", err)
	}
	select {
	case <-cancelled:
	case <-time.After(2 * time.Second):
		t.Fatal("upstream request context not cancelled within 2s of the client leaving")
	}
	eventually(t, "the request to be recorded as 499", func() bool { return r.requests("499") == 1 })
	if n := r.requests("504"); n != 0 {
		t.Errorf("%v requests recorded as 504", n)
	}
	if f := r.ep.Stats.Failures.Load(); f != 0 {
		t.Errorf("%d endpoint failures for a client that left", f)
	}
}

// TestFastPathClientGoneMidBody: a client that leaves while levee streams a
// body frees the upstream read at once, and the connection, its response
// unfinished, is closed rather than pooled.
func TestFastPathClientGoneMidBody(t *testing.T) {
	cancelled := make(chan struct{})
	up := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first part")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	}))
	r := newRig(t, up.addr(), defaultOpts(), false)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := r.client.Do(r.req(http.MethodGet, "/").WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-cancelled:
	case <-time.After(2 * time.Second):
		t.Fatal("upstream request context not cancelled within 2s of the client leaving")
	}
	eventually(t, "the upstream connection to close", func() bool { return up.closed.Load() == 1 })
	if n := r.tr.IdleConns(up.addr()); n != 0 {
		t.Errorf("%d pooled connections after an unfinished body", n)
	}
}

// TestFastPathRequestHead: what the endpoint receives on the fast path.
func TestFastPathRequestHead(t *testing.T) {
	type seen struct {
		RequestURI, Host, Proto string
		Header                  http.Header
	}
	got := make(chan seen, 1)
	up := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.RequestURI, r.Host, r.Proto, r.Header.Clone()}
		w.WriteHeader(204)
	}))
	r := newRig(t, up.addr(), defaultOpts(), false)
	req := r.req(http.MethodGet, "/a%3Ab%20/c?x=1&y=%20&z")
	req.Host = "shop.example"
	req.Header["User-Agent"] = []string{""} // Go's client then sends none
	req.Header.Set("Connection", "X-Hop")
	req.Header.Set("X-Hop", "1")
	req.Header.Set("Keep-Alive", "timeout=5")
	req.Header.Set("Proxy-Authorization", "Basic eA==")
	req.Header.Set("Te", "trailers")
	req.Header.Set("X-Forwarded-For", "203.0.113.9")
	req.Header.Set("X-Forwarded-Proto", "gopher")
	req.Header.Set("X-Request-Id", "req-7")
	req.Header.Add("Accept", "a/b")
	req.Header.Add("Accept", "c/d")
	if code, _, _ := r.do(req); code != 204 {
		t.Fatalf("status %d", code)
	}
	s := <-got
	if s.RequestURI != "/a%3Ab%20/c?x=1&y=%20&z" {
		t.Errorf("request target %q", s.RequestURI)
	}
	if s.Host != "shop.example" || s.Proto != "HTTP/1.1" {
		t.Errorf("Host %q, proto %q", s.Host, s.Proto)
	}
	for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "Proxy-Authorization", "User-Agent", "Content-Length"} {
		if v, ok := s.Header[k]; ok {
			t.Errorf("%s forwarded: %q", k, v)
		}
	}
	want := map[string]string{
		"X-Forwarded-For":   "127.0.0.1", // the client's replaced, never appended to (issue 24)
		"X-Forwarded-Proto": "http",
		"X-Forwarded-Host":  "shop.example",
		"X-Request-Id":      "req-7",
		"Te":                "trailers",
	}
	for k, v := range want {
		if got := s.Header.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if got := s.Header.Values("Accept"); len(got) != 2 || got[0] != "a/b" || got[1] != "c/d" {
		t.Errorf("Accept = %q", got)
	}
	if n := r.tr.IdleConns(up.addr()); n != 1 {
		t.Errorf("request did not take the fast path (%d pooled)", n)
	}
}

// TestBodiesAndUpgradesKeepTheStandardPath: a request with a body goes
// through http.Transport (the fast-path pool stays empty) and arrives
// whole.
func TestBodiesAndUpgradesKeepTheStandardPath(t *testing.T) {
	up := newCountingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		json.NewEncoder(w).Encode(map[string]any{"method": r.Method, "body": string(b)})
	}))
	r := newRig(t, up.addr(), defaultOpts(), false)
	req, _ := http.NewRequest(http.MethodPost, r.front.URL+"/", strings.NewReader("payload"))
	code, body, _ := r.do(req)
	if code != 200 || !strings.Contains(body, `"body":"payload"`) {
		t.Fatalf("got %d %q", code, body)
	}
	req, _ = http.NewRequest(http.MethodPut, r.front.URL+"/", strings.NewReader("payload"))
	if code, body, _ = r.do(req); code != 200 || !strings.Contains(body, `"method":"PUT"`) {
		t.Fatalf("got %d %q", code, body)
	}
	if n := r.tr.IdleConns(up.addr()); n != 0 {
		t.Errorf("requests with a body used the fast-path pool (%d idle)", n)
	}
}
