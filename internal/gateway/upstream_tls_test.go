package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// Upstream TLS through a real levee: real HTTPS upstreams (httptest over
// loopback) with certificates of the test's own CAs.

// tlsBackend is an HTTPS upstream whose certificate the test can replace
// (new handshakes get it) and which names the client certificate's subject
// of each request in X-Client-Subject ("none" without one).
type tlsBackend struct {
	srv  *httptest.Server
	cert atomic.Pointer[tls.Certificate]
	mu   sync.Mutex
	seen map[string]int // client subject -> requests
	// hold, when set, makes requests to /slow wait until it is closed.
	hold chan struct{}
}

// newTLSBackend starts a backend presenting cert. With clientCAs it
// requires a client certificate they verify.
func newTLSBackend(t *testing.T, cert tls.Certificate, clientCAs *x509.CertPool) *tlsBackend {
	t.Helper()
	b := &tlsBackend{seen: map[string]int{}, hold: make(chan struct{})}
	b.cert.Store(&cert)
	b.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		subject := "none"
		if len(r.TLS.PeerCertificates) > 0 {
			subject = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		b.mu.Lock()
		b.seen[subject]++
		b.mu.Unlock()
		if r.URL.Path == "/slow" {
			select {
			case <-b.hold:
			case <-time.After(10 * time.Second):
			}
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Client-Subject", subject)
		_, _ = io.WriteString(w, "tls ok")
	}))
	// Not StartTLS: it would add httptest's own certificate, which a
	// client that sends no SNI (an IP address) would get instead.
	cfg := &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return b.cert.Load(), nil }}
	if clientCAs != nil {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = clientCAs
	}
	b.srv.Listener = tls.NewListener(b.srv.Listener, cfg)
	b.srv.Config.ErrorLog = quietLog()
	b.srv.Start()
	t.Cleanup(b.srv.Close)
	return b
}

// quietLog discards the upstream server's log (the failed handshakes the
// tests cause on purpose).
func quietLog() *log.Logger { return log.New(io.Discard, "", 0) }

func (b *tlsBackend) addr() string { return b.srv.Listener.Addr().String() }

// tlsFiles writes PEM files into a directory the test keeps, and rewrites
// them atomically (rename), as an operator's rotation does.
type tlsFiles struct {
	t   *testing.T
	dir string
}

func (f tlsFiles) path(name string) string { return filepath.Join(f.dir, name) }

func (f tlsFiles) write(name string, data []byte) string {
	f.t.Helper()
	p := f.path(name)
	if err := os.WriteFile(p+".tmp", data, 0o600); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(p+".tmp", p); err != nil {
		f.t.Fatal(err)
	}
	return p
}

// tlsRefusal reads a refusal's status, reason and detail, closing the body.
func tlsRefusal(t *testing.T, resp *http.Response) (int, string, string) {
	t.Helper()
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var r struct{ Reason, Detail, Error string }
	if resp.StatusCode != 200 {
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("status %d, body %q is not JSON: %v", resp.StatusCode, body, err)
		}
	}
	return resp.StatusCode, r.Reason, r.Detail
}

