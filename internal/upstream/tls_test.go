package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// TLS to upstreams against real TLS servers (httptest over loopback) with
// certificates made by the test's own CAs.

// tlsUpstream starts an HTTPS server presenting cert, answering with the
// subject of the client's certificate (or "none") in X-Client-Subject.
// With clientCAs it requires a client certificate they verify.
func tlsUpstream(t *testing.T, cert tls.Certificate, clientCAs *testkit.TestCA, maxVersion uint16) *httptest.Server {
	t.Helper()
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subject := "none"
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			subject = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		w.Header().Set("X-Client-Subject", subject)
		_, _ = io.Copy(io.Discard, r.Body)
		io.WriteString(w, "secure")
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MaxVersion: maxVersion}
	if clientCAs != nil {
		s.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		s.TLS.ClientCAs = clientCAs.Pool()
	}
	s.Config.ErrorLog = nil
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func tlsTransport(t *testing.T, o TLSOptions) *Transport {
	t.Helper()
	c, err := LoadClientTLS(o)
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTransport(Options{Connect: 2 * time.Second, ResponseHeader: 5 * time.Second, Idle: time.Minute, TLS: c})
	t.Cleanup(tr.Close)
	return tr
}

// forward sends a GET (the fast path) or a POST with a body (net/http's
// transport) to addr and returns the response, its body read and closed.
func forward(t *testing.T, tr *Transport, method, addr string) (*http.Response, string, error) {
	t.Helper()
	var body io.ReadCloser
	var n int64
	if method == http.MethodPost {
		body, n = io.NopCloser(strings.NewReader("payload")), 7
	}
	r := httptest.NewRequest(method, "/x", body)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := tr.Forward(ctx, r, Outbound{Addr: addr, RequestID: "rid", Body: body, Length: n})
	if err != nil {
		return nil, "", err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b), nil
}

var bothPools = []string{http.MethodGet, http.MethodPost}

func TestTLSRightCA(t *testing.T) {
	ca := testkit.NewTestCA(t, "upstream CA")
	srv := tlsUpstream(t, ca.Issue(t, testkit.Localhost()).TLS, nil, 0)
	dir := t.TempDir()
	caFile := writeFile(t, dir, "ca.pem", ca.PEM)
	for _, name := range []string{"", "localhost"} { // the address's IP, then a name
		tr := tlsTransport(t, TLSOptions{CAFile: caFile, ServerName: name})
		for _, m := range bothPools {
			resp, body, err := forward(t, tr, m, srv.Listener.Addr().String())
			if err != nil {
				t.Fatalf("server_name %q, %s: %v", name, m, err)
			}
			if resp.StatusCode != 200 || body != "secure" {
				t.Fatalf("server_name %q, %s: %d %q", name, m, resp.StatusCode, body)
			}
		}
		// The fast path pooled its connection: a second GET reuses it.
		if n := tr.IdleConns(srv.Listener.Addr().String()); n != 1 {
			t.Fatalf("idle fast-path TLS connections: %d, want 1", n)
		}
	}
}

// TestTLSFailuresClassified: each failed handshake is a *TLSError with its
// detail, on both pools.
func TestTLSFailuresClassified(t *testing.T) {
	ca := testkit.NewTestCA(t, "upstream CA")
	other := testkit.NewTestCA(t, "someone else")
	dir := t.TempDir()
	caFile := writeFile(t, dir, "ca.pem", ca.PEM)
	good := tlsUpstream(t, ca.Issue(t, testkit.Localhost()).TLS, nil, 0)
	expiredSpec := testkit.Localhost()
	expiredSpec.NotBefore, expiredSpec.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour)
	expired := tlsUpstream(t, ca.Issue(t, expiredSpec).TLS, nil, 0)
	plain := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(plain.Close)

	cases := []struct {
		name string
		o    TLSOptions
		addr string
		want string
	}{
		{"wrong CA", TLSOptions{CAFile: writeFile(t, dir, "other.pem", other.PEM)}, good.Listener.Addr().String(), TLSUnknownAuthority},
		{"system roots", TLSOptions{}, good.Listener.Addr().String(), TLSUnknownAuthority},
		{"wrong server_name", TLSOptions{CAFile: caFile, ServerName: "api.example.com"}, good.Listener.Addr().String(), TLSNameMismatch},
		{"expired", TLSOptions{CAFile: caFile}, expired.Listener.Addr().String(), TLSExpired},
		{"clear-text endpoint", TLSOptions{CAFile: caFile}, plain.Listener.Addr().String(), TLSHandshakeFailure},
	}
	for _, c := range cases {
		tr := tlsTransport(t, c.o)
		for _, m := range bothPools {
			_, _, err := forward(t, tr, m, c.addr)
			if got := TLSFailure(err); got != c.want {
				t.Errorf("%s, %s: detail %q, want %q (err %v)", c.name, m, got, c.want, err)
			}
		}
	}
	// insecure_skip_verify accepts the stranger's certificate.
	tr := tlsTransport(t, TLSOptions{InsecureSkipVerify: true})
	if _, body, err := forward(t, tr, http.MethodGet, good.Listener.Addr().String()); err != nil || body != "secure" {
		t.Fatalf("insecure_skip_verify: %q %v", body, err)
	}
}

