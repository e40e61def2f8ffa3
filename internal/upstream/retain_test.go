package upstream

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestRetainEndpointsH2: real h2c servers A and B, one pooled connection
// each. RetainEndpoints keeping A closes B's idle connection at once (B
// sees it closed; before, it stayed until the idle timeout, a minute here)
// and leaves A's. Then A leaves too while a request is in flight on its
// connection: the connection stays until that request ends (it succeeds),
// then closes; a later request to B dials a new connection.
func TestRetainEndpointsH2(t *testing.T) {
	a, b := startH2Server(t, nil, 0), startH2Server(t, nil, 0)
	tr := protoTransport(t, Options{Protocol: ProtoH2C}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range []*h2Server{a, b} {
		if _, got, err := h2Forward(ctx, tr, s.addr, "/x", ""); err != nil || got != "echo:" {
			t.Fatalf("GET %s: %q %v", s.addr, got, err)
		}
	}
	if tr.h2.connCount(a.addr) != 1 || tr.h2.connCount(b.addr) != 1 {
		t.Fatalf("pooled connections A %d, B %d, want 1 each", tr.h2.connCount(a.addr), tr.h2.connCount(b.addr))
	}
	tr.RetainEndpoints(func(addr string) bool { return addr == a.addr })
	waitFor(t, "B's idle connection closed", func() bool { return b.closed.Load() == 1 })
	if n := tr.h2.connCount(b.addr); n != 0 {
		t.Errorf("B: %d pooled connections after it left, want 0", n)
	}
	if n := tr.h2.connCount(a.addr); n != 1 || a.closed.Load() != 0 {
		t.Errorf("A (kept): %d pooled connections, %d closed, want 1 and 0", n, a.closed.Load())
	}

	held := make(chan error, 1)
	go func() {
		_, got, err := h2Forward(ctx, tr, a.addr, "/hold", "")
		if err == nil && got != "echo:" {
			err = fmt.Errorf("answer %q", got)
		}
		held <- err
	}()
	waitFor(t, "the held request in A's handler", func() bool { return a.active.Load() == 1 })
	tr.RetainEndpoints(func(string) bool { return false })
	a.open()
	if err := <-held; err != nil { // a connection closed under it would fail it
		t.Fatalf("the request in flight when A left: %v", err)
	}
	waitFor(t, "A's connection closed after its last stream", func() bool { return a.closed.Load() == 1 })
	if n := tr.h2.connCount(a.addr); n != 0 {
		t.Errorf("A: %d pooled connections after it left, want 0", n)
	}
	if a.conns.Load() != 1 {
		t.Errorf("A saw %d connections, want 1", a.conns.Load())
	}

	if _, got, err := h2Forward(ctx, tr, b.addr, "/x", ""); err != nil || got != "echo:" {
		t.Fatalf("GET B again: %q %v", got, err)
	}
	if n := b.conns.Load(); n != 2 {
		t.Errorf("B saw %d connections, want 2 (a new one after it left)", n)
	}
}

// TestRetainEndpointsH1: the fast path's idle connection to an endpoint
// that left is closed at once (the server sees it closed) and one to a
// kept endpoint stays pooled.
func TestRetainEndpointsH1(t *testing.T) {
	a, b := newCountingServer(t), newCountingServer(t)
	tr := NewTransport(Options{Connect: time.Second, ResponseHeader: 5 * time.Second, Idle: time.Minute, MaxIdlePerEndpoint: 8})
	defer tr.Close()
	for _, s := range []*countingServer{a, b} {
		if code, body := get(t, tr, s.addr(), "/x"); code != 200 || body != "hello" {
			t.Fatalf("GET %s: %d %q", s.addr(), code, body)
		}
	}
	if tr.IdleConns(a.addr()) != 1 || tr.IdleConns(b.addr()) != 1 {
		t.Fatalf("idle connections A %d, B %d, want 1 each", tr.IdleConns(a.addr()), tr.IdleConns(b.addr()))
	}
	tr.RetainEndpoints(func(addr string) bool { return addr == a.addr() })
	eventually(t, "B's idle connection closed", func() bool { return b.closed.Load() == 1 })
	if n := tr.IdleConns(b.addr()); n != 0 {
		t.Errorf("B: %d idle connections after it left, want 0", n)
	}
	if n := tr.IdleConns(a.addr()); n != 1 || a.closed.Load() != 0 {
		t.Errorf("A (kept): %d idle connections, %d closed, want 1 and 0", n, a.closed.Load())
	}
}
