package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/testsvc"
)

// The ACME tests run levee against a real Pebble (testsvc.StartPebble):
// Pebble validates by connecting to levee's listeners (HTTP-01 on the
// redirect listener, TLS-ALPN-01 on the TLS one), the names resolved to
// 127.0.0.1 by the helper's DNS server.

// acmeNode is one levee with tls.acme, started on fixed ports (Pebble
// must know them before levee binds them).
type acmeNode struct {
	h        *harness
	httpsAdr string
	stopOnce sync.Once
}

// acmePorts picks two loopback ports free a moment ago: the redirect
// (HTTP-01) and TLS (TLS-ALPN-01) listeners'.
func acmePorts(t *testing.T) (httpPort, tlsPort int) {
	t.Helper()
	var ports [2]int
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = ln.Addr().(*net.TCPAddr).Port
		defer ln.Close()
	}
	return ports[0], ports[1]
}

// acmeYAML is levee with a redirect listener on httpPort and a TLS
// listener with tls.acme for domains on tlsPort, its state under
// stateDir; extra is added at the top level.
func acmeYAML(p *testsvc.Pebble, stateDir string, httpPort, tlsPort int, renewBefore time.Duration, extra string, domains ...string) string {
	ds := ""
	for i, d := range domains {
		if i > 0 {
			ds += ", "
		}
		ds += d
	}
	return fmt.Sprintf(`
state_dir: %s
listeners:
  - {name: http, listen: 127.0.0.1:%d, redirect_https: {}}
  - name: https
    listen: 127.0.0.1:%d
    tls:
      acme: {directory: %q, ca_file: %s, domains: [%s], renew_before: %s, email: ops@levee.test}
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  web: {endpoints: [{address: 127.0.0.1:9}]}
routes:
  - {name: web, match: {path_prefix: /}, upstream: web}
%s`, stateDir, httpPort, tlsPort, p.Directory, p.CAFile, ds, renewBefore, extra)
}

// startACMENode starts levee on yaml; Cleanup (or stop) shuts it down.
func startACMENode(t *testing.T, yaml string) *acmeNode {
	t.Helper()
	dir := t.TempDir()
	h := &harness{t: t, cfgPath: filepath.Join(dir, "levee.yaml"), logs: &lockedBuffer{}}
	h.writeConfig(yaml)
	g, err := New(Options{Load: func() (*config.Config, error) { return config.Load(h.cfgPath) }, LogOutput: h.logs})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := g.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	h.g = g
	h.admin = "http://" + g.AdminAddr().String()
	tr := &http.Transport{}
	h.client = &http.Client{Transport: adminTokenTransport{g: g, next: tr}, Timeout: 30 * time.Second}
	n := &acmeNode{h: h, httpsAdr: g.ListenerAddr("https").String()}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		n.stop()
	})
	return n
}

func (n *acmeNode) stop() {
	n.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.h.g.Shutdown(ctx); err != nil {
			n.h.t.Errorf("Shutdown: %v", err)
		}
	})
}

// leafFor handshakes with the TLS listener for name, verifying the chain
// against roots, and returns the leaf it served.
func leafFor(addr, name string, roots *x509.CertPool) (*x509.Certificate, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: name, RootCAs: roots, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// mustLeaf is leafFor with a deadline long enough for a first order
// (the handshake waits for it).
func mustLeaf(t *testing.T, addr, name string, roots *x509.CertPool, p *testsvc.Pebble) *x509.Certificate {
	t.Helper()
	var last error
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		leaf, err := leafFor(addr, name, roots)
		if err == nil {
			return leaf
		}
		last = err
		time.Sleep(100 * time.Millisecond) // a failed order is retried by the next handshake
	}
	t.Fatalf("no certificate for %s within 60s: %v\npebble log:\n%s", name, last, p.Log())
	return nil
}

// TestACMEIssuesFromPebble: levee orders a.levee.test's certificate from
// a real Pebble, validated over HTTP-01 (Pebble's TLS-ALPN-01 port is
// closed, so only HTTP-01 can pass) and, in a second run, over
// TLS-ALPN-01 (its HTTP-01 port closed); a client trusting Pebble's root
// verifies the served chain; the account key and the certificate are
// under state_dir; a restarted levee serves the stored certificate
// without a new order.
func TestACMEIssuesFromPebble(t *testing.T) {
	for _, challenge := range []string{"http-01", "tls-alpn-01"} {
		t.Run(challenge, func(t *testing.T) {
			httpPort, tlsPort := acmePorts(t)
			o := testsvc.PebbleOptions{HTTPPort: httpPort}
			if challenge == "tls-alpn-01" {
				o = testsvc.PebbleOptions{TLSPort: tlsPort}
			}
			p := testsvc.StartPebble(t, o)
			roots := p.Roots(t)
			state := t.TempDir()
			yaml := acmeYAML(p, state, httpPort, tlsPort, time.Hour, "", "a.levee.test")
			n := startACMENode(t, yaml)
			start := time.Now()
			leaf := mustLeaf(t, n.httpsAdr, "a.levee.test", roots, p)
			took := time.Since(start)
			if err := leaf.VerifyHostname("a.levee.test"); err != nil {
				t.Fatal(err)
			}
			if got := p.Issued(); got != 1 {
				t.Fatalf("pebble issued %d certificates, want 1", got)
			}
			waitFor(t, "issued counted", func() bool {
				return n.h.metricIs(`levee_acme_certificates_total{result="issued"}`, 1)
			})
			if v := n.h.metric(`levee_tls_certificate_expiry_timestamp_seconds{name="a.levee.test"}`); v != float64(leaf.NotAfter.Unix()) {
				t.Fatalf("expiry metric %v, want %d", v, leaf.NotAfter.Unix())
			}
			files := acmeFiles(t, filepath.Join(state, "acme"))
			if !files["acme_account+key"] || !files["a.levee.test"] {
				t.Fatalf("state_dir/acme holds %v, want the account key and a.levee.test", files)
			}

			// A restart serves the stored certificate: no new order.
			n.stop()
			n2 := startACMENode(t, yaml)
			again := mustLeaf(t, n2.httpsAdr, "a.levee.test", roots, p)
			if again.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
				t.Fatalf("restarted levee serves serial %s, want the stored %s", again.SerialNumber, leaf.SerialNumber)
			}
			if got := p.Issued(); got != 1 {
				t.Fatalf("pebble issued %d certificates after the restart, want still 1", got)
			}
			n2.h.noCount(`levee_acme_certificates_total{result="issued"}`)
			t.Logf("%s: issued serial %s in %v (NotAfter %s), restart served it with no new order",
				challenge, leaf.SerialNumber.Text(16), took.Round(time.Millisecond), leaf.NotAfter.UTC().Format(time.RFC3339))
		})
	}
}

// acmeFiles are the names of the files in dir.
func acmeFiles(t *testing.T, dir string) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, e := range ents {
		out[e.Name()] = true
	}
	return out
}

var _ = strconv.Itoa