func (h *harness) post(path string, _ ...string) *http.Response {
	h.t.Helper()
	resp, err := h.client.Post(h.base+path, "text/plain", strings.NewReader("a body for net/http's transport"))
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

// TestUpstreamTLSAnswers: right CA 200; wrong CA, wrong server_name and an
// expired certificate 502 upstream_tls with their details; mTLS required by
// the upstream 200 with the client certificate (its subject seen by the
// upstream), 502 handshake_failure without; on both forwarders (GET: the
// fast path; POST: net/http's). A handshake failure is retried like a
// connect failure and counts as the endpoint's failure (outlier ejection).
func TestUpstreamTLSAnswers(t *testing.T) {
	ca, other, clientCA := testkit.NewTestCA(t, "upstream CA"), testkit.NewTestCA(t, "other CA"), testkit.NewTestCA(t, "client CA")
	files := tlsFiles{t, t.TempDir()}
	caFile, otherFile := files.write("ca.pem", ca.PEM), files.write("other.pem", other.PEM)
	client := clientCA.Issue(t, testkit.CertSpec{CommonName: "levee-edge", Client: true})
	certFile, keyFile := files.write("client.pem", client.CertPEM), files.write("client.key", client.KeyPEM)
	good := newTLSBackend(t, ca.Issue(t, testkit.Localhost()).TLS, nil)
	expiredSpec := testkit.Localhost()
	expiredSpec.NotBefore, expiredSpec.NotAfter = time.Now().Add(-48*time.Hour), time.Now().Add(-time.Hour)
	expired := newTLSBackend(t, ca.Issue(t, expiredSpec).TLS, nil)
	mtls := newTLSBackend(t, ca.Issue(t, testkit.Localhost()).TLS, clientCA.Pool())

	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  good: {endpoints: [{address: %[1]s}], tls: {ca_file: %[4]s}}
  named: {endpoints: [{address: %[1]s}], tls: {ca_file: %[4]s, server_name: localhost, min_version: 1.3}}
  wrongca: {endpoints: [{address: %[1]s}], tls: {ca_file: %[5]s}}
  wrongname: {endpoints: [{address: %[1]s}], tls: {ca_file: %[4]s, server_name: api.example.com}}
  expired: {endpoints: [{address: %[2]s}], tls: {ca_file: %[4]s}}
  mtls: {endpoints: [{address: %[3]s}], tls: {ca_file: %[4]s, cert_file: %[6]s, key_file: %[7]s}}
  nomtls: {endpoints: [{address: %[3]s}], tls: {ca_file: %[4]s}}
  mixed:
    endpoints: [{address: %[2]s}, {address: %[1]s}]
    tls: {ca_file: %[4]s}
    retry: {attempts: 2, on: [connect_failure]}
    outlier_detection: {consecutive_gateway_failures: 1, max_ejection_percent: 50}
routes:
  - {name: good, match: {path_prefix: /good}, upstream: good}
  - {name: named, match: {path_prefix: /named}, upstream: named}
  - {name: wrongca, match: {path_prefix: /wrongca}, upstream: wrongca}
  - {name: wrongname, match: {path_prefix: /wrongname}, upstream: wrongname}
  - {name: expired, match: {path_prefix: /expired}, upstream: expired}
  - {name: mtls, match: {path_prefix: /mtls}, upstream: mtls}
  - {name: nomtls, match: {path_prefix: /nomtls}, upstream: nomtls}
  - {name: mixed, match: {path_prefix: /mixed}, upstream: mixed}
`, good.addr(), expired.addr(), mtls.addr(), caFile, otherFile, certFile, keyFile))

	cases := []struct {
		path, detail string
	}{
		{"/good", ""}, {"/named", ""}, {"/mtls", ""},
		{"/wrongca", "unknown_authority"}, {"/wrongname", "name_mismatch"}, {"/expired", "expired"}, {"/nomtls", "handshake_failure"},
	}
	for _, c := range cases {
		for _, send := range []func(string, ...string) *http.Response{h.get, h.post} {
			resp := send(c.path)
			subject := resp.Header.Get("X-Client-Subject")
			status, reason, detail := tlsRefusal(t, resp)
			if c.detail == "" {
				if status != 200 {
					t.Fatalf("%s %s: %d %s %s", resp.Request.Method, c.path, status, reason, detail)
				}
				if want := map[bool]string{true: "levee-edge", false: "none"}[c.path == "/mtls"]; subject != want {
					t.Errorf("%s %s: the upstream saw client subject %q, want %q", resp.Request.Method, c.path, subject, want)
				}
				continue
			}
			if status != 502 || reason != "upstream_tls" || detail != c.detail {
				t.Errorf("%s %s: %d %q %q, want 502 upstream_tls %q", resp.Request.Method, c.path, status, reason, detail, c.detail)
			}
		}
	}
	mtls.mu.Lock()
	if mtls.seen["none"] != 0 {
		t.Errorf("the mTLS upstream served %d requests without a client certificate", mtls.seen["none"])
	}
	mtls.mu.Unlock()
	if v := h.metric(`levee_refusals_total{reason="upstream_tls",route="expired"}`); v != 2 {
		t.Errorf("upstream_tls refusals on route expired: %v, want 2", v)
	}
	// mixed: the expired endpoint's handshake failure is retried on the
	// other endpoint (a connect failure: any method), and ejects it.
	for i := range 6 {
		send := h.get
		if i%2 == 1 {
			send = h.post
		}
		if status, reason, detail := tlsRefusal(t, send("/mixed")); status != 200 {
			t.Fatalf("mixed #%d: %d %s %s", i, status, reason, detail)
		}
	}
	series := fmt.Sprintf(`levee_endpoint_state{endpoint=%q,state="ejected",upstream="mixed"}`, expired.addr())
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		v, ok := h.lookupMetric(series)
		return ok && v == 1, fmt.Sprintf("%s = %v (present %v)", series, v, ok)
	})
}

// TestUpstreamTLSHealthCheck: a TLS upstream's health checks handshake with
// its TLS settings: an endpoint whose certificate does not verify is marked
// unhealthy even by a TCP check, the one that verifies stays healthy.
func TestUpstreamTLSHealthCheck(t *testing.T) {
	ca, other := testkit.NewTestCA(t, "upstream CA"), testkit.NewTestCA(t, "other CA")
	files := tlsFiles{t, t.TempDir()}
	good := newTLSBackend(t, ca.Issue(t, testkit.Localhost()).TLS, nil)
	stranger := newTLSBackend(t, other.Issue(t, testkit.Localhost()).TLS, nil)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  u:
    endpoints: [{address: %s}, {address: %s}]
    tls: {ca_file: %s}
    health_check: {tcp: true, interval: 1s, timeout: 1s, unhealthy_after: 1, healthy_after: 1}
    panic_threshold: 0
routes:
  - {name: u, match: {path_prefix: /}, upstream: u}
`, good.addr(), stranger.addr(), files.write("ca.pem", ca.PEM)))
	state := func(addr, s string) string {
		return fmt.Sprintf(`levee_endpoint_state{endpoint=%q,state=%q,upstream="u"}`, addr, s)
	}
	// A handshake gets the whole 1 s timeout (one under -race beside other
	// suites can take a few hundred ms); the stranger's fails at once.
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		v, ok := h.lookupMetric(state(stranger.addr(), "unhealthy"))
		return ok && v == 1, fmt.Sprintf("stranger unhealthy = %v (present %v)", v, ok)
	})
	if v := h.metric(state(good.addr(), "healthy")); v != 1 {
		t.Fatalf("the endpoint that verifies is not healthy (%v)", v)
	}
	for range 4 {
		if status, reason, detail := tlsRefusal(t, h.get("/")); status != 200 {
			t.Fatalf("%d %s %s", status, reason, detail)
		}
	}
}

