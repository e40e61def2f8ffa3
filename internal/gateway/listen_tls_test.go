package gateway

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// The TLS listener's certificates chosen by SNI, their rotation on reload,
// their expiry metric, the version and cipher policy and client
// certificates: real levee from a config file, real TLS over loopback,
// certificates made by a test CA (testCA) and written to files.

// testCA is a certificate authority made afresh for one test: its
// certificate is in file (PEM) and pool.
type testCA struct {
	t    *testing.T
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
	pool *x509.CertPool
	dir  string
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(t), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{t: t, cert: cert, key: key, dir: t.TempDir(), pool: x509.NewCertPool()}
	ca.pool.AddCert(cert)
	ca.file = filepath.Join(ca.dir, "ca.pem")
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

func randomSerial(t *testing.T) *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func writePEM(t *testing.T, file, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issued is a certificate the CA signed: its files, its leaf and the pair
// for a client.
type issued struct {
	certFile, keyFile string
	leaf              *x509.Certificate
	pair              tls.Certificate
}

// issue signs a certificate for subject with DNS names (server) or for a
// client (client true), valid until notAfter, and writes it to
// base-cert.pem and base-key.pem in the CA's directory (replacing them
// when they exist: a rotation).
func (ca *testCA) issue(base string, subject pkix.Name, names []string, notAfter time.Time, client bool) issued {
	t := ca.t
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(t), Subject: subject, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	is := issued{certFile: filepath.Join(ca.dir, base+"-cert.pem"), keyFile: filepath.Join(ca.dir, base+"-key.pem"), leaf: leaf,
		pair: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}}
	// Written to new names and renamed over the old: a reader never sees
	// half a file.
	writePEM(t, is.certFile+".tmp", "CERTIFICATE", der)
	writePEM(t, is.keyFile+".tmp", "EC PRIVATE KEY", kb)
	for _, f := range []string{is.certFile, is.keyFile} {
		if err := os.Rename(f+".tmp", f); err != nil {
			t.Fatal(err)
		}
	}
	return is
}

// tlsConfigYAML is a levee config serving / from backend u over TLS with
// the tls block given (flow style).
func tlsConfigYAML(u string, tlsBlock string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: true}
tls: %s
upstreams:
  u: {endpoints: [{address: %s}]}
routes:
  - {name: all, match: {path_prefix: /}, upstream: u}
`, tlsBlock, u)
}

// handshake opens a TLS connection to addr as cfg says (10 s bound) and
// returns it, or the handshake's error.
func handshake(t *testing.T, addr string, cfg *tls.Config) (*tls.Conn, error) {
	t.Helper()
	d := &net.Dialer{Timeout: 10 * time.Second}
	raw, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(raw, cfg)
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		return nil, err
	}
	return c, nil
}

// servedName is the common name of the certificate a handshake naming sni
// ("": no SNI) is served.
func servedName(t *testing.T, addr, sni string) string {
	t.Helper()
	c, err := handshake(t, addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatalf("handshake with SNI %q: %v", sni, err)
	}
	// A request on it, so the connection is levee's served one, not a
	// handshake only.
	if st := requestOn(t, c, "sni-"+sni); st != 200 {
		t.Fatalf("SNI %q: status %d", sni, st)
	}
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// requestOn sends one HTTP/1.1 GET with X-Request-Id id on c and returns
// the status (0: the connection failed, the error logged).
func requestOn(t *testing.T, c *tls.Conn, id string) int {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET /x HTTP/1.1\r\nHost: a\r\nX-Request-Id: %s\r\n\r\n", id); err != nil {
		t.Logf("write: %v", err)
		return 0
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Logf("read: %v", err)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestTLSCertificatesBySNI: a default certificate (cert_file) and three
// more (two names and a wildcard) are each served to the SNI that names
// them (exact first, case and a trailing dot ignored, the wildcard for one
// label only); an unknown name and no SNI at all get the default; without
// cert_file, the first of the list is the default. HTTP/2 by ALPN gets
// the same choice.
func TestTLSCertificatesBySNI(t *testing.T) {
	u, _ := backend(t, "ok")
	ca := newTestCA(t, "sni-ca")
	far := time.Now().Add(48 * time.Hour)
	def := ca.issue("default", pkix.Name{CommonName: "default"}, []string{"default.example.org"}, far, false)
	a := ca.issue("a", pkix.Name{CommonName: "a"}, []string{"a.example.com"}, far, false)
	b := ca.issue("b", pkix.Name{CommonName: "b"}, []string{"b.example.com", "b2.example.com"}, far, false)
	w := ca.issue("wild", pkix.Name{CommonName: "wild"}, []string{"*.wild.example.com"}, far, false)
	// A name both exact in one certificate and under another's wildcard
	// goes to the exact one.
	exactUnderWild := ca.issue("exact", pkix.Name{CommonName: "exact"}, []string{"x.wild.example.com"}, far, false)
	list := fmt.Sprintf("[{cert_file: %s, key_file: %s}, {cert_file: %s, key_file: %s}, {cert_file: %s, key_file: %s}, {cert_file: %s, key_file: %s}]",
		a.certFile, a.keyFile, b.certFile, b.keyFile, w.certFile, w.keyFile, exactUnderWild.certFile, exactUnderWild.keyFile)
	h := start(t, tlsConfigYAML(hostPort(u), fmt.Sprintf("{cert_file: %s, key_file: %s, certificates: %s}", def.certFile, def.keyFile, list)))
	addr := h.g.Addr().String()
	for _, tc := range []struct{ sni, want string }{
		{"a.example.com", "a"},
		{"A.Example.COM", "a"},
		{"a.example.com.", "a"},
		{"b.example.com", "b"},
		{"b2.example.com", "b"},
		{"api.wild.example.com", "wild"},
		{"x.wild.example.com", "exact"},
		{"deep.api.wild.example.com", "default"}, // a wildcard covers one label
		{"wild.example.com", "default"},
		{"default.example.org", "default"},
		{"unknown.example.net", "default"},
		{"", "default"}, // no SNI: dialled by address
	} {
		if got := servedName(t, addr, tc.sni); got != tc.want {
			t.Errorf("SNI %q: served %q, want %q", tc.sni, got, tc.want)
		}
	}
	// Verified by a client that trusts the CA, over HTTP/2.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool, ServerName: "api.wild.example.com"}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/h2")
	if err != nil {
		t.Fatalf("HTTP/2 to api.wild.example.com: %v", err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || resp.TLS.PeerCertificates[0].Subject.CommonName != "wild" {
		t.Fatalf("HTTP/2: %s %d, certificate %q", resp.Proto, resp.StatusCode, resp.TLS.PeerCertificates[0].Subject.CommonName)
	}

	// Without cert_file the first listed certificate is the default.
	h2 := start(t, tlsConfigYAML(hostPort(u), "{certificates: "+list+"}"))
	for _, sni := range []string{"", "unknown.example.net", "default.example.org"} {
		if got := servedName(t, h2.g.Addr().String(), sni); got != "a" {
			t.Errorf("without cert_file, SNI %q: served %q, want the first, \"a\"", sni, got)
		}
	}
}

// TestTLSCertificateRotation: a reload (what SIGHUP runs) with new
// contents in the same certificate files serves the new certificate to
// new handshakes while connections opened before keep working with the
// old one, HTTP/1.1 and HTTP/2 alike; the expiry metric follows each
// certificate's NotAfter; a reload whose certificates share a name is
// refused, naming both files, and the certificates before it keep
// serving.
func TestTLSCertificateRotation(t *testing.T) {
	u, _ := backend(t, "ok")
	ca := newTestCA(t, "rotation-ca")
	notAfterOld := time.Now().Add(30 * 24 * time.Hour).Truncate(time.Second)
	old := ca.issue("rot", pkix.Name{CommonName: "rot-old"}, []string{"rot.example.com"}, notAfterOld, false)
	other := ca.issue("other", pkix.Name{CommonName: "other"}, []string{"other.example.com"}, notAfterOld.Add(time.Hour), false)
	tlsBlock := fmt.Sprintf("{certificates: [{cert_file: %s, key_file: %s}, {cert_file: %s, key_file: %s}]}", old.certFile, old.keyFile, other.certFile, other.keyFile)
	h := start(t, tlsConfigYAML(hostPort(u), tlsBlock))
	addr := h.g.Addr().String()
	expiry := func(name string) float64 {
		return h.metric(`levee_tls_certificate_expiry_timestamp_seconds{name="` + name + `"}`)
	}
	if got := expiry("rot.example.com"); got != float64(notAfterOld.Unix()) {
		t.Fatalf("expiry of rot.example.com %v, want %d (NotAfter %v)", got, notAfterOld.Unix(), notAfterOld)
	}
	if got := expiry("other.example.com"); got != float64(notAfterOld.Add(time.Hour).Unix()) {
		t.Fatalf("expiry of other.example.com %v, want %d", got, notAfterOld.Add(time.Hour).Unix())
	}

	clientCfg := func(protos ...string) *tls.Config {
		return &tls.Config{RootCAs: ca.pool, ServerName: "rot.example.com", NextProtos: protos}
	}
	keep, err := handshake(t, addr, clientCfg("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	if st := requestOn(t, keep, "before"); st != 200 {
		t.Fatalf("before the rotation: %d", st)
	}
	// An HTTP/2 connection kept open across the rotation too: the
	// transport's one connection (MaxConnsPerHost 1), whose certificate
	// each answer shows.
	tr := &http.Transport{TLSClientConfig: clientCfg(), ForceAttemptHTTP2: true, MaxConnsPerHost: 1}
	defer tr.CloseIdleConnections()
	h2get := func() (int, string) {
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/h2")
		if err != nil {
			t.Logf("HTTP/2 request: %v", err)
			return 0, ""
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("%s, want HTTP/2", resp.Proto)
		}
		return resp.StatusCode, resp.TLS.PeerCertificates[0].Subject.CommonName
	}
	if st, cn := h2get(); st != 200 || cn != "rot-old" {
		t.Fatalf("HTTP/2 before the rotation: %d, certificate %q", st, cn)
	}

	notAfterNew := notAfterOld.Add(60 * 24 * time.Hour)
	fresh := ca.issue("rot", pkix.Name{CommonName: "rot-new"}, []string{"rot.example.com"}, notAfterNew, false)
	if err := h.g.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	c, err := handshake(t, addr, clientCfg("http/1.1"))
	if err != nil {
		t.Fatal(err)
	}
	if cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "rot-new" {
		t.Fatalf("a new handshake after the reload was served %q, want rot-new", cn)
	}
	if !c.ConnectionState().PeerCertificates[0].Equal(fresh.leaf) {
		t.Fatal("the new handshake's certificate is not the rotated file's")
	}
	if st := requestOn(t, c, "after"); st != 200 {
		t.Fatalf("new connection after the rotation: %d", st)
	}
	for i := range 3 {
		if st := requestOn(t, keep, fmt.Sprintf("kept-%d", i)); st != 200 {
			t.Fatalf("the connection opened before the rotation, request %d: %d", i, st)
		}
		if st, cn := h2get(); st != 200 || cn != "rot-old" {
			t.Fatalf("the HTTP/2 connection opened before the rotation, request %d: %d, certificate %q (rot-old: the same connection)", i, st, cn)
		}
	}
	if cn := keep.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "rot-old" {
		t.Fatalf("the kept connection's certificate %q, want rot-old", cn)
	}
	if got := expiry("rot.example.com"); got != float64(notAfterNew.Unix()) {
		t.Fatalf("expiry after the rotation %v, want %d", got, notAfterNew.Unix())
	}

	// A reload that would put one name in two certificates is refused and
	// changes nothing.
	dup := ca.issue("dup", pkix.Name{CommonName: "dup"}, []string{"dup.example.com", "other.example.com"}, notAfterNew, false)
	h.writeConfig(tlsConfigYAML(hostPort(u), fmt.Sprintf("{certificates: [{cert_file: %s, key_file: %s}, {cert_file: %s, key_file: %s}, {cert_file: %s, key_file: %s}]}",
		fresh.certFile, fresh.keyFile, other.certFile, other.keyFile, dup.certFile, dup.keyFile)))
	err = h.g.Reload()
	if err == nil || !strings.Contains(err.Error(), `name "other.example.com" is in two certificates: `+other.certFile+" and "+dup.certFile) {
		t.Fatalf("reload with a duplicate name: %v", err)
	}
	if servedName(t, addr, "dup.example.com") != "rot-new" { // the default: the first
		t.Fatal("the refused reload's certificates are served")
	}
}

// TestTLSVersionAndCipherPolicy: min_version 1.3 refuses a client that
// speaks TLS 1.2 at most (the handshake fails and is counted as an
// error) and serves a TLS 1.3 one; cipher_suites refuses a TLS 1.2 client
// offering only a suite not listed and serves one offering a listed one.
func TestTLSVersionAndCipherPolicy(t *testing.T) {
	u, _ := backend(t, "ok")
	ca := newTestCA(t, "policy-ca")
	cert := ca.issue("p", pkix.Name{CommonName: "p"}, []string{"p.example.com"}, time.Now().Add(time.Hour), false)
	h := start(t, tlsConfigYAML(hostPort(u), fmt.Sprintf(`{cert_file: %s, key_file: %s, min_version: "1.3"}`, cert.certFile, cert.keyFile)))
	addr := h.g.Addr().String()
	errorsBefore := h.metric(`levee_tls_handshakes_total{result="error"}`)
	if _, err := handshake(t, addr, &tls.Config{RootCAs: ca.pool, ServerName: "p.example.com", MaxVersion: tls.VersionTLS12}); err == nil || !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("a TLS 1.2 client with min_version 1.3: %v, want a protocol version alert", err)
	}
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		got := h.metric(`levee_tls_handshakes_total{result="error"}`)
		return got == errorsBefore+1, fmt.Sprintf("handshake errors %v, want %v", got, errorsBefore+1)
	})
	c, err := handshake(t, addr, &tls.Config{RootCAs: ca.pool, ServerName: "p.example.com", NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if v := c.ConnectionState().Version; v != tls.VersionTLS13 {
		t.Fatalf("version %x, want TLS 1.3", v)
	}
	if st := requestOn(t, c, "tls13"); st != 200 {
		t.Fatalf("TLS 1.3 request: %d", st)
	}

	h12 := start(t, tlsConfigYAML(hostPort(u), fmt.Sprintf(`{cert_file: %s, key_file: %s, cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384]}`, cert.certFile, cert.keyFile)))
	only := func(suite uint16) *tls.Config {
		return &tls.Config{RootCAs: ca.pool, ServerName: "p.example.com", MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{suite}, NextProtos: []string{"http/1.1"}}
	}
	if _, err := handshake(t, h12.g.Addr().String(), only(tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256)); err == nil {
		t.Fatal("a client offering only a suite not listed completed the handshake")
	}
	c, err = handshake(t, h12.g.Addr().String(), only(tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384))
	if err != nil {
		t.Fatalf("a client offering the listed suite: %v", err)
	}
	if st := requestOn(t, c, "tls12"); st != 200 || c.ConnectionState().CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 {
		t.Fatalf("TLS 1.2 with the listed suite: status %d, suite %x", st, c.ConnectionState().CipherSuite)
	}
}

// refusedAtHandshake reports how a client that dialled with cfg was
// refused: the handshake's error (TLS 1.2: the client's Handshake fails),
// or, in TLS 1.3, where the client's Handshake returns before the server
// has read its certificate, the server's alert read on the first request.
// "" when a request was answered.
func refusedAtHandshake(t *testing.T, addr string, cfg *tls.Config) string {
	t.Helper()
	c, err := handshake(t, addr, cfg)
	if err != nil {
		return err.Error()
	}
	if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\nX-Request-Id: refused\r\n\r\n"); err != nil {
		return err.Error()
	}
	if _, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil {
		return err.Error()
	}
	return ""
}

// TestTLSClientCertificates: client_auth require refuses a client without
// a certificate, and one whose certificate another CA signed, at the
// handshake (the upstream sees no request; the handshake counts as an
// error), and serves one signed by ca_file, whose subject and SHA-256
// reach the access log over HTTP/1.1 and HTTP/2. request mode serves a
// client without a certificate (no subject in its line) and still
// refuses an invalid one at the handshake.
func TestTLSClientCertificates(t *testing.T) {
	u, hits := backend(t, "ok")
	ca := newTestCA(t, "client-ca")
	stranger := newTestCA(t, "stranger-ca")
	server := ca.issue("server", pkix.Name{CommonName: "server"}, []string{"mtls.example.com"}, time.Now().Add(time.Hour), false)
	alice := ca.issue("alice", pkix.Name{CommonName: "alice", Organization: []string{"Example"}}, nil, time.Now().Add(time.Hour), true)
	mallory := stranger.issue("mallory", pkix.Name{CommonName: "mallory"}, nil, time.Now().Add(time.Hour), true)
	sum := sha256.Sum256(alice.leaf.Raw)
	aliceSHA := hex.EncodeToString(sum[:])

	for _, mode := range []string{"require", "request"} {
		t.Run(mode, func(t *testing.T) {
			h := start(t, tlsConfigYAML(hostPort(u), fmt.Sprintf(`{cert_file: %s, key_file: %s, client_auth: {ca_file: %s, mode: %s}}`,
				server.certFile, server.keyFile, ca.file, mode)))
			addr := h.g.Addr().String()
			cfg := func(max uint16, certs ...tls.Certificate) *tls.Config {
				c := &tls.Config{RootCAs: ca.pool, ServerName: "mtls.example.com", MaxVersion: max, NextProtos: []string{"http/1.1"}}
				if len(certs) > 0 {
					// Sent whatever CAs levee names (crypto/tls would keep
					// back a certificate of another CA, and send none).
					c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &certs[0], nil }
				}
				return c
			}
			hitsBefore := hits.Load()
			errorsBefore := h.metric(`levee_tls_handshakes_total{result="error"}`)
			refusals := 0
			for _, max := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
				if mode == "require" {
					if msg := refusedAtHandshake(t, addr, cfg(max)); msg == "" {
						t.Errorf("TLS %x: a client without a certificate was served", max)
					} else {
						t.Logf("TLS %x, no certificate: %s", max, msg)
						refusals++
					}
				}
				if msg := refusedAtHandshake(t, addr, cfg(max, mallory.pair)); msg == "" {
					t.Errorf("TLS %x: a client with another CA's certificate was served", max)
				} else {
					t.Logf("TLS %x, another CA's certificate: %s", max, msg)
					refusals++
				}
			}
			if n := hits.Load() - hitsBefore; n != 0 {
				t.Errorf("the upstream saw %d requests of refused clients", n)
			}
			testkit.Eventually(t, 5*time.Second, func() (bool, string) {
				got := h.metric(`levee_tls_handshakes_total{result="error"}`) - errorsBefore
				return got == float64(refusals), fmt.Sprintf("%v handshake errors counted, want %d", got, refusals)
			})

			c, err := handshake(t, addr, cfg(0, alice.pair))
			if err != nil {
				t.Fatal(err)
			}
			if st := requestOn(t, c, mode+"-alice-h1"); st != 200 {
				t.Fatalf("alice over HTTP/1.1: %d", st)
			}
			tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.pool, ServerName: "mtls.example.com", Certificates: []tls.Certificate{alice.pair}}, ForceAttemptHTTP2: true}
			defer tr.CloseIdleConnections()
			req, _ := http.NewRequest("GET", "https://"+addr+"/h2", nil)
			req.Header.Set("X-Request-Id", mode+"-alice-h2")
			resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
			if err != nil {
				t.Fatalf("alice over HTTP/2: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
				t.Fatalf("alice over HTTP/2: %s %d", resp.Proto, resp.StatusCode)
			}
			ids := []string{mode + "-alice-h1", mode + "-alice-h2"}
			if mode == "request" {
				anon, err := handshake(t, addr, cfg(0))
				if err != nil {
					t.Fatal(err)
				}
				if st := requestOn(t, anon, "request-anonymous"); st != 200 {
					t.Fatalf("request mode, no certificate: %d", st)
				}
				ids = append(ids, "request-anonymous")
			}
			lines := waitLines(t, h, ids...)
			for _, id := range ids[:2] {
				l := lines[id]
				if l["tls_client_subject"] != "CN=alice,O=Example" || l["tls_client_sha256"] != aliceSHA {
					t.Errorf("%s: tls_client_subject %v, tls_client_sha256 %v; want CN=alice,O=Example and %s", id, l["tls_client_subject"], l["tls_client_sha256"], aliceSHA)
				}
			}
			if mode == "request" {
				l := lines["request-anonymous"]
				if _, ok := l["tls_client_subject"]; ok {
					t.Errorf("a client without a certificate has tls_client_subject %v", l["tls_client_subject"])
				}
			}
		})
	}
}
