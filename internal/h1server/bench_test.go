package h1server

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"
)

// loopConn is an in-memory client connection that sends the same request
// again each time a response was written (a closed loop), n times, then
// EOF. It measures a server's own per-request cost without the kernel's.
type loopConn struct {
	req    []byte
	turn   chan struct{} // a response was written: the next request may go
	done   chan struct{} // the last response was written
	closed chan struct{}
	once   sync.Once
	// abort makes a pending Read fail, as a past read deadline does.
	abort chan struct{}

	mu      sync.Mutex
	toSend  int
	pending []byte
	answers int
	want    int
}

func newLoopConn(req string, n int) *loopConn {
	c := &loopConn{req: []byte(req), turn: make(chan struct{}, 1), done: make(chan struct{}),
		closed: make(chan struct{}), abort: make(chan struct{}, 1), toSend: n, want: n}
	c.turn <- struct{}{}
	return c
}

func (c *loopConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		select {
		case <-c.turn:
		case <-c.abort:
			return 0, os.ErrDeadlineExceeded
		case <-c.closed:
			return 0, io.EOF
		}
		c.mu.Lock()
		if c.toSend == 0 {
			c.mu.Unlock()
			<-c.closed
			return 0, io.EOF
		}
		c.toSend--
		c.pending = c.req
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	c.mu.Unlock()
	return n, nil
}

// Write takes each write as one whole response (both servers flush a
// small response in one write).
func (c *loopConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.answers++
	last := c.answers == c.want
	c.mu.Unlock()
	if last {
		close(c.done)
	}
	select {
	case c.turn <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (c *loopConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return nil
}

func (c *loopConn) LocalAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 80} }
func (c *loopConn) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 12345}
}
func (c *loopConn) SetDeadline(t time.Time) error      { return c.SetReadDeadline(t) }
func (c *loopConn) SetWriteDeadline(t time.Time) error { return nil }

// SetReadDeadline supports what the servers use: a past deadline aborts
// the pending read; any other clears the abort. (Deadlines do not expire.)
func (c *loopConn) SetReadDeadline(t time.Time) error {
	if !t.IsZero() && !t.After(time.Now()) {
		select {
		case c.abort <- struct{}{}:
		default:
		}
		return nil
	}
	select {
	case <-c.abort:
	default:
	}
	return nil
}

// oneConnListener accepts one connection, then waits to be closed.
type oneConnListener struct {
	c      net.Conn
	once   sync.Once
	closed chan struct{}
	close  sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.c })
	if c != nil {
		return c, nil
	}
	<-l.closed
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.close.Do(func() { close(l.closed) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.c.LocalAddr() }

// refusalLike answers as levee's refusals do: a few headers set by map
// assignment, a Content-Length, a small JSON body.
var refusalLike = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h["X-Request-Id"] = []string{"0123456789abcdef"}
	h["Content-Type"] = []string{"application/json"}
	h["Retry-After"] = []string{"1"}
	h["Content-Length"] = []string{"87"}
	w.WriteHeader(http.StatusServiceUnavailable)
	w.Write([]byte(`{"error":"the upstream is at its concurrency limit; retry later","reason":"concurrency_limit"}`)[:87])
})

const benchRequest = "GET /api/v1/items?page=2 HTTP/1.1\r\nHost: bench.example.com\r\nUser-Agent: loadgen/1.0\r\nAccept: */*\r\nAccept-Encoding: gzip\r\n\r\n"

// BenchmarkServe is the per-request cost of the server alone (no kernel):
// levee's loop against net/http's server, same handler, same request.
func BenchmarkServe(b *testing.B) {
	run := func(b *testing.B, serve func(ln net.Listener) (stop func())) {
		b.ReportAllocs()
		c := newLoopConn(benchRequest, b.N)
		ln := &oneConnListener{c: c, closed: make(chan struct{})}
		b.ResetTimer()
		stop := serve(ln)
		<-c.done
		b.StopTimer()
		c.Close()
		stop()
	}
	b.Run("h1server", func(b *testing.B) {
		run(b, func(ln net.Listener) func() {
			srv, err := New(Options{Handler: refusalLike, Fallback: &http.Server{Handler: refusalLike},
				ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute})
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() { srv.Serve(ln); close(done) }()
			return func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				srv.Shutdown(ctx)
				<-done
			}
		})
	})
	b.Run("net-http", func(b *testing.B) {
		run(b, func(ln net.Listener) func() {
			srv := &http.Server{Handler: refusalLike, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
			done := make(chan struct{})
			go func() { srv.Serve(ln); close(done) }()
			return func() {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				srv.Shutdown(ctx)
				<-done
			}
		})
	})
}

// BenchmarkParseHead is the head parser alone, with the header map and URL
// built as for the handler.
func BenchmarkParseHead(b *testing.B) {
	b.ReportAllocs()
	raw := []byte(benchRequest)
	var h head
	for b.Loop() {
		if h.parse(raw) != verdictServe {
			b.Fatal("not served")
		}
		s := string(raw)
		_ = h.header(s)
		if _, err := parseURL(s[h.t0:h.t1]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRequestContext is a request context's own cost, made fresh per
// request as the loop makes it: the upstream fast path's abort hook
// (context.AfterFunc on a context.WithCancel context, as before the
// loop had reqCtx, against reqCtx's DoneHook), and a context derived
// from it (as net/http's Transport derives one per request).
func BenchmarkRequestContext(b *testing.B) {
	f := func() {}
	b.Run("withcancel+afterfunc", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithCancel(context.Background())
			stop := context.AfterFunc(ctx, f)
			stop()
			cancel()
		}
	})
	b.Run("reqctx+donehook", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := &reqCtx{}
			c.DoneHook(f)
			c.StopDoneHook()
			c.cancel()
		}
	})
	b.Run("withcancel+derived", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithCancel(context.Background())
			_, cancel2 := context.WithCancel(ctx)
			cancel2()
			cancel()
		}
	})
	b.Run("reqctx+derived", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c := &reqCtx{}
			_, cancel2 := context.WithCancel(c)
			cancel2()
			c.cancel()
		}
	})
}