// TestTLSClientCertificate: an upstream that requires a client certificate
// sees the configured one's subject; without one the attempt is a
// handshake_failure, under TLS 1.3 (refused after the client's handshake,
// on the first read) and TLS 1.2 (refused in the handshake).
func TestTLSClientCertificate(t *testing.T) {
	ca := testkit.NewTestCA(t, "upstream CA")
	clientCA := testkit.NewTestCA(t, "client CA")
	dir := t.TempDir()
	caFile := writeFile(t, dir, "ca.pem", ca.PEM)
	client := clientCA.Issue(t, testkit.CertSpec{CommonName: "levee-edge-1", Client: true})
	certFile, keyFile := writeFile(t, dir, "client.pem", client.CertPEM), writeFile(t, dir, "client.key", client.KeyPEM)
	serverCert := ca.Issue(t, testkit.Localhost()).TLS
	for _, maxV := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		srv := tlsUpstream(t, serverCert, clientCA, maxV)
		addr := srv.Listener.Addr().String()
		with := tlsTransport(t, TLSOptions{CAFile: caFile, CertFile: certFile, KeyFile: keyFile})
		without := tlsTransport(t, TLSOptions{CAFile: caFile})
		for _, m := range bothPools {
			resp, _, err := forward(t, with, m, addr)
			if err != nil {
				t.Fatalf("TLS %x, %s, with a client certificate: %v", maxV, m, err)
			}
			if got := resp.Header.Get("X-Client-Subject"); got != "levee-edge-1" {
				t.Fatalf("TLS %x, %s: the upstream saw subject %q", maxV, m, got)
			}
			_, _, err = forward(t, without, m, addr)
			if got := TLSFailure(err); got != TLSHandshakeFailure {
				t.Fatalf("TLS %x, %s, without a client certificate: detail %q (err %v)", maxV, m, got, err)
			}
		}
	}
}

// TestTLSMinVersion: min_version 1.3 refuses an endpoint that speaks at
// most TLS 1.2.
func TestTLSMinVersion(t *testing.T) {
	ca := testkit.NewTestCA(t, "upstream CA")
	caFile := writeFile(t, t.TempDir(), "ca.pem", ca.PEM)
	srv := tlsUpstream(t, ca.Issue(t, testkit.Localhost()).TLS, nil, tls.VersionTLS12)
	tr := tlsTransport(t, TLSOptions{CAFile: caFile, MinVersion: tls.VersionTLS13})
	_, _, err := forward(t, tr, http.MethodGet, srv.Listener.Addr().String())
	if got := TLSFailure(err); got != TLSHandshakeFailure {
		t.Fatalf("detail %q (err %v)", got, err)
	}
	tr = tlsTransport(t, TLSOptions{CAFile: caFile, MinVersion: tls.VersionTLS12})
	if _, _, err := forward(t, tr, http.MethodGet, srv.Listener.Addr().String()); err != nil {
		t.Fatal(err)
	}
}

// TestTLSOptionsEqual: options compare equal while the files' contents do
// not change; rewriting a file with new contents makes a new transport
// necessary, and rewriting it with the same contents does not.
func TestTLSOptionsEqual(t *testing.T) {
	ca := testkit.NewTestCA(t, "one")
	dir := t.TempDir()
	caFile := writeFile(t, dir, "ca.pem", ca.PEM)
	load := func() Options {
		c, err := LoadClientTLS(TLSOptions{CAFile: caFile})
		if err != nil {
			t.Fatal(err)
		}
		return Options{Connect: time.Second, TLS: c}
	}
	a, b := load(), load()
	if !a.Equal(b) {
		t.Fatal("the same files loaded twice differ")
	}
	if a.Equal(Options{Connect: time.Second}) || (Options{Connect: time.Second}).Equal(a) {
		t.Fatal("TLS and clear text compare equal")
	}
	if !(Options{Connect: time.Second}).Equal(Options{Connect: time.Second}) {
		t.Fatal("clear-text options differ")
	}
	writeFile(t, dir, "ca.pem", bytes.Clone(ca.PEM))
	if !a.Equal(load()) {
		t.Fatal("the same contents rewritten differ")
	}
	writeFile(t, dir, "ca.pem", append(bytes.Clone(ca.PEM), testkit.NewTestCA(t, "two").PEM...))
	if a.Equal(load()) {
		t.Fatal("a rotated CA bundle compares equal")
	}
}

