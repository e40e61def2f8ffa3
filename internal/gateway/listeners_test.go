package gateway

import (
	"bufio"
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestListenersTLSAndRedirect: two listeners from `listeners`, over real
// sockets: a clear-text one that only redirects to HTTPS (308 with the
// host validated) and a TLS one serving the routes; each holds its own
// max_connections (a full one does not stop the other); a reload loads the
// TLS listener's rotated certificate and keeps both serving.
func TestListenersTLSAndRedirect(t *testing.T) {
	be, hits := backend(t, "web")
	ca := newTestCA(t, "listeners CA")
	first := ca.issue("app", pkix.Name{CommonName: "app.test"}, []string{"app.test"}, time.Now().Add(48*time.Hour), false)
	h := start(t, fmt.Sprintf(`
listeners:
  - {name: http, listen: 127.0.0.1:0, redirect_https: {port: 8443}, max_connections: 1}
  - name: https
    listen: 127.0.0.1:0
    max_connections: 2
    tls: {cert_file: %s, key_file: %s}
admin: {listen: 127.0.0.1:0}
upstreams:
  web: {endpoints: [{address: %s}]}
routes:
  - {name: web, match: {path_prefix: /}, upstream: web}
`, first.certFile, first.keyFile, hostPort(be)))
	httpAddr, httpsAddr := h.g.ListenerAddr("http").String(), h.g.ListenerAddr("https").String()
	if h.g.Addr().String() != httpsAddr {
		t.Fatalf("primary listener %s, want the serving one %s", h.g.Addr(), httpsAddr)
	}
	client := func() *http.Client {
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool, ServerName: "app.test"}, DisableKeepAlives: true}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}()
	getTLS := func() *x509Leaf {
		t.Helper()
		resp, err := client.Get("https://" + httpsAddr + "/x")
		if err != nil {
			t.Fatalf("GET over TLS: %v", err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "web" {
			t.Fatalf("GET over TLS: %d %q", resp.StatusCode, body)
		}
		return &x509Leaf{notAfter: resp.TLS.PeerCertificates[0].NotAfter}
	}
	if got := getTLS(); !got.notAfter.Equal(first.leaf.NotAfter) {
		t.Fatalf("served certificate expires %v, want %v", got.notAfter, first.leaf.NotAfter)
	}

	// The redirecting listener: raw requests, the answer read as bytes.
	// With max_connections 1, the connection before may still be closing
	// on levee's side: a 503 connection_limit is retried until it is gone.
	raw := func(req string) (status int, hdr http.Header) {
		t.Helper()
		waitFor(t, "an answer other than connection_limit to "+req, func() bool {
			status, hdr = rawRequest(t, httpAddr, req)
			return status != http.StatusServiceUnavailable
		})
		return status, hdr
	}
	redirects := []struct{ req, location string }{
		{"GET /a/b?x=1&y=%20 HTTP/1.1\r\nHost: App.Test:8080\r\n\r\n", "https://app.test:8443/a/b?x=1&y=%20"},
		{"POST /form HTTP/1.1\r\nHost: app.test\r\nContent-Length: 0\r\n\r\n", "https://app.test:8443/form"},
		{"GET / HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", "https://[::1]:8443/"},
		{"GET http://app.test/abs?q HTTP/1.1\r\nHost: app.test\r\n\r\n", "https://app.test:8443/abs?q"},
	}
	for _, rc := range redirects {
		status, hdr := raw(rc.req)
		if status != http.StatusPermanentRedirect || hdr.Get("Location") != rc.location {
			t.Errorf("%q: %d Location %q, want 308 %q", rc.req, status, hdr.Get("Location"), rc.location)
		}
	}
	for _, bad := range []string{
		"GET / HTTP/1.1\r\nHost: evil.test@x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: -bad-.test\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: a..b\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: app.test:99999\r\n\r\n",
		"GET / HTTP/1.0\r\n\r\n",
	} {
		if status, hdr := raw(bad); status != http.StatusBadRequest || hdr.Get("Location") != "" {
			t.Errorf("%q: %d Location %q, want 400 and no Location", bad, status, hdr.Get("Location"))
		}
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("backend served %d requests, want 1 (redirects never reach it)", n)
	}

	// Each listener's own cap: one idle connection fills the redirecting
	// listener; the TLS one still serves; two fill the TLS one.
	hold := func(addr string) net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	refusedKey := `levee_refusals_total{reason="connection_limit",route=""}`
	hold(httpAddr)
	waitFor(t, "the http listener's one connection open", func() bool {
		status, _ := rawStatus(t, httpAddr)
		return status == http.StatusServiceUnavailable
	})
	getTLS() // not held back by the other listener's cap
	hold(httpsAddr)
	hold(httpsAddr)
	waitFor(t, "the https listener full", func() bool {
		status, _ := rawStatus(t, httpsAddr)
		return status == http.StatusServiceUnavailable
	})
	if v, ok := h.lookupMetric(refusedKey); !ok || v < 2 {
		t.Fatalf("%s = %v, want at least 2", refusedKey, v)
	}

	// A reload with the certificate rotated (same files): both keep
	// serving, the TLS one with the new certificate.
	second := ca.issue("app", pkix.Name{CommonName: "app.test"}, []string{"app.test"}, time.Now().Add(96*time.Hour), false)
	if err := h.g.Reload(); err != nil {
		t.Fatalf("Reload: %v", err)
	}
	if h.g.ListenerAddr("http").String() != httpAddr || h.g.ListenerAddr("https").String() != httpsAddr {
		t.Fatal("a reload moved a listener")
	}
	if v := h.metric(`levee_tls_certificate_expiry_timestamp_seconds{name="app.test"}`); v != float64(second.leaf.NotAfter.Unix()) {
		t.Fatalf("expiry metric %v, want %d", v, second.leaf.NotAfter.Unix())
	}
	t.Logf("listeners: http %s (redirect, cap 1), https %s (TLS, cap 2); %d redirects, 5 bad hosts refused; certificate rotated on reload to NotAfter %s",
		httpAddr, httpsAddr, len(redirects), second.leaf.NotAfter.UTC().Format(time.RFC3339))
}

// TestListenersReloadRefusesChange: adding a listener needs a restart; the
// reload is refused naming listeners, and both old listeners keep serving.
func TestListenersReloadRefusesChange(t *testing.T) {
	be, _ := backend(t, "web")
	tmpl := `
listeners:
  - {name: a, listen: 127.0.0.1:0}
  - {name: b, listen: 127.0.0.1:0, redirect_https: {}}%s
admin: {listen: 127.0.0.1:0}
upstreams:
  web: {endpoints: [{address: %s}]}
routes:
  - {name: web, match: {path_prefix: /}, upstream: web}
`
	h := start(t, fmt.Sprintf(tmpl, "", hostPort(be)))
	h.writeConfig(fmt.Sprintf(tmpl, "\n  - {name: c, listen: 127.0.0.1:0}", hostPort(be)))
	err := h.g.Reload()
	if err == nil || !strings.Contains(err.Error(), "listeners") {
		t.Fatalf("Reload: %v, want a refusal naming listeners", err)
	}
	resp := h.get("/")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("after the refused reload: %d", resp.StatusCode)
	}
	if status, hdr := rawStatus(t, h.g.ListenerAddr("b").String()); status != http.StatusPermanentRedirect || !strings.HasPrefix(hdr.Get("Location"), "https://x.test/") {
		t.Fatalf("redirect listener after the refused reload: %d %q", status, hdr.Get("Location"))
	}
}

