package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// Raw-socket tests of framing, trailers, upgrades, CONNECT and header
// names: a real levee on loopback, clients writing bytes with net.Dial,
// and an upstream that records every byte it receives. Each case is
// either refused (its status, then the connection closes; the upstream
// receives nothing) or forwarded as exactly one request, whose bytes are
// checked.

// rawUpstream records every byte of every connection it accepts. On each
// connection it reads one request (body and trailers included), answers
// it (answer, or a plain 200 with Connection: close), then keeps reading
// for a moment, so that anything sent after the request is recorded too,
// and closes.
type rawUpstream struct {
	t      *testing.T
	ln     net.Listener
	answer func(*http.Request) string
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  []*bytes.Buffer
	active int
}

const rawOK = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"

func newRawUpstream(t *testing.T, answer func(*http.Request) string) *rawUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{t: t, ln: ln, answer: answer}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			buf := &bytes.Buffer{}
			u.conns = append(u.conns, buf)
			u.active++
			u.mu.Unlock()
			u.wg.Add(1)
			go u.serve(c, buf)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		u.wg.Wait()
	})
	return u
}

// lockedWriter appends to a buffer under the upstream's lock.
type lockedWriter struct {
	u   *rawUpstream
	buf *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.u.mu.Lock()
	defer w.u.mu.Unlock()
	return w.buf.Write(p)
}

func (u *rawUpstream) serve(c net.Conn, buf *bytes.Buffer) {
	defer u.wg.Done()
	defer func() {
		c.Close()
		u.mu.Lock()
		u.active--
		u.mu.Unlock()
	}()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(io.TeeReader(c, lockedWriter{u, buf}))
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	io.Copy(io.Discard, req.Body) // the body and its trailers
	answer := rawOK
	if u.answer != nil {
		answer = u.answer(req)
	}
	io.WriteString(c, answer)
	// Whatever follows the request is recorded too, until levee closes or
	// a short while passes (the answer said Connection: close).
	c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	io.Copy(io.Discard, br)
}

// settle waits (bounded) until no connection is being served, and returns
// the bytes of every connection so far.
func (u *rawUpstream) settle() []string {
	u.t.Helper()
	var out []string
	testkit.Eventually(u.t, 10*time.Second, func() (bool, string) {
		u.mu.Lock()
		defer u.mu.Unlock()
		if u.active != 0 {
			return false, fmt.Sprintf("%d upstream connections still open", u.active)
		}
		out = out[:0]
		for _, b := range u.conns {
			out = append(out, b.String())
		}
		return true, ""
	})
	return out
}

// upstreamRequest is one request as the upstream received it.
type upstreamRequest struct {
	req  *http.Request
	body string
	raw  string // every byte of its connection
}

// oneRequest asserts that, since the upstream's log held skip
// connections, exactly one request arrived (on one connection, with no
// byte after it), and returns it.
func (u *rawUpstream) oneRequest(t *testing.T, skip int) upstreamRequest {
	t.Helper()
	conns := u.settle()[skip:]
	if len(conns) != 1 {
		t.Fatalf("upstream saw %d connections, want 1: %q", len(conns), conns)
	}
	br := bufio.NewReader(strings.NewReader(conns[0]))
	req, err := http.ReadRequest(br)
	if err != nil {
		t.Fatalf("upstream bytes are not a request (%v): %q", err, conns[0])
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		t.Fatalf("upstream request body (%v): %q", err, conns[0])
	}
	if rest, _ := io.ReadAll(br); len(rest) > 0 {
		t.Fatalf("upstream received %q after the request: %q", rest, conns[0])
	}
	return upstreamRequest{req: req, body: string(body), raw: conns[0]}
}

// count returns how many connections the upstream has seen.
func (u *rawUpstream) count() int { return len(u.settle()) }

// rawSend writes req on a new connection to levee and reads the first
// response (its body too).
func rawSend(t *testing.T, addr, req string) (net.Conn, *bufio.Reader, *http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	method, _, _ := strings.Cut(req, " ")
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return c, br, resp, string(body)
}

