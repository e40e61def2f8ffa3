package upstream

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// countingServer is an httptest upstream that counts the TCP connections it
// accepted and closed.
type countingServer struct {
	*httptest.Server
	opened, closed atomic.Int64
}

func newCountingServer(t *testing.T) *countingServer {
	s := &countingServer{Server: httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "hello")
	}))}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			s.opened.Add(1)
		case http.StateClosed, http.StateHijacked:
			s.closed.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *countingServer) addr() string { return s.Listener.Addr().String() }

// get forwards a GET for path to addr through f and returns the status and
// body (read to its end and closed, so the connection goes back to the pool).
func get(t *testing.T, f Forwarder, addr, path string) (int, string) {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	resp, err := f.Forward(context.Background(), r, Outbound{Addr: addr, RequestID: "rid"})
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", path, err)
	}
	return resp.StatusCode, string(b)
}

// eventually polls cond every few milliseconds for up to 5s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testkit.Until(t, 5*time.Second, what, cond)
}

// TestPooledConnectionsDoRawIO: the fast path reuses one connection for
// sequential requests, and its reads and writes are raw system calls
// (rawsock), out of the scheduler's sight.
func TestPooledConnectionsDoRawIO(t *testing.T) {
	up := newCountingServer(t)
	tr := NewTransport(Options{Connect: time.Second, ResponseHeader: 5 * time.Second, Idle: time.Minute, MaxIdlePerEndpoint: 8})
	defer tr.Close()
	for i := range 5 {
		if code, body := get(t, tr, up.addr(), fmt.Sprintf("/n/%d", i)); code != 200 || body != "hello" {
			t.Fatalf("request %d: %d %q", i, code, body)
		}
	}
	if n := up.opened.Load(); n != 1 {
		t.Errorf("upstream accepted %d connections for 5 sequential requests, want 1", n)
	}
	e := tr.h1.endpoint(up.addr())
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.conns) != 1 {
		t.Fatalf("%d idle connections, want 1", len(e.conns))
	}
	for _, c := range e.conns {
		if got := fmt.Sprintf("%T", c.nc); got != "*rawsock.Conn" {
			t.Errorf("pooled connection does I/O through %s, want *rawsock.Conn", got)
		}
	}
}

// TestExpiredConnectionNotTaken: a pooled connection idle for Idle is
// closed when taken, never reused (aged by hand instead of waiting).
func TestExpiredConnectionNotTaken(t *testing.T) {
	up := newCountingServer(t)
	o := Options{Connect: time.Second, ResponseHeader: 5 * time.Second, Idle: 50 * time.Millisecond, MaxIdlePerEndpoint: 8}
	tr := NewTransport(o)
	defer tr.Close()
	get(t, tr, up.addr(), "/")
	e := tr.h1.endpoint(up.addr())
	e.mu.Lock()
	e.conns[0].idleSince = time.Now().Add(-o.Idle)
	e.mu.Unlock()
	if code, _ := get(t, tr, up.addr(), "/"); code != 200 {
		t.Fatalf("status %d", code)
	}
	if n := up.opened.Load(); n != 2 {
		t.Errorf("upstream accepted %d connections, want 2 (the expired one not reused)", n)
	}
	eventually(t, "the expired connection to close", func() bool { return up.closed.Load() == 1 })
}
