package h1server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/levee-gw/levee/internal/testkit"
)

// TestMain fails the package's tests if a connection goroutine, watcher or
// timer outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestKeepAliveAndPipelining(t *testing.T) {
	ts := startServer(t, echo)
	c, br := ts.dial()
	// Two requests in one write, answered in order; then a third.
	io.WriteString(c, "GET /a?x=1 HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc")
	resp, body := readResponse(t, br, "GET")
	if body != "GET /a x=1 h " || resp.ContentLength != int64(len(body)) || resp.Close {
		t.Fatalf("first: %q (length %d, close %v)", body, resp.ContentLength, resp.Close)
	}
	if resp.Header.Get("Date") == "" {
		t.Error("no Date header")
	}
	if _, body = readResponse(t, br, "POST"); body != "POST /b  h abc" {
		t.Fatalf("second: %q", body)
	}
	io.WriteString(c, "GET /c HTTP/1.1\r\nHost: h\r\n\r\n")
	if _, body = readResponse(t, br, "GET"); body != "GET /c  h " {
		t.Fatalf("third: %q", body)
	}
}

func TestConnectionClose(t *testing.T) {
	ts := startServer(t, echo)
	c, br := ts.dial()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n")
	resp, _ := readResponse(t, br, "GET")
	if !resp.Close {
		t.Error("response lacks Connection: close")
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("connection still open: %v", err)
	}
}

func TestHTTP10(t *testing.T) {
	ts := startServer(t, echo)
	t.Run("closes by default", func(t *testing.T) {
		c, br := ts.dial()
		io.WriteString(c, "GET /x HTTP/1.0\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		if resp.ProtoMinor != 0 || body != "GET /x   " {
			t.Fatalf("%s %q", resp.Proto, body)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("connection still open: %v", err)
		}
	})
	t.Run("keep-alive", func(t *testing.T) {
		c, br := ts.dial()
		for range 2 {
			io.WriteString(c, "GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
			resp, _ := readResponse(t, br, "GET")
			if resp.Header.Get("Connection") != "keep-alive" {
				t.Fatalf("Connection = %q", resp.Header.Get("Connection"))
			}
		}
	})
	t.Run("unknown length is close-delimited", func(t *testing.T) {
		ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("a"))
			w.(http.Flusher).Flush()
			w.Write([]byte("b"))
		}))
		c, br := ts.dial()
		io.WriteString(c, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		if body != "ab" || resp.ContentLength != -1 || len(resp.TransferEncoding) != 0 {
			t.Fatalf("body %q length %d te %v", body, resp.ContentLength, resp.TransferEncoding)
		}
	})
}

func TestChunkedResponseAndTrailers(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		w.WriteHeader(200)
		for i := range 3 {
			fmt.Fprintf(w, "part%d;", i)
			w.(http.Flusher).Flush()
		}
		w.Header().Set("X-Sum", "3")
	}))
	c, br := ts.dial()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	resp, body := readResponse(t, br, "GET")
	if body != "part0;part1;part2;" || len(resp.TransferEncoding) != 1 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("body %q te %v", body, resp.TransferEncoding)
	}
	if resp.Trailer.Get("X-Sum") != "3" {
		t.Fatalf("trailer %v", resp.Trailer)
	}
	// The connection is still usable.
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	readResponse(t, br, "GET")
}

func TestLargeBodyIsChunked(t *testing.T) {
	big := strings.Repeat("z", 3*bufferBeforeChunking)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, big[:10])
		io.WriteString(w, big[10:])
	}))
	c, br := ts.dial()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	resp, body := readResponse(t, br, "GET")
	if body != big || resp.ContentLength != -1 {
		t.Fatalf("%d bytes, length %d", len(body), resp.ContentLength)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("sniffed Content-Type %q", ct)
	}
}

func TestHEAD(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	c, br := ts.dial()
	io.WriteString(c, "HEAD / HTTP/1.1\r\nHost: h\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n")
	resp, body := readResponse(t, br, "HEAD")
	if body != "" || resp.ContentLength != 5 {
		t.Fatalf("HEAD: body %q length %d", body, resp.ContentLength)
	}
	if _, body = readResponse(t, br, "GET"); body != "hello" {
		t.Fatalf("GET after HEAD: %q", body)
	}
}