// expectClosed reads until EOF (within the connection's deadline): the
// connection must close with nothing more on it.
func expectClosed(t *testing.T, br *bufio.Reader) {
	t.Helper()
	rest, err := io.ReadAll(br)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the connection stayed open")
	}
	if len(rest) > 0 {
		t.Fatalf("after the answer: %q", rest)
	}
}

func framingConfig(upstream, underscores string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
server: {underscores_in_headers: %s}
upstreams:
  raw: {endpoints: [{address: %s}]}
routes:
  - {name: trailers, match: {path_prefix: /trailers/}, upstream: raw, forward_trailers: [X-Checksum, X-Trace]}
  - {name: noupgrade, match: {path_prefix: /noupgrade/}, upstream: raw, upgrades: []}
  - {name: tunnel, match: {host: tunnel.example, methods: [CONNECT]}, upstream: raw}
  - {name: keyed, match: {path_prefix: /keyed/}, upstream: raw, auth: api_key}
  - {name: open, match: {path_prefix: /}, upstream: raw}
apps:
  - {id: good, api_key_sha256: [%s], grants: [keyed]}
`, underscores, upstream, keyHash(goodKey))
}

// TestFramingRefusedOnEveryPath: each smuggling shape, on the loop's own
// path and on each path that used to be handed to net/http unchecked, is
// answered with its error status and the connection closed; the upstream
// receives not one byte.
func TestFramingRefusedOnEveryPath(t *testing.T) {
	u := newRawUpstream(t, nil)
	h := start(t, framingConfig(u.ln.Addr().String(), "drop"))
	addr := h.g.Addr().String()
	for _, tc := range framingRefusals() {
		t.Run(tc.name, func(t *testing.T) {
			before := u.count()
			_, br, resp, body := rawSend(t, addr, tc.req)
			if resp.StatusCode != tc.status || !resp.Close {
				t.Fatalf("status %d (close %v) %q, want %d and close", resp.StatusCode, resp.Close, body, tc.status)
			}
			expectClosed(t, br)
			if n := u.count(); n != before {
				t.Fatalf("the upstream saw %d new connections", n-before)
			}
		})
	}
}

// framingRefusal is a head levee must refuse, and its status.
type framingRefusal struct {
	name, req string
	status    int
}

// framingRefusals are the smuggling shapes of TestFramingRefusedOnEveryPath
// (and, over TLS, TestFramingRefusedOverTLS).
func framingRefusals() []framingRefusal {
	clte := "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
	many := strings.Repeat("X-Filler: v\r\n", 130)
	return []framingRefusal{
		{"CL+TE, loop", "POST /x HTTP/1.1\r\nHost: a\r\n" + clte, 400},
		{"TE+CL, loop", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400},
		{"CL+TE, absolute-form", "POST http://a/x HTTP/1.1\r\nHost: a\r\n" + clte, 400},
		{"CL+TE, over 128 fields", "POST /x HTTP/1.1\r\nHost: a\r\n" + many + clte, 400},
		{"CL+TE, bare LF", "POST /x HTTP/1.1\r\nHost: a\nX: y\r\n" + clte, 400},
		{"CL+TE, HTTP/1.2", "POST /x HTTP/1.2\r\nHost: a\r\n" + clte, 400},
		{"CL+TE, CONNECT", "CONNECT tunnel.example:443 HTTP/1.1\r\nHost: tunnel.example:443\r\n" + clte, 400},
		{"CL+TE, Expect", "POST /x HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\n" + clte, 400},
		{"TE on HTTP/1.0", "POST /x HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400},
		{"TE gzip", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\nhello", 400},
		{"TE chunked, chunked", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", 400},
		{"TE chunked on two lines", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"TE identity", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\nhello", 400},
		{"TE gzip, chunked", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501},
		{"conflicting Content-Length", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400},
		{"Content-Length list", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\nhello", 400},
		{"obs-fold", "GET /x HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", 400},
		{"obs-fold, absolute-form", "GET http://a/x HTTP/1.1\r\nHost: a\r\nX-A: b\r\n\tc\r\n\r\n", 400},
		{"NUL", "GET /x HTTP/1.1\r\nHost: a\r\nX-A: b\x00c\r\n\r\n", 400},
		{"NUL, over 128 fields", "GET /x HTTP/1.1\r\nHost: a\r\n" + many + "X-A: \x00\r\n\r\n", 400},
		{"bare CR", "GET /x HTTP/1.1\r\nHost: a\r\nX-A: b\rc\r\n\r\n", 400},
		{"bare LF only", "GET /x HTTP/1.1\nHost: a\n\n", 400},
		{"HTTP/2.0 request line", "GET /x HTTP/2.0\r\nHost: a\r\n\r\n", 505},
		{"HTTP/0.9 request line", "GET /x\r\n\r\n", 400},
	}
}

// TestFramingForwardedOnce: a chunked request handed to net/http is
// forwarded as exactly one request, and the connection closes after it,
// so a smuggled second request on it reaches neither net/http nor the
// upstream; a Content-Length request served by the loop is one request.
func TestFramingForwardedOnce(t *testing.T) {
	u := newRawUpstream(t, nil)
	h := start(t, framingConfig(u.ln.Addr().String(), "drop"))
	addr := h.g.Addr().String()

	t.Run("chunked, then CL+TE on the same connection", func(t *testing.T) {
		skip := u.count()
		_, br, resp, body := rawSend(t, addr, "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"+
			"POST /smuggled HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
		if resp.StatusCode != 200 || body != "ok" || !resp.Close {
			t.Fatalf("%d %q close %v", resp.StatusCode, body, resp.Close)
		}
		expectClosed(t, br)
		got := u.oneRequest(t, skip)
		if got.req.URL.Path != "/x" || got.body != "hello" || strings.Contains(got.raw, "smuggled") {
			t.Fatalf("upstream got %q", got.raw)
		}
	})
	t.Run("chunked, absolute-form", func(t *testing.T) {
		skip := u.count()
		_, _, resp, _ := rawSend(t, addr, "POST http://a/y HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if got := u.oneRequest(t, skip); got.body != "abc" {
			t.Fatalf("upstream got %q", got.raw)
		}
	})
	t.Run("content-length, loop", func(t *testing.T) {
		skip := u.count()
		_, _, resp, _ := rawSend(t, addr, "POST /z HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		got := u.oneRequest(t, skip)
		if got.body != "hello" || got.req.ContentLength != 5 {
			t.Fatalf("upstream got %q", got.raw)
		}
	})
}

// TestRequestTrailers: request trailers reach the upstream only when the
// route names them and the client declared them; fields that frame,
// route or identify never do, whatever the client declares.
func TestRequestTrailers(t *testing.T) {
	u := newRawUpstream(t, func(r *http.Request) string {
		if r.URL.Path == "/grpc" {
			return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: Grpc-Status\r\nConnection: close\r\n\r\n" +
				"2\r\nok\r\n0\r\nGrpc-Status: 0\r\n\r\n"
		}
		return rawOK
	})
	h := start(t, framingConfig(u.ln.Addr().String(), "drop"))
	addr := h.g.Addr().String()
	evil := "Host: evil.example\r\nLevee-App: admin\r\nX-Forwarded-For: 6.6.6.6\r\nX-Api-Key: " + goodKey + "\r\nX-Other: 1\r\n"
	send := func(t *testing.T, path, declared, trailers string) upstreamRequest {
		t.Helper()
		skip := u.count()
		req := "POST " + path + " HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
		if declared != "" {
			req += "Trailer: " + declared + "\r\n"
		}
		req += "\r\n5\r\nhello\r\n0\r\n" + trailers + "\r\n"
		_, _, resp, body := rawSend(t, addr, req)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d %q", resp.StatusCode, body)
		}
		got := u.oneRequest(t, skip)
		if got.body != "hello" {
			t.Fatalf("upstream got %q", got.raw)
		}
		for _, bad := range []string{"evil.example", "admin", "6.6.6.6", goodKey, "X-Other"} {
			if strings.Contains(got.raw, bad) {
				t.Fatalf("upstream got %q in %q", bad, got.raw)
			}
		}
		return got
	}
	t.Run("allowed and declared", func(t *testing.T) {
		got := send(t, "/trailers/a", "X-Checksum, Host, Levee-App, X-Forwarded-For, X-Api-Key, X-Other", "X-Checksum: zq-sum\r\n"+evil)
		if len(got.req.Trailer) != 1 || got.req.Trailer.Get("X-Checksum") != "zq-sum" {
			t.Fatalf("upstream trailers %v, want X-Checksum only: %q", got.req.Trailer, got.raw)
		}
	})
	t.Run("allowed, not declared", func(t *testing.T) {
		got := send(t, "/trailers/a", "", "X-Checksum: zq-sum\r\n"+evil)
		if len(got.req.Trailer) != 0 || strings.Contains(got.raw, "zq-sum") {
			t.Fatalf("upstream trailers %v: %q", got.req.Trailer, got.raw)
		}
	})
	t.Run("response trailers pass", func(t *testing.T) {
		skip := u.count()
		_, br, resp, body := rawSend(t, addr, "POST /grpc HTTP/1.1\r\nHost: a\r\nTE: trailers\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
		if resp.StatusCode != 200 || body != "ok" || resp.Trailer.Get("Grpc-Status") != "0" {
			t.Fatalf("%d %q trailers %v", resp.StatusCode, body, resp.Trailer)
		}
		expectClosed(t, br)
		u.oneRequest(t, skip)
	})
	t.Run("route allows none", func(t *testing.T) {
		got := send(t, "/other", "X-Checksum, Host, Levee-App", "X-Checksum: zq-sum\r\n"+evil)
		if len(got.req.Trailer) != 0 || strings.Contains(got.raw, "zq-sum") {
			t.Fatalf("upstream trailers %v: %q", got.req.Trailer, got.raw)
		}
	})
}

// TestUpgradesScreened: h2c and HTTP2-Settings never reach the upstream,
// nor a protocol the route does not allow; the request goes on as an
// ordinary one. An upstream switching to a protocol that was not offered
// is refused. CONNECT is refused unless a route lists it.
func TestUpgradesScreened(t *testing.T) {
	u := newRawUpstream(t, func(r *http.Request) string {
		if r.URL.Path == "/switch" {
			return "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"
		}
		return rawOK
	})
	h := start(t, framingConfig(u.ln.Addr().String(), "drop"))
	addr := h.g.Addr().String()
	forwarded := func(t *testing.T, req string, absent ...string) upstreamRequest {
		t.Helper()
		skip := u.count()
		_, _, resp, body := rawSend(t, addr, req)
		if resp.StatusCode != 200 || body != "ok" {
			t.Fatalf("status %d %q", resp.StatusCode, body)
		}
		got := u.oneRequest(t, skip)
		for _, a := range absent {
			if strings.Contains(strings.ToLower(got.raw), strings.ToLower(a)) {
				t.Fatalf("upstream got %q: %q", a, got.raw)
			}
		}
		return got
	}
	t.Run("h2c and HTTP2-Settings", func(t *testing.T) {
		forwarded(t, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
			"h2c", "HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA", "Upgrade:")
	})
	t.Run("HTTP2-Settings alone", func(t *testing.T) {
		forwarded(t, "GET /x HTTP/1.1\r\nHost: a\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n", "HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA")
	})
	t.Run("h2c among allowed", func(t *testing.T) {
		got := forwarded(t, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: h2c, websocket\r\n\r\n", "h2c")
		if got.req.Header.Get("Upgrade") != "websocket" {
			t.Fatalf("Upgrade %q: %q", got.req.Header.Get("Upgrade"), got.raw)
		}
	})
	t.Run("protocol not allowed by default", func(t *testing.T) {
		forwarded(t, "GET /x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: foo/2\r\n\r\n", "foo/2", "Upgrade:")
	})
	t.Run("websocket on a route with upgrades: []", func(t *testing.T) {
		forwarded(t, "GET /noupgrade/x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n\r\n", "Upgrade:")
	})
	t.Run("upstream switches unasked", func(t *testing.T) {
		for _, offer := range []string{"h2c", "websocket"} {
			skip := u.count()
			_, _, resp, body := rawSend(t, addr, "GET /switch HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: "+offer+"\r\n\r\n")
			if resp.StatusCode != 502 || !strings.Contains(body, "upstream_unavailable") {
				t.Fatalf("offer %s, upstream switches to h2c: status %d %q", offer, resp.StatusCode, body)
			}
			u.oneRequest(t, skip)
		}
	})
	t.Run("CONNECT refused", func(t *testing.T) {
		before := u.count()
		for _, req := range []string{
			"CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n",
			"CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n",
		} {
			_, _, resp, body := rawSend(t, addr, req)
			if resp.StatusCode != 405 || !strings.Contains(body, `"reason":"method_not_allowed"`) {
				t.Fatalf("%q: status %d %q", req, resp.StatusCode, body)
			}
		}
		if n := u.count(); n != before {
			t.Fatalf("the upstream saw %d connections", n-before)
		}
	})
	t.Run("CONNECT on a route that lists it", func(t *testing.T) {
		skip := u.count()
		_, _, resp, _ := rawSend(t, addr, "CONNECT tunnel.example:443 HTTP/1.1\r\nHost: tunnel.example:443\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		if got := u.oneRequest(t, skip); got.req.Method != http.MethodConnect {
			t.Fatalf("upstream got %q", got.raw)
		}
	})
}

// TestUnderscoreHeaders: X-Api_Key in each mode of
// server.underscores_in_headers. Dropped, it neither reaches the upstream
// nor authenticates; allowed, it is forwarded (and still does not
// authenticate: it is not X-Api-Key); rejected, 400 bad_header_name.
func TestUnderscoreHeaders(t *testing.T) {
	for _, mode := range []string{"drop", "allow", "reject"} {
		t.Run(mode, func(t *testing.T) {
			u := newRawUpstream(t, nil)
			h := start(t, framingConfig(u.ln.Addr().String(), mode))
			addr := h.g.Addr().String()

			_, _, resp, body := rawSend(t, addr, "GET /keyed/x HTTP/1.1\r\nHost: a\r\nX-Api_Key: "+goodKey+"\r\n\r\n")
			want, reason := 401, "unauthenticated"
			if mode == "reject" {
				want, reason = 400, "bad_header_name"
			}
			if resp.StatusCode != want || !strings.Contains(body, `"reason":"`+reason+`"`) {
				t.Fatalf("keyed route: %d %q, want %d %s", resp.StatusCode, body, want, reason)
			}
			skip := u.count()
			_, _, resp, body = rawSend(t, addr, "GET /open HTTP/1.1\r\nHost: a\r\nX-Api_Key: secret\r\nX-Kept: 1\r\n\r\n")
			if mode == "reject" {
				if resp.StatusCode != 400 || !strings.Contains(body, `"reason":"bad_header_name"`) {
					t.Fatalf("%d %q", resp.StatusCode, body)
				}
				if n := u.count(); n != skip {
					t.Fatalf("the upstream saw %d connections", n-skip)
				}
				return
			}
			if resp.StatusCode != 200 {
				t.Fatalf("%d %q", resp.StatusCode, body)
			}
			got := u.oneRequest(t, skip)
			forwarded := strings.Contains(strings.ToLower(got.raw), "x-api_key: secret")
			if forwarded != (mode == "allow") || !strings.Contains(got.raw, "X-Kept: 1") {
				t.Fatalf("mode %s: upstream got %q", mode, got.raw)
			}
			if mode == "drop" {
				// The mode is fixed at start: a reload changing it is refused.
				h.writeConfig(framingConfig(u.ln.Addr().String(), "allow"))
				if err := h.g.Reload(); err == nil || !strings.Contains(err.Error(), "server.underscores_in_headers") {
					t.Fatalf("reload changing underscores_in_headers: %v", err)
				}
			}
		})
	}
}
