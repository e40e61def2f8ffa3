package upstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestFastPathTakes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		body   io.Reader
		cl     int64
		header http.Header
		want   bool
	}{
		{"GET", "GET", nil, 0, nil, true},
		{"HEAD", "HEAD", nil, 0, nil, true},
		{"OPTIONS", "OPTIONS", nil, 0, nil, true},
		{"TRACE", "TRACE", nil, 0, nil, true},
		{"DELETE", "DELETE", nil, 0, nil, true},
		{"bodiless PUT", "PUT", nil, 0, nil, true},
		{"POST", "POST", nil, 0, nil, false},
		{"PATCH", "PATCH", nil, 0, nil, false},
		{"CONNECT", "CONNECT", nil, 0, nil, false},
		{"GET with a body", "GET", strings.NewReader("x"), 1, nil, false},
		{"PUT with a body", "PUT", strings.NewReader("x"), 1, nil, false},
		{"chunked DELETE", "DELETE", strings.NewReader("x"), -1, nil, false},
		{"websocket", "GET", nil, 0, http.Header{"Connection": {"Upgrade"}, "Upgrade": {"websocket"}}, false},
		{"Upgrade not in Connection", "GET", nil, 0, http.Header{"Upgrade": {"h2c"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/", tc.body)
			r.ContentLength = tc.cl
			if tc.body == nil {
				r.Body = http.NoBody
			}
			for k, v := range tc.header {
				r.Header[k] = v
			}
			if got := FastPath(r); got != tc.want {
				t.Errorf("fastPath = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFastPathHTTP2: a request from net/http's HTTP/2 server always has a
// Body; with ContentLength 0 it is empty, and a bodiless GET takes the
// fast path as it does over HTTP/1.1 (it took the standard transport
// before, two goroutines and about 40 allocations more per request).
func TestFastPathHTTP2(t *testing.T) {
	for _, tc := range []struct {
		name   string
		method string
		cl     int64
		want   bool
	}{
		{"GET, stream ended", "GET", 0, true},
		{"HEAD, stream ended", "HEAD", 0, true},
		{"GET with a body of unknown length", "GET", -1, false},
		{"GET with a body", "GET", 1, false},
		{"POST, stream ended", "POST", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(tc.method, "/", nil)
			r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
			r.ContentLength = tc.cl
			r.Body = io.NopCloser(strings.NewReader(""))
			if got := FastPath(r); got != tc.want {
				t.Errorf("FastPath = %v, want %v", got, tc.want)
			}
		})
	}
	// The same body on HTTP/1.1 keeps the standard path: there, a Body
	// other than NoBody is a body.
	r := httptest.NewRequest("GET", "/", nil)
	r.Body = io.NopCloser(strings.NewReader(""))
	if FastPath(r) {
		t.Error("an HTTP/1.1 GET with a Body took the fast path")
	}
}

// TestWriteRequestHeadMatchesOutboundHeader pins the fast path's head to the
// standard path's headers, so the two cannot drift apart.
func TestWriteRequestHeadMatchesOutboundHeader(t *testing.T) {
	for _, tc := range []struct {
		name   string
		host   string
		remote string
		header http.Header
		xff    string // Outbound.ForwardedFor
	}{
		{"plain", "h.example", "192.0.2.1:5000", http.Header{"Accept": {"*/*"}, "User-Agent": {"curl/8"}}, ""},
		{"hop-by-hop and Connection-listed", "h.example", "192.0.2.1:5000", http.Header{
			"Connection": {"close, X-A", "x-b"}, "X-A": {"1"}, "X-B": {"2"}, "X-C": {"3"},
			"Keep-Alive": {"1"}, "Transfer-Encoding": {"chunked"}, "Upgrade": {"h2c"}, "Trailer": {"X"},
			"Proxy-Connection": {"x"}, "Proxy-Authenticate": {"x"}}, ""},
		{"Te without trailers", "h.example", "192.0.2.1:5000", http.Header{"Te": {"gzip"}}, ""},
		{"Te with trailers", "h.example", "192.0.2.1:5000", http.Header{"Te": {"gzip, trailers"}}, ""},
		{"prior forwarding", "h.example", "[2001:db8::1]:443", http.Header{
			"X-Forwarded-For": {"198.51.100.1", "198.51.100.2"}, "X-Forwarded-Host": {"evil"}, "X-Forwarded-Proto": {"https"}}, ""},
		{"no Host, no remote port", "", "pipe", http.Header{"X-Forwarded-For": {"198.51.100.1"}, "X-Forwarded-Host": {"kept"}}, ""},
		{"several values", "h.example", "192.0.2.1:5000", http.Header{"Cookie": {"a=1", "b=2"}, "X-Request-Id": {"one", "two"}}, ""},
		{"untrusted Forwarded dropped", "h.example", "192.0.2.1:5000", http.Header{"Forwarded": {"for=6.6.6.6"}, "X-Forwarded-For": {"6.6.6.6"}}, ""},
		{"trusted chain", "h.example", "10.0.0.9:5000", http.Header{"Forwarded": {"for=203.0.113.5"}, "X-Forwarded-For": {"6.6.6.6, 203.0.113.5"}}, "203.0.113.5, 10.0.0.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/p?q=1", nil)
			r.Host, r.RemoteAddr, r.Header = tc.host, tc.remote, tc.header
			var buf strings.Builder
			bw := bufio.NewWriter(&buf)
			if err := writeRequestHead(bw, r, "10.0.0.1:80", "rid", tc.xff); err != nil {
				t.Fatal(err)
			}
			bw.Flush()
			sent, err := http.ReadRequest(bufio.NewReader(strings.NewReader(buf.String())))
			if err != nil {
				t.Fatalf("head does not parse: %v\n%s", err, buf.String())
			}
			want := OutboundHeader(r, "rid", tc.xff)
			if ua := want["User-Agent"]; len(ua) == 1 && ua[0] == "" {
				delete(want, "User-Agent") // the transport sends none
			}
			wantXFF := tc.xff
			if wantXFF == "" {
				wantXFF, _, _ = net.SplitHostPort(tc.remote)
			}
			if got := sent.Header["X-Forwarded-For"]; fmt.Sprint(got) != fmt.Sprint([]string{wantXFF}) && wantXFF != "" || wantXFF == "" && got != nil {
				t.Errorf("X-Forwarded-For %q, want %q alone (never the client's)", got, wantXFF)
			}
			if _, ok := sent.Header["Forwarded"]; ok != (tc.xff != "") {
				t.Errorf("Forwarded sent: %v, want it only from a trusted proxy", ok)
			}
			if fmt.Sprint(sent.Header) != fmt.Sprint(want) {
				t.Errorf("fast path sends\n%v\nstandard path sends\n%v", sent.Header, want)
			}
			wantHost := tc.host
			if wantHost == "" {
				wantHost = "10.0.0.1:80"
			}
			if sent.Host != wantHost || sent.RequestURI != "/p?q=1" {
				t.Errorf("Host %q, target %q", sent.Host, sent.RequestURI)
			}
		})
	}
}

func TestWriteRequestHeadRefusesLineBreaks(t *testing.T) {
	for _, h := range []http.Header{
		{"X-A": {"v\r\nX-Injected: 1"}},
		{"X-A": {"v\nX"}},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header = h
		bw := bufio.NewWriter(io.Discard)
		if err := writeRequestHead(bw, r, "a:1", "rid", ""); !errors.Is(err, errInvalidHeader) {
			t.Errorf("%v: err %v, want errInvalidHeader", h, err)
		}
	}
	// The client's X-Forwarded-For is never written (replaced), so its
	// line break cannot split the head; a bad chain from the proxy fails.
	r0 := httptest.NewRequest("GET", "/", nil)
	r0.Header = http.Header{"X-Forwarded-For": {"1.2.3.4\r\nX: y"}}
	if err := writeRequestHead(bufio.NewWriter(io.Discard), r0, "a:1", "rid", ""); err != nil {
		t.Errorf("client X-Forwarded-For with CRLF: %v, want it dropped", err)
	}
	if err := writeRequestHead(bufio.NewWriter(io.Discard), r0, "a:1", "rid", "1.2.3.4\nX: y"); !errors.Is(err, errInvalidHeader) {
		t.Errorf("ForwardedFor with LF: %v, want errInvalidHeader", err)
	}
	// A request target that could split the request line falls back to
	// the escaped form.
	r := httptest.NewRequest("GET", "/", nil)
	r.URL = &url.URL{Path: "/a b"}
	r.RequestURI = "/a b HTTP/1.1\r\nX: y"
	var buf strings.Builder
	bw := bufio.NewWriter(&buf)
	if err := writeRequestHead(bw, r, "a:1", "rid", ""); err != nil {
		t.Fatal(err)
	}
	bw.Flush()
	if line, _, _ := strings.Cut(buf.String(), "\r\n"); line != "GET /a%20b HTTP/1.1" {
		t.Errorf("request line %q", line)
	}
}

// TestPoolDropsAddressesNoLongerUsed: the per-address map does not keep
// addresses whose stacks are empty and unused for Idle, and a connection
// coming back to a dropped stack is closed, not pooled.
func TestPoolDropsAddressesNoLongerUsed(t *testing.T) {
	p := NewTransport(Options{Idle: time.Minute, MaxIdlePerEndpoint: 4}).h1
	t0 := time.Now()
	for i := range 100 {
		e := p.endpoint(fmt.Sprintf("10.0.0.%d:80", i))
		e.mu.Lock()
		e.lastUse = t0
		e.mu.Unlock()
	}
	if n := len(*p.eps.Load()); n != 100 {
		t.Fatalf("map holds %d addresses, want 100", n)
	}
	p.sweep(t0.Add(30 * time.Second))
	if n := len(*p.eps.Load()); n != 100 {
		t.Fatalf("recently used addresses dropped: %d left", n)
	}
	kept := p.endpoint("10.0.0.7:80")
	p.get(kept, t0.Add(50*time.Second)) // used again: stays
	p.sweep(t0.Add(90 * time.Second))
	m := *p.eps.Load()
	if len(m) != 1 || m["10.0.0.7:80"] != kept {
		t.Fatalf("after sweep the map holds %d addresses, want only the one used recently", len(m))
	}
	dropped := &h1Conn{home: &h1Idle{dropped: true}}
	if p.put(dropped, t0.Add(91*time.Second)) {
		t.Fatal("a connection was pooled on a dropped stack")
	}
}

// TestClientGoneWhileHeadIsWritten: a client that leaves between the
// request head's write and the arming of the response-header deadline
// (the abort hook's past deadline would be replaced by the header
// timeout) still frees the upstream read at once. This once waited out
// the whole header timeout (TestFastPathClientGoneCancelsUpstream failed
// now and then under load).
func TestClientGoneWhileHeadIsWritten(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	held := make(chan net.Conn, 1)
	go func() { // an upstream that reads and never answers
		c, err := ln.Accept()
		if err == nil {
			held <- c
		}
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	defer func() {
		select {
		case c := <-held:
			c.Close()
		default:
		}
	}()
	c := newH1Conn(nc, nil, nil)
	aborted := make(chan struct{})
	c.abort = func() { c.setPastDeadline(); close(aborted) }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	testHookHeadWritten = func() { cancel(); <-aborted } // the hook has run: its deadline is set
	defer func() { testHookHeadWritten = nil }()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	start := time.Now()
	_, err = c.exchange(ctx, r, ln.Addr().String(), "id", "", 10*time.Second)
	if took := time.Since(start); err == nil || took > 2*time.Second {
		t.Fatalf("exchange returned %v after %v; want an error at once (not after the 10s header timeout)", err, took)
	}
}

// TestHeadDeadlineKeptAcrossRequests: the response-head deadline, kept on
// a pooled connection from one request to the next (armHeadDeadline), does
// not cut a body that takes longer than the header timeout, is not set
// again for a request within its slack, and still cuts a head that does
// not come: all on one real connection of the fast path.
func TestHeadDeadlineKeptAcrossRequests(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const headerTimeout = 300 * time.Millisecond
	served := make(chan struct{})
	go func() { // three requests on one connection: quick, a slow body, none
		defer close(served)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		br := bufio.NewReader(c)
		for i := 0; i < 3; i++ {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			switch i {
			case 0:
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			case 1:
				// The head at once, then the body's bytes over 3 header
				// timeouts: a body has no deadline of its own here.
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n")
				for j := 0; j < 4; j++ {
					time.Sleep(headerTimeout * 3 / 4) // the body's pace, not a wait for a state
					c.Write([]byte("b"))
				}
			case 2:
				// No answer: the head's deadline must end the wait.
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				br.ReadByte()
			}
		}
	}()
	tr := NewTransport(Options{Connect: time.Second, ResponseHeader: headerTimeout, Idle: time.Minute, MaxIdlePerEndpoint: 8})
	defer tr.Close()
	get := func() (*http.Response, error) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		return tr.Forward(context.Background(), r, Outbound{Addr: ln.Addr().String(), RequestID: "id"})
	}
	read := func(want string) {
		t.Helper()
		resp, err := get()
		if err != nil {
			t.Fatalf("want %q: %v", want, err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != want {
			t.Fatalf("body %q, %v; want %q", b, err, want)
		}
	}
	read("ok")
	first := tr.h1.endpoint(ln.Addr().String()).conns[0].headDeadline
	read("bbbb") // 2.25 header timeouts of body after a head kept from the first request
	if tr.h1.idleCount(ln.Addr().String()) != 1 {
		t.Fatal("the connection was not pooled again")
	}
	if first.IsZero() {
		t.Fatal("no head deadline was kept from the first request")
	}
	start := time.Now()
	_, err = get()
	took := time.Since(start)
	if err == nil || took < headerTimeout || took > headerTimeout+deadlineSlack(headerTimeout)+2*time.Second {
		t.Fatalf("an unanswered request returned %v after %v; want a timeout between %v and %v (and a margin)",
			err, took, headerTimeout, headerTimeout+deadlineSlack(headerTimeout))
	}
	<-served
}
