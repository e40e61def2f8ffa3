package upstream

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// protoServer starts a real server speaking protos (over TLS with cert
// when cert is set, else clear text) that answers with the request's
// protocol in X-Proto, and counts the connections it accepted.
func protoServer(t *testing.T, cert *tls.Certificate, protos func(*http.Protocols), hold <-chan struct{}) (string, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	p := new(http.Protocols)
	protos(p)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hold != nil && r.URL.Path == "/hold" {
				select {
				case <-hold:
				case <-time.After(10 * time.Second):
				}
			}
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("X-Proto", r.Proto)
			io.WriteString(w, "ok")
		}),
		Protocols: p,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
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
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), &conns
}

func protoTransport(t *testing.T, o Options, tlsOpts *TLSOptions) *Transport {
	t.Helper()
	if tlsOpts != nil {
		c, err := LoadClientTLS(*tlsOpts)
		if err != nil {
			t.Fatal(err)
		}
		o.TLS = c
	}
	o.Connect, o.ResponseHeader, o.Idle = 2*time.Second, 5*time.Second, time.Minute
	tr := NewTransport(o)
	t.Cleanup(tr.Close)
	return tr
}

// TestProtocols: http2 over TLS, h2c and auto (ALPN) reach real servers
// with the protocol they say, on GET (which then skips the HTTP/1.1 fast
// path) and POST; auto falls back to HTTP/1.1 with an endpoint that offers
// only it; http2 fails the handshake with such an endpoint.
func TestProtocols(t *testing.T) {
	ca := testkit.NewTestCA(t, "upstream CA")
	cert := ca.Issue(t, testkit.Localhost()).TLS
	caOpts := &TLSOptions{CAFile: writeFile(t, t.TempDir(), "ca.pem", ca.PEM)}
	h2tls, _ := protoServer(t, &cert, func(p *http.Protocols) { p.SetHTTP1(true); p.SetHTTP2(true) }, nil)
	h1tls, _ := protoServer(t, &cert, func(p *http.Protocols) { p.SetHTTP1(true) }, nil)
	h2c, _ := protoServer(t, nil, func(p *http.Protocols) { p.SetUnencryptedHTTP2(true) }, nil)
	cases := []struct {
		name  string
		proto Protocol
		tls   *TLSOptions
		addr  string
		want  string
	}{
		{"http2", ProtoHTTP2, caOpts, h2tls, "HTTP/2.0"},
		{"auto to h2", ProtoAuto, caOpts, h2tls, "HTTP/2.0"},
		{"auto to h1", ProtoAuto, caOpts, h1tls, "HTTP/1.1"},
		{"h2c", ProtoH2C, nil, h2c, "HTTP/2.0"},
		{"http1 over TLS", ProtoHTTP1, caOpts, h2tls, "HTTP/1.1"},
	}
	for _, c := range cases {
		tr := protoTransport(t, Options{Protocol: c.proto}, c.tls)
		for _, m := range bothPools {
			resp, body, err := forward(t, tr, m, c.addr)
			if err != nil {
				t.Fatalf("%s, %s: %v", c.name, m, err)
			}
			if got := resp.Header.Get("X-Proto"); got != c.want || body != "ok" {
				t.Errorf("%s, %s: the endpoint saw %q (body %q), want %q", c.name, m, got, body, c.want)
			}
		}
		if c.proto != ProtoHTTP1 && tr.IdleConns(c.addr) != 0 {
			t.Errorf("%s: a GET took the HTTP/1.1 fast path", c.name)
		}
	}
	tr := protoTransport(t, Options{Protocol: ProtoHTTP2}, caOpts)
	if _, _, err := forward(t, tr, http.MethodGet, h1tls); TLSFailure(err) != TLSHandshakeFailure {
		t.Fatalf("http2 to an HTTP/1.1-only endpoint: %v", err)
	}
}