// rotation is an upstream that requires client certificates from either of
// two client CAs, and a levee whose files the test rotates from the first
// set (server CA 1, client 1) to the second (server CA 1+2, client 2).
type rotation struct {
	h          *harness
	b          *tlsBackend
	files      tlsFiles
	ca2        *testkit.TestCA
	clientCA2  *testkit.TestCA
	caBundle   []byte
	rotations  int
	lastClient string
}

func newRotation(t *testing.T) *rotation {
	ca1, ca2 := testkit.NewTestCA(t, "server CA 1"), testkit.NewTestCA(t, "server CA 2")
	clientCA1, clientCA2 := testkit.NewTestCA(t, "client CA 1"), testkit.NewTestCA(t, "client CA 2")
	pool := clientCA1.Pool()
	pool.AddCert(clientCA2.Cert)
	r := &rotation{files: tlsFiles{t, t.TempDir()}, ca2: ca2, clientCA2: clientCA2}
	r.b = newTLSBackend(t, ca1.Issue(t, testkit.Localhost()).TLS, pool)
	r.caBundle = append(append([]byte{}, ca1.PEM...), ca2.PEM...)
	c1 := clientCA1.Issue(t, testkit.CertSpec{CommonName: "client-1", Client: true})
	r.h = start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  u:
    endpoints: [{address: %s}]
    tls: {ca_file: %s, cert_file: %s, key_file: %s}
routes:
  - {name: u, match: {path_prefix: /}, upstream: u}
`, r.b.addr(), r.files.write("ca.pem", ca1.PEM), r.files.write("client.pem", c1.CertPEM), r.files.write("client.key", c1.KeyPEM)))
	return r
}

// rotate writes the second set of files (the first time; afresh issued
// ones after) and reloads through the admin API (as SIGHUP would), then
// makes the upstream present a new certificate of CA 2. The n-th rotation's
// client is "client-<n+1>".
func (r *rotation) rotate(t *testing.T) {
	t.Helper()
	r.rotations++
	r.lastClient = fmt.Sprintf("client-%d", r.rotations+1)
	c := r.clientCA2.Issue(t, testkit.CertSpec{CommonName: r.lastClient, Client: true})
	server := r.ca2.Issue(t, testkit.Localhost()).TLS
	r.files.write("ca.pem", r.caBundle)
	r.files.write("client.key", c.KeyPEM)
	r.files.write("client.pem", c.CertPEM)
	r.reload(t)
	r.b.cert.Store(&server)
}

func (r *rotation) reload(t *testing.T) {
	t.Helper()
	resp, err := r.h.client.Post(r.h.admin+"/api/v1/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("reload: %d %s", resp.StatusCode, body)
	}
}

func (r *rotation) transport() any {
	r.h.g.mu.Lock()
	defer r.h.g.mu.Unlock()
	return r.h.g.pools.transports["u"].transport
}

// TestUpstreamTLSRotationReload: a reload that reads new CA and client
// certificate files applies them to new connections (the upstream sees the
// new client's subject, and levee verifies the upstream's new certificate)
// while a request in flight on an old connection finishes; a reload that
// reads the same contents keeps the transport and its connections.
func TestUpstreamTLSRotationReload(t *testing.T) {
	r := newRotation(t)
	for range 2 {
		resp := r.h.get("/")
		if got := resp.Header.Get("X-Client-Subject"); got != "client-1" {
			t.Fatalf("before the rotation the upstream saw %q", got)
		}
		tlsRefusal(t, resp)
	}
	before := r.transport()
	r.reload(t)
	if r.transport() != before {
		t.Fatal("a reload reading the same files built a new transport")
	}
	// A request in flight across the rotation.
	slow := make(chan *http.Response, 1)
	go func() {
		resp, err := r.h.client.Get(r.h.base + "/slow")
		if err != nil {
			t.Error(err)
		}
		slow <- resp
	}()
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		r.b.mu.Lock()
		defer r.b.mu.Unlock()
		return r.b.seen["client-1"] == 3, fmt.Sprintf("requests seen %v", r.b.seen)
	})
	r.rotate(t)
	if r.transport() == before {
		t.Fatal("a reload reading new files kept the old transport")
	}
	for _, send := range []func(string, ...string) *http.Response{r.h.get, r.h.post, r.h.get} {
		resp := send("/")
		got := resp.Header.Get("X-Client-Subject")
		if status, reason, detail := tlsRefusal(t, resp); status != 200 {
			t.Fatalf("after the rotation: %d %s %s", status, reason, detail)
		}
		if got != "client-2" {
			t.Fatalf("after the rotation a request went with client %q", got)
		}
	}
	close(r.b.hold)
	resp := <-slow
	if resp == nil {
		return
	}
	got := resp.Header.Get("X-Client-Subject")
	if status, reason, detail := tlsRefusal(t, resp); status != 200 || got != "client-1" {
		t.Fatalf("the request in flight across the reload: %d %s %s, client %q", status, reason, detail, got)
	}
}

// TestUpstreamTLSReloadRefusesBadFiles: a reload whose TLS file no longer
// parses is refused whole, naming the field, and the old files keep serving.
func TestUpstreamTLSReloadRefusesBadFiles(t *testing.T) {
	r := newRotation(t)
	r.files.write("client.key", []byte("not a key"))
	err := r.h.g.Reload()
	if err == nil || !strings.Contains(err.Error(), "upstreams.u.tls.key_file") {
		t.Fatalf("reload with a broken key_file: %v", err)
	}
	resp := r.h.get("/")
	if got := resp.Header.Get("X-Client-Subject"); got != "client-1" {
		t.Errorf("after the refused reload the upstream saw %q", got)
	}
	if status, reason, detail := tlsRefusal(t, resp); status != 200 {
		t.Fatalf("%d %s %s", status, reason, detail)
	}
}
