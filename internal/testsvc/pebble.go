package testsvc

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// PebbleVersion is the Pebble (Let's Encrypt's test ACME server) that
// scripts/install-services.sh builds from tools/pebble (its own module,
// so levee's go.mod does not grow) into PebblePath.
const PebbleVersion = "v2.10.3"

// PebblePath is where scripts/install-services.sh puts the pebble binary:
// $LEVEE_TOOLS_CACHE, or ~/.cache/levee-tools, then
// pebble-<PebbleVersion>/pebble.
func PebblePath() string {
	dir := os.Getenv("LEVEE_TOOLS_CACHE")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "levee-tools")
	}
	return filepath.Join(dir, "pebble-"+PebbleVersion, "pebble")
}

// PebbleOptions configure StartPebble.
type PebbleOptions struct {
	// HTTPPort and TLSPort are where Pebble's validation authority
	// connects for HTTP-01 and TLS-ALPN-01 (the name resolved to
	// 127.0.0.1 by the helper's DNS server): the ports of the ACME
	// client's listeners. 0 points that challenge at a closed port, so it
	// fails.
	HTTPPort, TLSPort int
	// Validity is the certificates' validity (whole seconds; 0 is
	// Pebble's default of 90 days).
	Validity time.Duration
}

// Pebble is a running Pebble ACME server on loopback ports with a
// directory TLS certificate of its own test CA, every name resolved to
// 127.0.0.1 by a DNS server (miekg/dns, TCP as Pebble asks) the helper
// runs. Validation is real (no PEBBLE_VA_ALWAYS_VALID): Pebble connects
// to the client's listeners. Authorizations are never reused
// (PEBBLE_AUTHZREUSE=0), so every order, renewals included, is
// validated again.
type Pebble struct {
	// Directory is the ACME directory URL, https://127.0.0.1:PORT/dir;
	// CAFile the PEM of the CA its TLS certificate (and the management
	// interface's) chains to: an ACME client's ca_file.
	Directory, CAFile string
	// Management is the management interface's base URL (/roots/0,
	// /intermediates/0).
	Management string
	// LogPath is Pebble's log (its stdout and stderr).
	LogPath string

	bin, dir, cfgPath string
	opts              PebbleOptions
	ports             []int
	dnsAddr           string
	dns               *dns.Server
	caPool            *x509.CertPool
	proc              *daemon
	stopOnce          sync.Once
}