func TestUnreadBody(t *testing.T) {
	ignore := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	ts := startServer(t, ignore)
	t.Run("small remainder is drained", func(t *testing.T) {
		c, br := ts.dial()
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123456789GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		for range 2 {
			if resp, body := readResponse(t, br, "POST"); body != "ok" || resp.Close {
				t.Fatalf("%q close %v", body, resp.Close)
			}
		}
	})
	t.Run("large remainder closes", func(t *testing.T) {
		c, br := ts.dial()
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n", maxDrain+1)
		resp, _ := readResponse(t, br, "POST")
		if !resp.Close {
			t.Fatal("connection not closed after an unread large body")
		}
	})
}

func TestBadRequests(t *testing.T) {
	ts := startServer(t, echo, func(o *Options) {
		o.HeaderTooLarge = func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusRequestHeaderFieldsTooLarge)
			io.WriteString(w, `{"reason":"header_too_large"}`)
		}
	})
	for _, tc := range []struct {
		name, req string
		status    int
		body      string
	}{
		{"missing host", "GET / HTTP/1.1\r\n\r\n", 400, "400 Bad Request: missing required Host header"},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n", 400, "400 Bad Request: obs-fold"},
		{"smuggling shape", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc", 400, "400 Bad Request: Content-Length with Transfer-Encoding"},
		{"smuggling shape, absolute form", "POST http://h/ HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\nabc", 400, "400 Bad Request: Content-Length with Transfer-Encoding"},
		{"conflicting lengths", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400, "400 Bad Request: malformed or conflicting Content-Length"},
		{"bare LF", "GET / HTTP/1.1\nHost: h\n\n", 400, "400 Bad Request: bare LF line end"},
		{"bare LF in a field", "GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n", 400, "400 Bad Request: bare LF line end"},
		{"te on http/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400, "400 Bad Request: Transfer-Encoding on HTTP/1.0"},
		{"te gzip, chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501, "501 Not Implemented: unsupported transfer coding"},
		{"http/2.0 line", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505, "505 HTTP Version Not Supported: HTTP version not supported"},
		{"head too large", "GET / HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("x", 4096+4096) + "\r\n\r\n", 431, `{"reason":"header_too_large"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := ts.dial()
			io.WriteString(c, tc.req)
			resp, body := readResponse(t, br, "GET")
			if resp.StatusCode != tc.status || body != tc.body || !resp.Close {
				t.Fatalf("status %d body %q close %v", resp.StatusCode, body, resp.Close)
			}
			// The connection closes (the 10 s deadline bounds the wait).
			if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
				t.Fatalf("after the answer: %q, %v; want EOF", rest, err)
			}
		})
	}
}

func TestHandoff(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s", r.Proto, b)
	})
	mux.HandleFunc("/upgrade", func(w http.ResponseWriter, r *http.Request) {
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		brw.Flush()
		line, _ := brw.ReadString('\n')
		io.WriteString(conn, "echo "+line)
	})
	ts := startServer(t, mux)

	t.Run("h2c prior knowledge", func(t *testing.T) {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: p}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("http://" + ts.addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != "HTTP/2.0 " {
			t.Fatalf("%q", b)
		}
	})
	t.Run("upgrade after a request the loop served", func(t *testing.T) {
		c, br := ts.dial()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		readResponse(t, br, "GET")
		io.WriteString(c, "GET /upgrade HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nping\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 101 {
			t.Fatalf("%v %v", resp, err)
		}
		if line, _ := br.ReadString('\n'); line != "echo ping\n" {
			t.Fatalf("%q", line)
		}
	})
	t.Run("expect 100-continue", func(t *testing.T) {
		c, br := ts.dial()
		io.WriteString(c, "PUT / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 100 {
			t.Fatalf("%v %v", resp, err)
		}
		io.WriteString(c, "hi")
		if _, body := readResponse(t, br, "PUT"); body != "HTTP/1.1 hi" {
			t.Fatalf("%q", body)
		}
	})
	t.Run("chunked request body", func(t *testing.T) {
		c, br := ts.dial()
		// A second request follows on the connection, in a shape net/http
		// accepts and the loop refuses: net/http must not read it.
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"+
			"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nyo\r\n0\r\n\r\n")
		resp, body := readResponse(t, br, "POST")
		if body != "HTTP/1.1 hi" || !resp.Close {
			t.Fatalf("%q, close %v", body, resp.Close)
		}
		if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
			t.Fatalf("after the handed-off request: %q, %v; want EOF", rest, err)
		}
	})
	st := ts.srv.Stats().Handoffs
	for _, r := range []string{"h2_preface", "upgrade", "expect", "transfer_encoding"} {
		if st[r] != 1 {
			t.Errorf("handoffs[%s] = %d, want 1 (%v)", r, st[r], st)
		}
	}
}

