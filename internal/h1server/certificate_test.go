package h1server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/certset"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// writeTestPair writes a self-signed certificate for names (common name
// cn, expiring at notAfter) and its key under dir. Test-only (the gateway's
// tests have their own CA, listen_tls_test.go).
func writeTestPair(t *testing.T, dir, base, cn string, notAfter time.Time, names ...string) certset.Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	p := certset.Pair{CertFile: filepath.Join(dir, base+".pem"), KeyFile: filepath.Join(dir, base+".key")}
	os.WriteFile(p.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(p.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return p
}

// TestCertificateSwap: before any Load a handshake fails (it does not
// panic); a Load that fails keeps the set before it; a good one serves its
// certificates to the next handshake; the collector reports each
// certificate's NotAfter by first name.
func TestCertificateSwap(t *testing.T) {
	var cert Certificate
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), func(o *Options) {
		o.TLSConfig = cert.TLSConfig()
	})
	served := func(sni string) (string, error) {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", ts.addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		if err != nil {
			return "", err
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
	}
	if _, err := served("a.example.com"); err == nil {
		t.Fatal("a handshake before any Load succeeded")
	}
	dir := t.TempDir()
	notAfter := time.Now().Add(72 * time.Hour).Truncate(time.Second)
	a := writeTestPair(t, dir, "a", "a", notAfter, "a.example.com")
	b := writeTestPair(t, dir, "b", "b", notAfter.Add(time.Hour), "b.example.com")
	if err := cert.Load(certset.Spec{Certificates: []certset.Pair{a, b}}); err != nil {
		t.Fatal(err)
	}
	if cn, err := served("b.example.com"); err != nil || cn != "b" {
		t.Fatalf("b.example.com: %q %v", cn, err)
	}
	err := cert.Load(certset.Spec{Certificates: []certset.Pair{b, {CertFile: a.CertFile, KeyFile: b.KeyFile}}})
	if err == nil || !strings.Contains(err.Error(), "private key does not match") {
		t.Fatalf("a mismatched pair: %v", err)
	}
	if cn, err := served("unknown"); err != nil || cn != "a" {
		t.Fatalf("after a failed Load the default is %q (%v), want a: the set before it", cn, err)
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCertificateCollector(&cert))
	want := `
# HELP levee_tls_certificate_expiry_timestamp_seconds When each certificate the data listener serves expires (its leaf's NotAfter, Unix seconds), by the certificate's first name (one series per configured certificate: tls.cert_file and tls.certificates). None on a clear-text listener.
# TYPE levee_tls_certificate_expiry_timestamp_seconds gauge
levee_tls_certificate_expiry_timestamp_seconds{name="a.example.com"} ` + strconv.FormatInt(notAfter.Unix(), 10) + `
levee_tls_certificate_expiry_timestamp_seconds{name="b.example.com"} ` + strconv.FormatInt(notAfter.Add(time.Hour).Unix(), 10) + `
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}
