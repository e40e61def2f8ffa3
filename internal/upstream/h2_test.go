package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// h2Server is a real HTTP/2 server (TLS with cert, else h2c) that echoes
// request bodies, sends a trailer, counts its connections (opened and
// closed) and the requests in its handler at once (their peak), and holds
// requests to /hold until release is closed.
type h2Server struct {
	addr         string
	conns        atomic.Int64
	closed       atomic.Int64
	active, peak atomic.Int64
	release      chan struct{}
	releaseOnce  sync.Once
}

func startH2Server(t *testing.T, cert *tls.Certificate, maxStreams int) *h2Server {
	t.Helper()
	s := &h2Server{release: make(chan struct{})}
	p := new(http.Protocols)
	if cert != nil {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	srv := &http.Server{
		Protocols: p,
		HTTP2:     &http.HTTP2Config{MaxConcurrentStreams: maxStreams},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n := s.active.Add(1)
			defer s.active.Add(-1)
			for {
				m := s.peak.Load()
				if n <= m || s.peak.CompareAndSwap(m, n) {
					break
				}
			}
			if r.URL.Path == "/hold" {
				select {
				case <-s.release:
				case <-time.After(10 * time.Second):
				}
			}
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("Trailer", "X-Sum")
			w.Header().Set("X-Proto", r.Proto)
			w.Header().Set("X-Got", r.Header.Get("X-Request-Id"))
			_, _ = w.Write([]byte("echo:"))
			_, _ = w.Write(body)
			w.Header().Set("X-Sum", "done")
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			switch st {
			case http.StateNew:
				s.conns.Add(1)
			case http.StateClosed:
				s.closed.Add(1)
			}
		},
		ReadHeaderTimeout: 5 * time.Second,
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if cert != nil {
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}}
		go srv.ServeTLS(ln, "", "")
	} else {
		go srv.Serve(ln)
	}
	t.Cleanup(func() { s.open(); srv.Close() })
	s.addr = ln.Addr().String()
	return s
}

func (s *h2Server) open() { s.releaseOnce.Do(func() { close(s.release) }) }

func h2Forward(ctx context.Context, tr *Transport, addr, path, body string) (*http.Response, string, error) {
	var rc io.ReadCloser
	if body != "" {
		rc = io.NopCloser(strings.NewReader(body))
	}
	method := http.MethodGet
	if body != "" {
		method = http.MethodPost
	}
	r := httptest.NewRequest(method, path, rc)
	resp, err := tr.Forward(ctx, r, Outbound{Addr: addr, RequestID: "rid-1", Body: rc, Length: int64(len(body))})
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b), err
}

// TestH2Forward: h2 over TLS and h2c reach real HTTP/2 servers through the
// pool: GET and POST with bodies both ways, the request id sent, the
// upstream's trailer passed through, one connection for many requests.
func TestH2Forward(t *testing.T) {
	ca := testkit.NewTestCA(t, "upstream CA")
	cert := ca.Issue(t, testkit.Localhost()).TLS
	caOpts := &TLSOptions{CAFile: writeFile(t, t.TempDir(), "ca.pem", ca.PEM)}
	tlsSrv := startH2Server(t, &cert, 0)
	clearSrv := startH2Server(t, nil, 0)
	for _, c := range []struct {
		name  string
		proto Protocol
		tls   *TLSOptions
		srv   *h2Server
	}{{"http2", ProtoHTTP2, caOpts, tlsSrv}, {"auto", ProtoAuto, caOpts, tlsSrv}, {"h2c", ProtoH2C, nil, clearSrv}} {
		tr := protoTransport(t, Options{Protocol: c.proto}, c.tls)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		big := strings.Repeat("b", 200<<10) // past the initial flow-control windows both ways
		for i, body := range []string{"", "payload", big} {
			resp, got, err := h2Forward(ctx, tr, c.srv.addr, "/x", body)
			if err != nil {
				t.Fatalf("%s, request %d: %v", c.name, i, err)
			}
			if got != "echo:"+body || resp.Header.Get("X-Proto") != "HTTP/2.0" || resp.Header.Get("X-Got") != "rid-1" {
				t.Errorf("%s, request %d: %s, %q, body of %d bytes", c.name, i, resp.Header.Get("X-Proto"), resp.Header.Get("X-Got"), len(got))
			}
			if resp.Trailer.Get("X-Sum") != "done" {
				t.Errorf("%s, request %d: trailer %v", c.name, i, resp.Trailer)
			}
		}
		cancel()
		if n := tr.h2.connCount(c.srv.addr); n != 1 {
			t.Errorf("%s: %d pooled connections, want 1", c.name, n)
		}
	}
	if n := clearSrv.conns.Load(); n != 1 {
		t.Errorf("h2c server saw %d connections, want 1", n)
	}
}

