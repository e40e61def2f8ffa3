package h1server

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// Tests of the server over TLS (Options.TLSConfig): real TLS over loopback,
// clients writing raw bytes through tls.Dial.

// tlsServer starts a Server with TLS, its fallback serving HTTP/1.1 and
// HTTP/2 (as the gateway's does).
func tlsServer(t *testing.T, h http.Handler, tweak ...func(*Options)) *testServer {
	t.Helper()
	cert := testCertificate(t)
	return startServer(t, h, append([]func(*Options){func(o *Options) {
		p := new(http.Protocols)
		p.SetHTTP1(true)
		p.SetHTTP2(true)
		o.Fallback = &http.Server{Handler: h, Protocols: p, ReadHeaderTimeout: 2 * time.Second}
		o.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	}}, tweak...)...)
}

// testCertificate is a self-signed certificate for 127.0.0.1, made afresh
// (the clients skip verification).
func testCertificate(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// dialTLS opens a TLS connection offering the ALPN protocols protos (none:
// no ALPN), with a 10 s deadline bounding the test.
func (ts *testServer) dialTLS(protos ...string) (*tls.Conn, *bufio.Reader) {
	ts.t.Helper()
	d := &net.Dialer{Timeout: 10 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", ts.addr, &tls.Config{InsecureSkipVerify: true, NextProtos: protos})
	if err != nil {
		ts.t.Fatal(err)
	}
	ts.t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

// tlsEcho answers with what net/http over TLS would have told the handler:
// the protocol, whether r.TLS is set (and its ALPN), the path and the body.
var tlsEcho = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	alpn := "-"
	if r.TLS != nil && r.TLS.HandshakeComplete && r.TLS.NegotiatedProtocol != "" {
		alpn = r.TLS.NegotiatedProtocol
	}
	fmt.Fprintf(w, "%s tls=%v alpn=%s %s %s", r.Proto, r.TLS != nil && r.TLS.HandshakeComplete, alpn, r.URL.Path, b)
})

// expectEOF reads to the end: the server must close the connection (a
// deadline passing means it stayed open).
func expectEOF(t *testing.T, br *bufio.Reader) {
	t.Helper()
	rest, err := io.ReadAll(br)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the connection stayed open")
	}
	if len(rest) > 0 {
		t.Fatalf("after the answer: %q", rest)
	}
}

// TestTLSLoopServesKeepAlive: HTTP/1.1 over TLS is served by the loop (no
// handoff), keep-alive and pipelined, with r.TLS set on every request,
// with ALPN http/1.1 and without ALPN.
func TestTLSLoopServesKeepAlive(t *testing.T) {
	ts := tlsServer(t, tlsEcho)
	for _, alpn := range []string{"http/1.1", ""} {
		var protos []string
		want := "-"
		if alpn != "" {
			protos, want = []string{alpn}, alpn
		}
		c, br := ts.dialTLS(protos...)
		io.WriteString(c, "GET /a HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc")
		if resp, body := readResponse(t, br, "GET"); body != "HTTP/1.1 tls=true alpn="+want+" /a " || resp.Close {
			t.Fatalf("first: %q close %v", body, resp.Close)
		}
		if _, body := readResponse(t, br, "POST"); body != "HTTP/1.1 tls=true alpn="+want+" /b abc" {
			t.Fatalf("second: %q", body)
		}
		io.WriteString(c, "GET /c HTTP/1.1\r\nHost: h\r\n\r\n")
		if _, body := readResponse(t, br, "GET"); body != "HTTP/1.1 tls=true alpn="+want+" /c " {
			t.Fatalf("third: %q", body)
		}
	}
	for r, n := range ts.srv.Stats().Handoffs {
		if n != 0 {
			t.Errorf("handoffs[%s] = %d: the loop did not serve TLS itself", r, n)
		}
	}
}