// TestLoadClientTLSErrors: each file problem is an error naming the field.
func TestLoadClientTLSErrors(t *testing.T) {
	dir := t.TempDir()
	junk := writeFile(t, dir, "junk.pem", []byte("not PEM"))
	ca := testkit.NewTestCA(t, "one")
	a := ca.Issue(t, testkit.CertSpec{CommonName: "a", Client: true})
	b := ca.Issue(t, testkit.CertSpec{CommonName: "b", Client: true})
	cases := []struct {
		o    TLSOptions
		want string
	}{
		{TLSOptions{CAFile: filepath.Join(dir, "missing.pem")}, "ca_file:"},
		{TLSOptions{CAFile: junk}, "ca_file: no PEM certificate"},
		{TLSOptions{CertFile: writeFile(t, dir, "a.pem", a.CertPEM), KeyFile: writeFile(t, dir, "b.key", b.KeyPEM)}, "private key does not match"},
	}
	for _, c := range cases {
		_, err := LoadClientTLS(c.o)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.o, err, c.want)
		}
	}
}

// TestTransportDialTLS: Dial (health checks) completes the handshake.
func TestTransportDialTLS(t *testing.T) {
	ca := testkit.NewTestCA(t, "upstream CA")
	srv := tlsUpstream(t, ca.Issue(t, testkit.Localhost()).TLS, nil, 0)
	tr := tlsTransport(t, TLSOptions{CAFile: writeFile(t, t.TempDir(), "ca.pem", ca.PEM)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := tr.Dial(ctx, srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*tls.Conn); !ok {
		t.Fatalf("Dial returned %T", c)
	}
	bad := tlsTransport(t, TLSOptions{})
	if _, err := bad.Dial(ctx, srv.Listener.Addr().String()); TLSFailure(err) != TLSUnknownAuthority {
		t.Fatalf("Dial with the system roots: %v", err)
	}
	var _ net.Conn = c
}

// TestTLSServerNameFromAddress: without server_name each endpoint's host is
// the name, without a fully qualified name's root dot or IPv6 brackets.
func TestTLSServerNameFromAddress(t *testing.T) {
	c, err := LoadClientTLS(TLSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]string{"video.example.com.:443": "video.example.com", "[fd00::1]:8443": "fd00::1", "10.0.0.1:443": "10.0.0.1"} {
		if got := c.config(addr).ServerName; got != want {
			t.Errorf("%s: server name %q, want %q", addr, got, want)
		}
	}
	named, err := LoadClientTLS(TLSOptions{ServerName: "api.internal"})
	if err != nil {
		t.Fatal(err)
	}
	if got := named.config("10.0.0.1:443").ServerName; got != "api.internal" {
		t.Errorf("server_name api.internal: %q", got)
	}
}

// TestTLSSessionResumption: a new connection to an endpoint resumes the
// session of an earlier one (the bounded session cache), on both pools.
func TestTLSSessionResumption(t *testing.T) {
	ca := testkit.NewTestCA(t, "upstream CA")
	var resumed atomic.Int64
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS.DidResume {
			resumed.Add(1)
		}
		_, _ = io.Copy(io.Discard, r.Body)
		io.WriteString(w, "ok")
	}))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, testkit.Localhost()).TLS}}
	s.StartTLS()
	t.Cleanup(s.Close)
	tr := tlsTransport(t, TLSOptions{CAFile: writeFile(t, t.TempDir(), "ca.pem", ca.PEM), ServerName: "localhost"})
	for i, m := range []string{http.MethodGet, http.MethodGet, http.MethodPost} {
		if _, _, err := forward(t, tr, m, s.Listener.Addr().String()); err != nil {
			t.Fatal(err)
		}
		tr.CloseIdleConnections() // the next request needs a new connection
		if want := int64(i); resumed.Load() != want {
			t.Fatalf("after request %d: %d resumed handshakes, want %d", i+1, resumed.Load(), want)
		}
	}
}

// TestTLSStaleConnectionRetried: a pooled TLS connection the endpoint closed
// while idle (close_notify, then FIN) is replaced on the fast path, as a
// clear-text one is: the request succeeds on a new connection.
func TestTLSStaleConnectionRetried(t *testing.T) {
	ca := testkit.NewTestCA(t, "upstream CA")
	var closed atomic.Int64
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	s.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, testkit.Localhost()).TLS}}
	s.Config.IdleTimeout = 50 * time.Millisecond
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed {
			closed.Add(1)
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	addr := s.Listener.Addr().String()
	tr := tlsTransport(t, TLSOptions{CAFile: writeFile(t, t.TempDir(), "ca.pem", ca.PEM)})
	if _, _, err := forward(t, tr, http.MethodGet, addr); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		return closed.Load() == 1 && tr.IdleConns(addr) == 1, "the endpoint has not closed the idle connection"
	})
	if _, body, err := forward(t, tr, http.MethodGet, addr); err != nil || body != "ok" {
		t.Fatalf("GET on a stale pooled TLS connection: %q %v", body, err)
	}
}
