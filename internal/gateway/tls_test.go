package gateway

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/h1server"
)

// The TLS listener: the same strict framing as in clear text (levee's loop
// serves HTTP/1.1 over TLS), HTTP/2 by ALPN, handoffs that keep r.TLS.
// Real levee, real TLS over loopback, raw bytes through tls.Dial, the raw
// upstream of framing_test.go recording every byte.

// startTLS starts levee with TLS (a fresh self-signed certificate) and
// framingConfig's routes to u.
func startTLS(t *testing.T, u *rawUpstream) *harness {
	t.Helper()
	certFile, keyFile, _ := selfSigned(t)
	return start(t, framingConfig(u.ln.Addr().String(), "drop")+fmt.Sprintf("tls: {cert_file: %s, key_file: %s}\n", certFile, keyFile))
}

// dialTLS opens a TLS connection to levee offering ALPN http/1.1, with a
// 10 s deadline bounding the test.
func dialTLS(t *testing.T, addr string) (*tls.Conn, *bufio.Reader) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr,
		&tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("ALPN %q, want http/1.1", p)
	}
	return c, bufio.NewReader(c)
}

// readAnswer reads one response and its body.
func readAnswer(t *testing.T, br *bufio.Reader, method string) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return resp, string(body)
}

// handoffs returns levee_h1_handoffs_total by reason.
func (h *harness) handoffs() map[string]float64 {
	out := map[string]float64{}
	for _, r := range h1server.HandoffReasons() {
		out[r] = h.metric(`levee_h1_handoffs_total{reason="` + r + `"}`)
	}
	return out
}

// TestFramingRefusedOverTLS: every smuggling shape refused in clear text
// is refused over TLS too, with the same status, and the connection
// closes; the upstream receives not one byte. (net/http, which framed TLS
// requests before, accepted most of them.) So is an HTTP/2 preface on a
// connection that negotiated http/1.1.
func TestFramingRefusedOverTLS(t *testing.T) {
	u := newRawUpstream(t, nil)
	h := startTLS(t, u)
	addr := h.g.Addr().String()
	cases := append(framingRefusals(), framingRefusal{"h2 preface without ALPN h2", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 400})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := u.count()
			c, br := dialTLS(t, addr)
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			method, _, _ := strings.Cut(tc.req, " ")
			resp, body := readAnswer(t, br, method)
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

// TestTLSKeepAlive: HTTP/1.1 over TLS keeps its connection for several
// requests (pipelined too), each forwarded once with X-Forwarded-Proto
// https, and none handed to net/http.
func TestTLSKeepAlive(t *testing.T) {
	u := newRawUpstream(t, nil)
	h := startTLS(t, u)
	before := h.handoffs()
	skip := u.count()
	c, br := dialTLS(t, h.g.Addr().String())
	io.WriteString(c, "GET /a HTTP/1.1\r\nHost: a\r\n\r\nPOST /b HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
	for _, m := range []string{"GET", "POST"} {
		if resp, body := readAnswer(t, br, m); resp.StatusCode != 200 || body != "ok" || resp.Close {
			t.Fatalf("%s: %d %q close %v", m, resp.StatusCode, body, resp.Close)
		}
	}
	io.WriteString(c, "GET /c HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, body := readAnswer(t, br, "GET"); resp.StatusCode != 200 || body != "ok" || resp.Close {
		t.Fatalf("third: %d %q close %v", resp.StatusCode, body, resp.Close)
	}
	conns := u.settle()[skip:]
	if len(conns) != 3 {
		t.Fatalf("upstream saw %d connections, want 3: %q", len(conns), conns)
	}
	for i, want := range []string{"GET /a ", "POST /b ", "GET /c "} {
		if !strings.HasPrefix(conns[i], want) || !strings.Contains(conns[i], "\r\nX-Forwarded-Proto: https\r\n") {
			t.Errorf("upstream connection %d: %q", i, conns[i])
		}
	}
	if !strings.HasSuffix(conns[1], "\r\n\r\nhello") {
		t.Errorf("POST body: %q", conns[1])
	}
	if after := h.handoffs(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("handoffs %v -> %v: the loop did not serve TLS itself", before, after)
	}
}

// TestTLSChunkedUploadForwardedOnce: a chunked upload over TLS is handed to
// net/http, forwarded once with X-Forwarded-Proto https (r.TLS survives the
// handoff), and the connection closes after it, so a smuggled CL+TE
// request behind it reaches nothing.
func TestTLSChunkedUploadForwardedOnce(t *testing.T) {
	u := newRawUpstream(t, nil)
	h := startTLS(t, u)
	before := h.metric(`levee_h1_handoffs_total{reason="transfer_encoding"}`)
	skip := u.count()
	c, br := dialTLS(t, h.g.Addr().String())
	io.WriteString(c, "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"+
		"POST /smuggled HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
	resp, body := readAnswer(t, br, "POST")
	if resp.StatusCode != 200 || body != "ok" || !resp.Close {
		t.Fatalf("%d %q close %v", resp.StatusCode, body, resp.Close)
	}
	expectClosed(t, br)
	got := u.oneRequest(t, skip)
	if got.req.URL.Path != "/up" || got.body != "hello world" || got.req.Header.Get("X-Forwarded-Proto") != "https" ||
		strings.Contains(got.raw, "smuggled") {
		t.Fatalf("upstream got %q", got.raw)
	}
	if n := h.metric(`levee_h1_handoffs_total{reason="transfer_encoding"}`) - before; n != 1 {
		t.Fatalf("transfer_encoding handoffs +%v, want +1", n)
	}
}

// TestHTTP2OverTLSStillWorks: a client negotiating h2 gets HTTP/2 through
// levee (net/http serves it, handed the TLS connection by ALPN), several
// streams on one connection, each forwarded with X-Forwarded-Proto https.
func TestHTTP2OverTLSStillWorks(t *testing.T) {
	u := newRawUpstream(t, nil)
	h := startTLS(t, u)
	skip := u.count()
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	url := "https://" + h.g.Addr().String()
	for i := 0; i < 3; i++ {
		resp, err := client.Post(fmt.Sprintf("%s/h2/%d", url, i), "text/plain", strings.NewReader("body"))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("%s %d %q", resp.Proto, resp.StatusCode, b)
		}
	}
	conns := u.settle()[skip:]
	if len(conns) != 3 {
		t.Fatalf("upstream saw %d connections, want 3", len(conns))
	}
	for i, raw := range conns {
		if !strings.HasPrefix(raw, fmt.Sprintf("POST /h2/%d ", i)) || !strings.Contains(raw, "\r\nX-Forwarded-Proto: https\r\n") {
			t.Errorf("upstream connection %d: %q", i, raw)
		}
	}
	if n := h.metric(`levee_h1_handoffs_total{reason="alpn_h2"}`); n != 1 {
		t.Errorf("alpn_h2 handoffs %v, want 1 (one connection)", n)
	}
}

// TestTLSCertificateReload: the loop's handshakes use the certificate
// loaded last, so a reload with new certificate files serves the new one
// to new connections (the gateway's GetCertificate, kept by h1server's
// clone of the TLS configuration).
func TestTLSCertificateReload(t *testing.T) {
	u := newRawUpstream(t, nil)
	certA, keyA, poolA := selfSigned(t)
	certB, keyB, poolB := selfSigned(t)
	yaml := func(cert, key string) string {
		return framingConfig(u.ln.Addr().String(), "drop") + fmt.Sprintf("tls: {cert_file: %s, key_file: %s}\n", cert, key)
	}
	h := start(t, yaml(certA, keyA))
	get := func(pool *x509.CertPool) error {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "localhost"}}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + h.g.Addr().String() + "/x")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := get(poolA); err != nil {
		t.Fatalf("certificate A before the reload: %v", err)
	}
	h.writeConfig(yaml(certB, keyB))
	if err := h.g.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := get(poolB); err != nil {
		t.Fatalf("certificate B after the reload: %v", err)
	}
	if err := get(poolA); err == nil {
		t.Fatal("certificate A still served after the reload")
	}
}