// TestH2Limits: with 2 connections per endpoint and 3 streams each, 12
// held requests put 6 in the upstream's handler (never more) and 6 in the
// wait list; a 13th is refused at once with ErrH2Saturated as a failed
// dial; when the held ones are released every one of the 12 succeeds, and
// the endpoint saw 2 connections.
func TestH2Limits(t *testing.T) {
	srv := startH2Server(t, nil, 0)
	tr := protoTransport(t, Options{Protocol: ProtoH2C, HTTP2: H2Options{MaxConnsPerEndpoint: 2, MaxConcurrentStreams: 3}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, 12)
	for range 12 {
		go func() {
			_, body, err := h2Forward(ctx, tr, srv.addr, "/hold", "")
			if err == nil && body != "echo:" {
				err = errors.New("body " + body)
			}
			errs <- err
		}()
	}
	waitFor(t, "6 requests in the handler and 6 waiting", func() bool {
		tr.h2.mu.Lock()
		defer tr.h2.mu.Unlock()
		ep := tr.h2.eps[srv.addr]
		return srv.active.Load() == 6 && ep != nil && ep.waiting == 6
	})
	_, _, err := h2Forward(ctx, tr, srv.addr, "/hold", "")
	var op *net.OpError
	if !errors.Is(err, ErrH2Saturated) || !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("13th request: %v, want ErrH2Saturated as a dial error", err)
	}
	srv.open()
	for range 12 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if p := srv.peak.Load(); p != 6 {
		t.Errorf("peak concurrent streams at the upstream %d, want 6", p)
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("the upstream saw %d connections, want 2", n)
	}
	t.Logf("12 requests, 2 connections × 3 streams: peak %d in the handler, %d connections", srv.peak.Load(), srv.conns.Load())
}

// TestH2PeerStreamLimit: an endpoint advertising 2 concurrent streams
// gets at most 2 per connection even when levee allows 100: 8 held
// requests with one connection allowed put 2 in its handler.
func TestH2PeerStreamLimit(t *testing.T) {
	srv := startH2Server(t, nil, 2)
	tr := protoTransport(t, Options{Protocol: ProtoH2C, HTTP2: H2Options{MaxConnsPerEndpoint: 1}}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	errs := make(chan error, 8)
	for range 8 {
		go func() { _, _, err := h2Forward(ctx, tr, srv.addr, "/hold", ""); errs <- err }()
	}
	waitFor(t, "2 requests in the handler and 6 waiting", func() bool {
		tr.h2.mu.Lock()
		defer tr.h2.mu.Unlock()
		ep := tr.h2.eps[srv.addr]
		return srv.active.Load() == 2 && ep != nil && len(ep.conns) == 1 && ep.waiting == 6
	})
	srv.open()
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if p, n := srv.peak.Load(), srv.conns.Load(); p != 2 || n != 1 {
		t.Errorf("peak %d streams on %d connections, want 2 on 1", p, n)
	}
}

// TestH2WaitEndsWithContext: a request waiting for a stream slot gives up
// when its context ends, as a failed dial with the context's cause.
func TestH2WaitEndsWithContext(t *testing.T) {
	srv := startH2Server(t, nil, 0)
	tr := protoTransport(t, Options{Protocol: ProtoH2C, HTTP2: H2Options{MaxConnsPerEndpoint: 1, MaxConcurrentStreams: 1}}, nil)
	held := make(chan error, 1)
	go func() { _, _, err := h2Forward(context.Background(), tr, srv.addr, "/hold", ""); held <- err }()
	waitFor(t, "one request in the handler", func() bool { return srv.active.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, _, err := h2Forward(ctx, tr, srv.addr, "/x", "")
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waiting request: %v", err)
	}
	srv.open()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
}

// TestH2HealthGet: the health check of an HTTP/2 upstream speaks HTTP/2
// (an h2c-only server does not understand HTTP/1.1), returns the status,
// and a refused connect is a dial error; an HTTP/1.1 upstream has none.
func TestH2HealthGet(t *testing.T) {
	srv := startH2Server(t, nil, 0)
	tr := protoTransport(t, Options{Protocol: ProtoH2C}, nil)
	get := tr.HealthGet()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := get(ctx, srv.addr, "/healthz?full=1"); err != nil || st != http.StatusOK {
		t.Fatalf("health GET: %d, %v", st, err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	_, err := get(ctx, dead, "/healthz")
	var op *net.OpError
	if !errors.As(err, &op) || op.Op != "dial" {
		t.Fatalf("health GET of a closed port: %v", err)
	}
	if protoTransport(t, Options{}, nil).HealthGet() != nil {
		t.Error("an HTTP/1.1 upstream has an HTTP/2 health check")
	}
}

// waitFor polls cond every 5 ms for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