// TestTLSFramingRefused: over TLS, every head the loop refuses in clear
// text is refused too (400 and the connection closed), the handler never
// called; so is an HTTP/2 preface on a connection that negotiated
// http/1.1.
func TestTLSFramingRefused(t *testing.T) {
	var called atomic.Int64
	ts := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		called.Add(1)
		io.Copy(io.Discard, r.Body)
	}))
	for _, tc := range []struct{ name, req string }{
		{"CL+TE", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"CL+TE, absolute-form", "POST http://h/ HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"TE on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"TE gzip", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\nabc"},
		{"bad Content-Length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 4\r\n\r\nabcd"},
		{"bare LF", "GET / HTTP/1.1\r\nHost: h\nX: y\r\n\r\n"},
		{"bare CR", "GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n"},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n"},
		{"NUL", "GET / HTTP/1.1\r\nHost: h\r\nX: a\x00b\r\n\r\n"},
		{"h2 preface without ALPN h2", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := ts.dialTLS("http/1.1")
			io.WriteString(c, tc.req)
			resp, body := readResponse(t, br, "GET")
			if resp.StatusCode != 400 || !resp.Close {
				t.Fatalf("%d %q close %v", resp.StatusCode, body, resp.Close)
			}
			expectEOF(t, br)
		})
	}
	if n := called.Load(); n != 0 {
		t.Fatalf("the handler was called %d times", n)
	}
}

// TestTLSHandoffs: what the loop hands to net/http over TLS still works,
// carries r.TLS, and a handed-off HTTP/1 connection closes after its one
// request (the smuggled second one reaches nothing).
func TestTLSHandoffs(t *testing.T) {
	var calls atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		tlsEcho(w, r)
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
		fmt.Fprintf(conn, "echo tls=%v %s", r.TLS != nil, line)
	})
	ts := tlsServer(t, mux)

	t.Run("chunked, then CL+TE", func(t *testing.T) {
		c, br := ts.dialTLS("http/1.1")
		io.WriteString(c, "POST /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"+
			"POST /smuggled HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
		resp, body := readResponse(t, br, "POST")
		if body != "HTTP/1.1 tls=true alpn=http/1.1 /x hi" || !resp.Close {
			t.Fatalf("%q close %v", body, resp.Close)
		}
		expectEOF(t, br)
	})
	t.Run("absolute-form", func(t *testing.T) {
		c, br := ts.dialTLS("http/1.1")
		io.WriteString(c, "GET https://h/abs HTTP/1.1\r\nHost: h\r\n\r\n")
		if _, body := readResponse(t, br, "GET"); body != "HTTP/1.1 tls=true alpn=http/1.1 /abs " {
			t.Fatalf("%q", body)
		}
	})
	t.Run("expect 100-continue", func(t *testing.T) {
		c, br := ts.dialTLS("http/1.1")
		io.WriteString(c, "PUT /e HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 100 {
			t.Fatalf("%v %v", resp, err)
		}
		io.WriteString(c, "hi")
		if _, body := readResponse(t, br, "PUT"); body != "HTTP/1.1 tls=true alpn=http/1.1 /e hi" {
			t.Fatalf("%q", body)
		}
	})
	t.Run("upgrade after a request the loop served", func(t *testing.T) {
		c, br := ts.dialTLS("http/1.1")
		io.WriteString(c, "GET /first HTTP/1.1\r\nHost: h\r\n\r\n")
		readResponse(t, br, "GET")
		io.WriteString(c, "GET /upgrade HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nping\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 101 {
			t.Fatalf("%v %v", resp, err)
		}
		if line, _ := br.ReadString('\n'); line != "echo tls=true ping\n" {
			t.Fatalf("%q", line)
		}
	})
	t.Run("h2 by ALPN", func(t *testing.T) {
		tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		for i := 0; i < 3; i++ { // three streams on one connection
			resp, err := client.Post("https://"+ts.addr+"/h2", "text/plain", strings.NewReader("yo"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.ProtoMajor != 2 || string(b) != "HTTP/2.0 tls=true alpn=h2 /h2 yo" {
				t.Fatalf("%s %q", resp.Proto, b)
			}
		}
	})
	if n := calls.Load(); n != 7 {
		t.Errorf("handler calls %d, want 7 (the smuggled request must not be one)", n)
	}
	st := ts.srv.Stats().Handoffs
	for r, want := range map[string]uint64{"transfer_encoding": 1, "other": 1, "expect": 1, "upgrade": 1, "alpn_h2": 1, "h2_preface": 0} {
		if st[r] != want {
			t.Errorf("handoffs[%s] = %d, want %d (%v)", r, st[r], want, st)
		}
	}
}

// TestTLSHandshakeBounded: a client that connects and sends nothing, or
// half a ClientHello, is cut after ReadHeaderTimeout; clear text sent to
// the TLS port gets net/http's plain 400.
func TestTLSHandshakeBounded(t *testing.T) {
	ts := tlsServer(t, tlsEcho, func(o *Options) { o.ReadHeaderTimeout = 300 * time.Millisecond })
	for _, tc := range []struct{ name, send string }{
		{"nothing", ""},
		{"half a record", "\x16\x03\x01\x02\x00\x01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := ts.dial()
			io.WriteString(c, tc.send)
			start := time.Now()
			if _, err := io.ReadAll(br); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal("the connection stayed open")
			}
			// Well before the 10 s default: the configured 300 ms applies.
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("cut after %v, want about 300ms", d)
			}
		})
	}
	t.Run("clear text", func(t *testing.T) {
		c, br := ts.dial()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		if resp.StatusCode != 400 || !strings.Contains(body, "HTTPS server") {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
	})
}

