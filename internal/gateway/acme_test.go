package gateway

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
	"github.com/levee-gw/levee/internal/testsvc"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
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
	stop     func() // drains the node once (startStoppable)
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
	h, stop := startStoppable(t, yaml)
	return &acmeNode{h: h, httpsAdr: h.g.ListenerAddr("https").String(), stop: stop}
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
			// Only the challenge under test can have passed (the other's
			// port is closed); Pebble's log says which it tried.
			if triedHTTP := strings.Contains(p.Log(), "Attempting to validate w/ HTTP"); triedHTTP != (challenge == "http-01") {
				t.Fatalf("%s: pebble tried HTTP-01: %v", challenge, triedHTTP)
			}
			files := acmeFiles(t, filepath.Join(state, "acme"))
			if !files["acme_account+key"] || !files["a.levee.test"] {
				t.Fatalf("state_dir/acme holds %v, want the account key and a.levee.test", files)
			}

			// A restart serves the stored certificate: no new order.
			n.stop()
			n2 := startACMENode(t, yaml)
			// Loaded at start, before any handshake: its expiry is reported.
			waitFor(t, "the stored certificate's expiry after the restart", func() bool {
				return n2.h.metricIs(`levee_tls_certificate_expiry_timestamp_seconds{name="a.levee.test"}`, float64(leaf.NotAfter.Unix()))
			})
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

// handshakeLoop handshakes with addr for name in a loop (a fresh
// connection each time) until stop, counting the handshakes, the failed
// ones and the serials served.
type handshakeLoop struct {
	mu      sync.Mutex
	ok      int
	nfail   int
	failed  []string // the first few errors
	serials map[string]int
	stop    chan struct{}
	wg      sync.WaitGroup
}

func startHandshakeLoop(addr, name string, roots *x509.CertPool, clients int) *handshakeLoop {
	l := &handshakeLoop{serials: map[string]int{}, stop: make(chan struct{})}
	for range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				leaf, err := leafFor(addr, name, roots)
				l.mu.Lock()
				if err != nil {
					l.nfail++
					if len(l.failed) < 10 { // bounded: the first few, for the message
						l.failed = append(l.failed, err.Error())
					}
				} else {
					l.ok++
					l.serials[leaf.SerialNumber.Text(16)]++
				}
				l.mu.Unlock()
				select {
				case <-l.stop:
					return
				case <-time.After(20 * time.Millisecond): // pacing, not a wait for a state
				}
			}
		}()
	}
	return l
}

func (l *handshakeLoop) end() (ok, nfail int, failed []string, serials int) {
	close(l.stop)
	l.wg.Wait()
	return l.ok, l.nfail, l.failed, len(l.serials)
}

// TestACMERenewsAndKeepsOldOnFailure: certificates valid 24s with
// renew_before 20s (renewed 4 to 6 s after issue, overdue 11 s after:
// 5 s or more for an order): levee renews (a new serial from Pebble)
// while clients loop handshakes, none failing during the swap; then
// Pebble stops, the renewal cannot happen, the last certificate keeps
// serving and levee_acme_errors_total{reason="renewal_overdue"} counts
// it.
func TestACMERenewsAndKeepsOldOnFailure(t *testing.T) {
	httpPort, tlsPort := acmePorts(t)
	p := testsvc.StartPebble(t, testsvc.PebbleOptions{TLSPort: tlsPort, Validity: 24 * time.Second})
	roots := p.Roots(t)
	n := startACMENode(t, acmeYAML(p, t.TempDir(), httpPort, tlsPort, 20*time.Second, "", "a.levee.test"))
	first := mustLeaf(t, n.httpsAdr, "a.levee.test", roots, p)
	loop := startHandshakeLoop(n.httpsAdr, "a.levee.test", roots, 2)
	var renewed *x509.Certificate
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		leaf, err := leafFor(n.httpsAdr, "a.levee.test", roots)
		if err != nil {
			return false, err.Error()
		}
		renewed = leaf
		return leaf.SerialNumber.Cmp(first.SerialNumber) != 0, "still serial " + leaf.SerialNumber.Text(16)
	})
	waitFor(t, "renewal counted", func() bool {
		v, ok := n.h.lookupMetric(`levee_acme_certificates_total{result="renewed"}`)
		return ok && v >= 1
	})
	ok, nfail, failed, serials := loop.end()
	if nfail > 0 {
		t.Fatalf("%d handshakes failed during the renewal: %v", nfail, failed)
	}
	if ok < 20 || serials < 2 {
		t.Fatalf("the loop made %d handshakes seeing %d serials; want >= 20 and both certificates", ok, serials)
	}
	n.h.noCount(`levee_acme_errors_total{name="a.levee.test",reason="renewal_overdue"}`)
	issuedBefore := p.Issued()

	// A failed renewal: Pebble stops. The certificate served now is the
	// last one levee will have until Pebble is back.
	p.Stop()
	last := mustLeaf(t, n.httpsAdr, "a.levee.test", roots, p)
	testkit.Eventually(t, 30*time.Second, func() (bool, string) {
		v, ok := n.h.lookupMetric(`levee_acme_errors_total{name="a.levee.test",reason="renewal_overdue"}`)
		return ok && v == 1, fmt.Sprintf("renewal_overdue %v", v)
	})
	still, err := leafFor(n.httpsAdr, "a.levee.test", roots)
	if err != nil {
		t.Fatalf("after the failed renewal: %v", err)
	}
	if still.SerialNumber.Cmp(last.SerialNumber) != 0 {
		t.Fatalf("serves serial %s, want the old %s kept", still.SerialNumber.Text(16), last.SerialNumber.Text(16))
	}
	if !time.Now().Before(still.NotAfter) {
		t.Fatalf("the kept certificate expired at %s before the overdue count", still.NotAfter)
	}
	n.h.noCount(`levee_acme_errors_total{name="a.levee.test",reason="order_failed"}`)
	t.Logf("renewal: serial %s → %s (first renewal), %d handshakes by 2 looping clients, 0 failed, %d serials seen; %d certificates issued by pebble before it stopped; renewal_overdue counted with serial %s (NotAfter %s) still serving",
		first.SerialNumber.Text(16), renewed.SerialNumber.Text(16), ok, serials, issuedBefore,
		still.SerialNumber.Text(16), still.NotAfter.UTC().Format(time.RFC3339))
}

