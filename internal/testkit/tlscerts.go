package testkit

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
	"sync/atomic"
	"testing"
	"time"
)

// Certificates made for a test: a certificate authority of the test's own
// (TestCA) issuing server and client certificates (Issue), each also as PEM
// to write to the files a configuration names. Keys are ECDSA P-256, quick
// to generate.

// TestCA is a certificate authority made for one test.
type TestCA struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
	// PEM is the CA certificate, for a ca_file.
	PEM []byte
}

// CertSpec says what Issue puts in a certificate.
type CertSpec struct {
	// CommonName is the subject's CN.
	CommonName string
	// DNSNames and IPs are the subject alternative names (a server's).
	DNSNames []string
	IPs      []net.IP
	// Client makes a client certificate (ExtKeyUsageClientAuth) instead of
	// a server one.
	Client bool
	// NotBefore and NotAfter default to an hour before and after now.
	NotBefore, NotAfter time.Time
}

// Issued is a certificate Issue made: ready for a tls.Config, and as PEM
// for cert_file and key_file.
type Issued struct {
	TLS     tls.Certificate
	CertPEM []byte
	KeyPEM  []byte
}

var serial atomic.Int64

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// NewTestCA makes a self-signed CA named name, valid from an hour ago for a
// day.
func NewTestCA(t testing.TB, name string) *TestCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &TestCA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pool returns a pool holding the CA alone.
func (ca *TestCA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// Issue makes a certificate signed by ca.
func (ca *TestCA) Issue(t testing.TB, s CertSpec) Issued {
	t.Helper()
	key := newKey(t)
	if s.NotBefore.IsZero() {
		s.NotBefore = time.Now().Add(-time.Hour)
	}
	if s.NotAfter.IsZero() {
		s.NotAfter = time.Now().Add(time.Hour)
	}
	usage := x509.ExtKeyUsageServerAuth
	if s.Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial.Add(1)), Subject: pkix.Name{CommonName: s.CommonName},
		DNSNames: s.DNSNames, IPAddresses: s.IPs,
		NotBefore: s.NotBefore, NotAfter: s.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return Issued{
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key},
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
	}
}

// Localhost is the spec of a server certificate for "localhost" and
// 127.0.0.1.
func Localhost() CertSpec {
	return CertSpec{CommonName: "localhost", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}}
}