// TestTLSClientGoneCancelsContext: the client-gone watcher reads through
// TLS too.
func TestTLSClientGoneCancelsContext(t *testing.T) {
	cancelled := make(chan struct{})
	started := make(chan struct{})
	ts := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(5 * time.Second):
		}
	}))
	c, _ := ts.dialTLS("http/1.1")
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
	<-started
	c.Close()
	select {
	case <-cancelled:
	case <-time.After(3 * time.Second):
		t.Fatal("the request's context was not cancelled after the client left")
	}
}

// TestTLSSlowHandlerKeepsConnection: a handler running past the watcher's
// delay (its read through TLS is then stopped by a past deadline) leaves
// the TLS connection usable for the next request.
func TestTLSSlowHandlerKeepsConnection(t *testing.T) {
	ts := tlsServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(4 * watchDelay) // the handler's work, not a wait for a state
		}
		io.WriteString(w, r.URL.Path)
	}))
	c, br := ts.dialTLS("http/1.1")
	for _, p := range []string{"/slow", "/next", "/slow", "/last"} {
		io.WriteString(c, "GET "+p+" HTTP/1.1\r\nHost: h\r\n\r\n")
		if resp, body := readResponse(t, br, "GET"); body != p || resp.Close {
			t.Fatalf("%s: %q close %v", p, body, resp.Close)
		}
	}
	if started, _, _ := ts.srv.watches.counts(); started == 0 {
		t.Fatal("no watcher started: the test did not cover the watcher's read")
	}
}

// TestTLSShutdownAndClose: Shutdown closes idle TLS connections (and waits
// for handshakes in progress no longer than their deadline); Close cuts a
// connection in its handshake at once.
func TestTLSShutdownAndClose(t *testing.T) {
	t.Run("shutdown", func(t *testing.T) {
		ts := tlsServer(t, tlsEcho, func(o *Options) { o.ReadHeaderTimeout = 500 * time.Millisecond })
		c, br := ts.dialTLS("http/1.1")
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n")
		readResponse(t, br, "GET")
		raw, rbr := ts.dial() // in its handshake
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := ts.srv.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		expectEOF(t, br)
		raw.SetDeadline(time.Now().Add(time.Second))
		expectEOF(t, rbr)
	})
	t.Run("close", func(t *testing.T) {
		ts := tlsServer(t, tlsEcho, func(o *Options) { o.ReadHeaderTimeout = 5 * time.Second })
		_, rbr := ts.dial()
		// The connection is tracked once Accept returned; poll for it.
		testkit.Until(t, 5*time.Second, "the connection to be tracked", func() bool { return ts.srv.closeIdle() > 0 })
		start := time.Now()
		ts.srv.Close()
		expectEOF(t, rbr)
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("Close took %v to cut a handshake", d)
		}
	})
}