// TestTLSHandoffsForwardOnce: the other shapes the loop hands to net/http
// over TLS (absolute-form, Expect) are forwarded once, with
// X-Forwarded-Proto https (r.TLS survives the handoff), and the
// connection closes after them.
func TestTLSHandoffsForwardOnce(t *testing.T) {
	u := newRawUpstream(t, nil)
	h := startTLS(t, u)
	addr := h.g.Addr().String()
	t.Run("absolute-form", func(t *testing.T) {
		skip := u.count()
		c, br := dialTLS(t, addr)
		io.WriteString(c, "GET https://a/abs?q=1 HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, body := readAnswer(t, br, "GET"); resp.StatusCode != 200 || body != "ok" || !resp.Close {
			t.Fatalf("%d %q close %v", resp.StatusCode, body, resp.Close)
		}
		expectClosed(t, br)
		got := u.oneRequest(t, skip)
		if got.req.RequestURI != "/abs?q=1" || got.req.Header.Get("X-Forwarded-Proto") != "https" {
			t.Fatalf("upstream got %q", got.raw)
		}
	})
	t.Run("expect 100-continue", func(t *testing.T) {
		skip := u.count()
		c, br := dialTLS(t, addr)
		io.WriteString(c, "PUT /e HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
		if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 100 {
			t.Fatalf("%v %v", resp, err)
		}
		io.WriteString(c, "hello")
		if resp, body := readAnswer(t, br, "PUT"); resp.StatusCode != 200 || body != "ok" || !resp.Close {
			t.Fatalf("%d %q close %v", resp.StatusCode, body, resp.Close)
		}
		expectClosed(t, br)
		got := u.oneRequest(t, skip)
		if got.req.URL.Path != "/e" || got.body != "hello" || got.req.Header.Get("X-Forwarded-Proto") != "https" {
			t.Fatalf("upstream got %q", got.raw)
		}
	})
}

// TestTLSWebSocketEcho: an Upgrade over TLS is handed to net/http, reaches
// the upstream with X-Forwarded-Proto https, and bytes flow both ways
// through the TLS connection after the 101.
func TestTLSWebSocketEcho(t *testing.T) {
	up := newWebSocketEchoUpstream(t, "https")
	certFile, keyFile, _ := selfSigned(t)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
tls: {cert_file: %s, key_file: %s}
upstreams:
  ws: {endpoints: [{address: %s}]}
routes:
  - {name: ws, match: {path_prefix: /ws}, upstream: ws}
`, certFile, keyFile, hostPort(up)))
	c, br := dialTLS(t, h.g.Addr().String())
	wsHandshakeAndEcho(t, c, br)
}