// TestACMEClusterSharesCertificate: two levee nodes on one real etcd
// (cluster.etcd) and one Pebble; clients ask both nodes for the name at
// once: exactly one order reaches Pebble (the cluster lock), both nodes
// serve that certificate, and it and the account key are in etcd. The
// TLS-ALPN-01 challenge goes to node 1's port whichever node ordered:
// the token is shared through etcd, so node 1 answers node 2's. With
// etcd killed, node 2 restarted serves the certificate from its state_dir
// copy without an order.
func TestACMEClusterSharesCertificate(t *testing.T) {
	e := testsvc.StartEtcd(t)
	http1, tls1 := acmePorts(t)
	http2, tls2 := acmePorts(t)
	p := testsvc.StartPebble(t, testsvc.PebbleOptions{TLSPort: tls1})
	roots := p.Roots(t)
	cluster := func(node string) string {
		return fmt.Sprintf("cluster:\n  node_id: %s\n  etcd: {endpoints: [%s], prefix: /acme-test/, lease_ttl: 2s, dial_timeout: 500ms, op_timeout: 2s}\n", node, e.Endpoint)
	}
	n1 := startACMENode(t, acmeYAML(p, t.TempDir(), http1, tls1, time.Hour, cluster("node-1"), "a.levee.test"))
	state2 := t.TempDir()
	yaml2 := acmeYAML(p, state2, http2, tls2, time.Hour, cluster("node-2"), "a.levee.test")
	n2 := startACMENode(t, yaml2)
	leaves := make([]*x509.Certificate, 2)
	var wg sync.WaitGroup
	for i, addr := range []string{n1.httpsAdr, n2.httpsAdr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last error
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) {
				if leaves[i], last = leafFor(addr, "a.levee.test", roots); last == nil {
					return
				}
				time.Sleep(100 * time.Millisecond) // a failed order is retried by the next handshake
			}
			t.Errorf("node %d: no certificate within 60s: %v", i+1, last)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.Fatalf("pebble log:\n%s", p.Log())
	}
	if leaves[0].SerialNumber.Cmp(leaves[1].SerialNumber) != 0 {
		t.Fatalf("node 1 serves serial %s, node 2 %s: want one shared certificate", leaves[0].SerialNumber.Text(16), leaves[1].SerialNumber.Text(16))
	}
	if got := p.Issued(); got != 1 {
		t.Fatalf("pebble issued %d certificates for the cluster, want 1", got)
	}
	issued := 0.0
	for _, n := range []*acmeNode{n1, n2} {
		v, _ := n.h.lookupMetric(`levee_acme_certificates_total{result="issued"}`)
		issued += v
	}
	if issued != 1 {
		t.Fatalf("the nodes counted %v issued certificates, want 1 between them", issued)
	}
	keys := etcdKeys(t, e.Endpoint, "/acme-test/acme/")
	if !keys["/acme-test/acme/a.levee.test"] || !keys["/acme-test/acme/acme_account+key"] {
		t.Fatalf("etcd holds %v, want the certificate and the account key", keys)
	}

	// etcd away: node 2 restarted serves its state_dir copy, no order.
	n1.stop() // before etcd goes: a node's shutdown waits on a dead etcd
	e.Kill()
	n2.stop()
	n2 = startACMENode(t, yaml2)
	again := mustLeaf(t, n2.httpsAdr, "a.levee.test", roots, p)
	e.Restart(t)
	n2.stop()
	if again.SerialNumber.Cmp(leaves[0].SerialNumber) != 0 || p.Issued() != 1 {
		t.Fatalf("node 2 restarted with etcd away serves serial %s (pebble issued %d), want the shared %s and no order",
			again.SerialNumber.Text(16), p.Issued(), leaves[0].SerialNumber.Text(16))
	}
	t.Logf("cluster: both nodes serve serial %s after concurrent first handshakes; 1 order at pebble; etcd keys %d; node 2 restarted with etcd killed serves it from state_dir",
		leaves[0].SerialNumber.Text(16), len(keys))
}

// etcdKeys are the keys under prefix in the etcd at endpoint.
func etcdKeys(t *testing.T, endpoint, prefix string) map[string]bool {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = true
	}
	return out
}