// x509Leaf is what getTLS reads of the served certificate.
type x509Leaf struct{ notAfter time.Time }

// rawStatus sends one GET (Host x.test) on a new connection to addr and
// returns the answer's status and header (0 when the connection gave
// none: closed, or a TLS listener's handshake not begun).
func rawStatus(t *testing.T, addr string) (int, http.Header) {
	t.Helper()
	return rawRequest(t, addr, "GET /p HTTP/1.1\r\nHost: x.test\r\n\r\n")
}

// rawRequest sends req as bytes on a new connection to addr and reads
// one answer (0 when none came).
func rawRequest(t *testing.T, addr, req string) (int, http.Header) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		return 0, nil
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, nil
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// FuzzRedirectHost: whatever a client sends as Host, an accepted one is a
// lower-case DNS name or a bracketed IPv6 address, never anything that
// could end the URL's authority (/, ?, #, @, \) or split the header.
func FuzzRedirectHost(f *testing.F) {
	for _, s := range []string{"app.test", "App.Test:8080", "[::1]:80", "[fe80::1%eth0]", "a..b", "evil.test@x", "x/y", "", "1.2.3.4:0", "a.b.", "-a.b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		got, ok := redirectHost(h)
		if !ok {
			return
		}
		if got == "" || len(got) > 253+2 || strings.ContainsAny(got, "/?#@\\ \r\n\t%") {
			t.Fatalf("redirectHost(%q) = %q", h, got)
		}
		if got != strings.ToLower(got) {
			t.Fatalf("redirectHost(%q) = %q, not lower-case", h, got)
		}
	})
}