// StartPebble starts Pebble for t and stops it (and its DNS server) in
// t.Cleanup.
func StartPebble(t testing.TB, o PebbleOptions) *Pebble {
	t.Helper()
	bin := PebblePath()
	if _, err := os.Stat(bin); err != nil {
		if requireServices() {
			t.Fatalf("Pebble is not built at %s: run scripts/install-services.sh", bin)
		}
		t.Skipf("Pebble is not built at %s (scripts/install-services.sh builds it; make test requires it)", bin)
	}
	p := &Pebble{bin: bin, dir: t.TempDir(), opts: o}
	p.LogPath = filepath.Join(p.dir, "pebble.log")
	p.cfgPath = filepath.Join(p.dir, "pebble.json")
	if err := p.writeCA(); err != nil {
		t.Fatal(err)
	}
	if err := p.startDNS(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	startOnFreePorts(t, "pebble", 2, func(ports []int) error {
		p.ports = ports
		p.Directory = fmt.Sprintf("https://127.0.0.1:%d/dir", ports[0])
		p.Management = fmt.Sprintf("https://127.0.0.1:%d", ports[1])
		return p.start()
	})
	return p
}

// writeCA makes a test CA and, signed by it, the certificate Pebble's
// listeners serve (127.0.0.1 and localhost), as files under p.dir.
func (p *Pebble) writeCA() error {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "levee test Pebble CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	caCert, _ := x509.ParseCertificate(caDER)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	p.CAFile = filepath.Join(p.dir, "ca.pem")
	p.caPool = x509.NewCertPool()
	p.caPool.AddCert(caCert)
	for path, b := range map[string]*pem.Block{
		p.CAFile:                         {Type: "CERTIFICATE", Bytes: caDER},
		filepath.Join(p.dir, "cert.pem"): {Type: "CERTIFICATE", Bytes: leafDER},
		filepath.Join(p.dir, "key.pem"):  {Type: "EC PRIVATE KEY", Bytes: keyDER},
	} {
		if err := os.WriteFile(path, pem.EncodeToMemory(b), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// startDNS runs the DNS server Pebble resolves the names it validates
// with: every name's A record is 127.0.0.1 (no AAAA), over TCP.
func (p *Pebble) startDNS() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	p.dnsAddr = ln.Addr().String()
	started := make(chan struct{})
	p.dns = &dns.Server{Listener: ln, NotifyStartedFunc: func() { close(started) }, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, req *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(req)
		if len(req.Question) == 1 && req.Question[0].Qtype == dns.TypeA {
			m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: req.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 1},
				A: net.IPv4(127, 0, 0, 1)})
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = p.dns.ActivateAndServe() }()
	select {
	case <-started:
		return nil
	case <-time.After(5 * time.Second):
		_ = ln.Close()
		return errors.New("pebble's DNS server did not start within 5s")
	}
}

// closedPort is a loopback port nothing listens on (a challenge pointed
// there fails at once with connection refused).
func closedPort() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 1
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

func (p *Pebble) start() error {
	httpPort, tlsPort := p.opts.HTTPPort, p.opts.TLSPort
	if httpPort == 0 {
		httpPort = closedPort()
	}
	if tlsPort == 0 {
		tlsPort = closedPort()
	}
	validity := uint64(p.opts.Validity / time.Second)
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress":           fmt.Sprintf("127.0.0.1:%d", p.ports[0]),
		"managementListenAddress": fmt.Sprintf("127.0.0.1:%d", p.ports[1]),
		"certificate":             filepath.Join(p.dir, "cert.pem"),
		"privateKey":              filepath.Join(p.dir, "key.pem"),
		"httpPort":                httpPort,
		"tlsPort":                 tlsPort,
		"ocspResponderURL":        "",
		"keyAlgorithm":            "ecdsa",
		"retryAfter":              map[string]int{"authz": 1, "order": 1},
		"profiles":                map[string]any{"default": map[string]any{"description": "levee tests", "validityPeriod": validity}},
	}}
	data, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := os.WriteFile(p.cfgPath, data, 0o600); err != nil {
		return err
	}
	p.proc, err = startDaemonEnv(p.LogPath, []string{
		"PEBBLE_VA_NOSLEEP=1",      // validate at once, not after 0-15 s
		"PEBBLE_WFE_NONCEREJECT=0", // no nonces refused at random
		"PEBBLE_AUTHZREUSE=0",      // every order validated again
	}, p.bin, "-config", p.cfgPath, "-dnsserver", p.dnsAddr)
	if err != nil {
		return err
	}
	// Ready when the directory answers on a port that is ours (bounded).
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if p.ok(p.Directory) && listensOn(p.proc.cmd.Process.Pid, p.ports[0]) && listensOn(p.proc.cmd.Process.Pid, p.ports[1]) {
			return nil
		}
		select {
		case <-p.proc.done:
			out := p.proc.output()
			return portTakenError(fmt.Errorf("pebble exited at start: %s", lastLines(out, 20)), out)
		case <-time.After(50 * time.Millisecond):
		}
	}
	p.proc.kill()
	return errors.New("pebble was not ready within 30s: " + lastLines(p.proc.output(), 20))
}

func (p *Pebble) client() *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{RootCAs: p.caPool, MinVersion: tls.VersionTLS12}}}
}

func (p *Pebble) ok(u string) bool {
	resp, err := p.client().Get(u)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stop stops Pebble (SIGTERM, SIGKILL after 5 s) and waits for it; its
// ports refuse connections from then on (a client's orders fail). Its
// DNS server stops with t's cleanup.
func (p *Pebble) Stop() {
	if p.proc != nil {
		p.proc.stop()
	}
	p.stopOnce.Do(func() {
		if p.dns != nil {
			_ = p.dns.Shutdown()
		}
	})
}

// Roots is the pool of the root that issued Pebble's certificates
// (/roots/0 of the management interface; Pebble makes a new one at each
// start).
func (p *Pebble) Roots(t testing.TB) *x509.CertPool {
	t.Helper()
	resp, err := p.client().Get(p.Management + "/roots/0")
	if err != nil {
		t.Fatalf("pebble roots: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("pebble roots: %d %v", resp.StatusCode, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(body) {
		t.Fatalf("pebble roots: no PEM certificate in %q", body)
	}
	return pool
}

// Issued is the number of certificates Pebble has issued (its log's
// "Issued certificate serial" lines): one per completed order.
func (p *Pebble) Issued() int {
	b, _ := os.ReadFile(p.LogPath)
	return strings.Count(string(b), "Issued certificate serial")
}

// Log is Pebble's log so far, for a failure message.
func (p *Pebble) Log() string {
	b, _ := os.ReadFile(p.LogPath)
	return string(b)
}