func TestSlowClients(t *testing.T) {
	ts := startServer(t, echo, func(o *Options) {
		o.ReadHeaderTimeout = 200 * time.Millisecond
		o.IdleTimeout = 400 * time.Millisecond
	})
	closedWithin := func(t *testing.T, c net.Conn, br *bufio.Reader, lo, hi time.Duration) {
		t.Helper()
		start := time.Now()
		_, err := br.ReadByte()
		d := time.Since(start)
		if err == nil || d < lo || d > hi {
			t.Fatalf("read returned %v after %v; want a close between %v and %v", err, d, lo, hi)
		}
	}
	t.Run("incomplete head", func(t *testing.T) {
		c, br := ts.dial()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\nX-Slow: ")
		closedWithin(t, c, br, 100*time.Millisecond, 2*time.Second)
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c, br := ts.dial()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		readResponse(t, br, "GET")
		closedWithin(t, c, br, 300*time.Millisecond, 3*time.Second)
	})
	t.Run("busy keep-alive outlives the idle timeout", func(t *testing.T) {
		// Each request pushes the idle deadline on, so a connection used
		// every 100 ms stays open for 4 idle timeouts.
		c, br := ts.dial()
		for i := 0; i < 16; i++ {
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
			readResponse(t, br, "GET")
			time.Sleep(100 * time.Millisecond)
		}
	})
	t.Run("partial head on a kept-alive connection", func(t *testing.T) {
		// Once part of the next head came, the rest is due within
		// ReadHeaderTimeout (200 ms), not within what is left of the
		// idle timeout (here 5 s).
		ts := startServer(t, echo, func(o *Options) {
			o.ReadHeaderTimeout = 200 * time.Millisecond
			o.IdleTimeout = 5 * time.Second
		})
		c, br := ts.dial()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		readResponse(t, br, "GET")
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\nX-Slow: ")
		closedWithin(t, c, br, 100*time.Millisecond, 2500*time.Millisecond)
	})
}

func TestClientGoneCancelsContext(t *testing.T) {
	cancelled := make(chan struct{})
	started := make(chan struct{})
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(5 * time.Second):
		}
	}))
	c, _ := ts.dial()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	<-started // the handler runs; the watcher starts after watchDelay whatever happens now
	c.Close()
	select {
	case <-cancelled:
	case <-time.After(3 * time.Second):
		t.Fatal("the request's context was not cancelled after the client left")
	}
}

// watchState returns the watch state of the server's one connection
// (-1 with none or several).
func watchState(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.mu.conns) != 1 {
		return -1
	}
	for c := range s.mu.conns {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.watch
	}
	return -1
}

func TestPipelinedRequestDuringSlowHandler(t *testing.T) {
	// The watcher reads the second request while the first is served; it
	// must be kept, not taken for a client that left. The handler holds
	// the first request until the watcher's read has returned with the
	// second.
	release := make(chan struct{})
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-r.Context().Done():
				t.Error("context cancelled for a client that is still there")
			case <-release:
			}
		}
		io.WriteString(w, r.URL.Path)
	}))
	c, br := ts.dial()
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		st := watchState(ts.srv)
		return st == watchReading, fmt.Sprintf("watch state %d, want %d (reading)", st, watchReading)
	})
	io.WriteString(c, "GET /next HTTP/1.1\r\nHost: h\r\n\r\n")
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		st := watchState(ts.srv)
		return st == watchEnded, fmt.Sprintf("watch state %d, want %d (its read returned)", st, watchEnded)
	})
	close(release)
	for _, want := range []string{"/slow", "/next"} {
		if _, body := readResponse(t, br, "GET"); body != want {
			t.Fatalf("%q, want %q", body, want)
		}
	}
}

func TestShutdownDrains(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int32
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started.Add(1)
			<-release
		}
		io.WriteString(w, "done")
	}))
	idle, ibr := ts.dial()
	io.WriteString(idle, "GET /quick HTTP/1.1\r\nHost: h\r\n\r\n")
	readResponse(t, ibr, "GET") // this connection is now idle
	busy, bbr := ts.dial()
	io.WriteString(busy, "GET /slow HTTP/1.1\r\nHost: h\r\n\r\n")
	for started.Load() < 1 {
		time.Sleep(5 * time.Millisecond)
	}

	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		shut <- ts.srv.Shutdown(ctx)
	}()
	// The idle connection is closed at once, the listener refuses.
	if _, err := ibr.ReadByte(); err == nil {
		t.Fatal("idle connection not closed by Shutdown")
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	resp, body := readResponse(t, bbr, "GET")
	if body != "done" || !resp.Close {
		t.Fatalf("in-flight answer %q close %v", body, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func TestShutdownDeadlineThenClose(t *testing.T) {
	started := make(chan struct{})
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done() // only Close ends it
	}))
	c, br := ts.dial()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	select { // the request is in its handler when Shutdown begins
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not start within 10 s")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := ts.srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the deadline", err)
	}
	ts.srv.Close()
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("connection open after Close")
	}
}

func TestHandlerPanicClosesConnection(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic(http.ErrAbortHandler)
	}))
	c, br := ts.dial()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("connection still open after the handler aborted")
	}
	if n := ts.srv.Panics(); n != 0 {
		t.Errorf("Panics() = %d after an ErrAbortHandler, want 0 (a deliberate abort)", n)
	}
}

// TestHandlerPanicCounted: a handler's panic closes the connection and is
// counted in Panics (the automatic rollback's health signal).
func TestHandlerPanicCounted(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		panic("a bug")
	}))
	for i := 1; i <= 2; i++ {
		c, br := ts.dial()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		if _, err := br.ReadByte(); err == nil {
			t.Fatal("connection still open after the handler panicked")
		}
		if n := ts.srv.Panics(); n != uint64(i) {
			t.Fatalf("Panics() = %d after %d panics", n, i)
		}
	}
}

// TestHeadersSorted: the response head lists the handler's fields sorted
// by name (then the server's own Date and Content-Length, as net/http
// does), so the same response always has the same bytes.
func TestHeadersSorted(t *testing.T) {
	names := []string{"Zeta", "Alpha", "X-Request-Id", "Mid", "Beta", "Content-Type", "Retry-After", "Omega"}
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, n := range names {
			w.Header()[n] = []string{"v"}
		}
		io.WriteString(w, "ok")
	}))
	c, br := ts.dial()
	for range 3 { // map order differs between iterations; the output must not
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		var got []string
		if _, err := br.ReadString('\n'); err != nil { // status line
			t.Fatal(err)
		}
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatal(err)
			}
			if line == "\r\n" {
				break
			}
			if n := line[:strings.IndexByte(line, ':')]; slices.Contains(names, n) {
				got = append(got, n) // levee's own Date and Content-Length follow them
			}
		}
		if _, err := io.ReadFull(br, make([]byte, 2)); err != nil {
			t.Fatal(err)
		}
		if !slices.IsSorted(got) || len(got) != len(names) {
			t.Fatalf("header names %v: want all of %v, sorted", got, names)
		}
	}
}

// TestTCPConnectionsUseRawIO: a TCP client's requests are read and answered
// through rawsock (out of the scheduler's sight), and the hand-off to
// net/http still gets the original connection.
func TestTCPConnectionsUseRawIO(t *testing.T) {
	var sockType, ncType string
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok")
	}))
	c, br := ts.dial()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	if _, body := readResponse(t, br, "GET"); body != "ok" {
		t.Fatalf("body %q", body)
	}
	ts.srv.mu.Lock()
	for sc := range ts.srv.mu.conns {
		sockType, ncType = fmt.Sprintf("%T", sc.sock), fmt.Sprintf("%T", sc.nc)
	}
	ts.srv.mu.Unlock()
	if sockType != "*rawsock.Conn" || ncType != "*net.TCPConn" {
		t.Fatalf("connection I/O through %s (nc %s); want *rawsock.Conn over *net.TCPConn", sockType, ncType)
	}
}
