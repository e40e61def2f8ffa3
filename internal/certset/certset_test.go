package certset

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writePair makes a self-signed certificate with common name cn and DNS
// names, writes it and its key under dir as base.pem and base.key, and
// returns the pair's files. Test-only: the gateway's tests have their own
// CA (listen_tls_test.go).
func writePair(t testing.TB, dir, base, cn string, names ...string) Pair {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: names,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	p := Pair{CertFile: filepath.Join(dir, base+".pem"), KeyFile: filepath.Join(dir, base+".key")}
	os.WriteFile(p.CertFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(p.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return p
}

// chosen is the common name of the certificate s serves to serverName.
func chosen(s *Set, serverName string) string {
	return s.Certificate(serverName).Leaf.Subject.CommonName
}

// TestChoice: exact names (any case, a trailing dot), then the wildcard
// one label up, then the default; a certificate without DNS SANs answers
// for its common name; cert_file is the default, else the first listed.
func TestChoice(t *testing.T) {
	dir := t.TempDir()
	def := writePair(t, dir, "def", "def", "def.example.org")
	a := writePair(t, dir, "a", "a", "a.example.com", "A2.Example.com")
	w := writePair(t, dir, "w", "w", "*.w.example.com")
	cn := writePair(t, dir, "cn", "cn-only.example.com")
	s, err := Load(Spec{Default: def, Certificates: []Pair{a, w, cn}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ sni, want string }{
		{"a.example.com", "a"}, {"A.EXAMPLE.COM.", "a"}, {"a2.example.com", "a"},
		{"x.w.example.com", "w"}, {"X.W.Example.Com", "w"}, {"y.x.w.example.com", "def"}, {"w.example.com", "def"},
		{"cn-only.example.com", "cn-only.example.com"},
		{"", "def"}, {"nowhere", "def"}, {".", "def"}, {"*.w.example.com", "w"},
	} {
		if got := chosen(s, tc.sni); got != tc.want {
			t.Errorf("SNI %q: %q, want %q", tc.sni, got, tc.want)
		}
	}
	var names []string
	for _, e := range s.Entries() {
		names = append(names, e.Name)
	}
	if strings.Join(names, " ") != "def.example.org a.example.com *.w.example.com cn-only.example.com" {
		t.Errorf("entries by first name: %v", names)
	}
	s, err = Load(Spec{Certificates: []Pair{w, a}})
	if err != nil {
		t.Fatal(err)
	}
	if got := chosen(s, "unknown"); got != "w" {
		t.Errorf("without a default pair the first listed is the default; got %q", got)
	}
}

// TestLoadRefuses: every problem is reported with its field, at once.
func TestLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	a := writePair(t, dir, "a", "a", "a.example.com")
	a2 := writePair(t, dir, "a2", "a2", "b.example.com", "A.example.com")
	bad := writePair(t, dir, "bad", "bad", "x.*.example.com")
	_, err := Load(Spec{Certificates: []Pair{a, a2, bad, {CertFile: a.CertFile, KeyFile: a2.KeyFile}}, MinVersion: "1.0",
		CipherSuites: []string{"TLS_RSA_WITH_AES_128_CBC_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"},
		ClientAuth:   &ClientAuth{CAFile: a.KeyFile, Mode: "maybe"}})
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error %v (%T), want Errors", err, err)
	}
	want := []string{
		`tls.certificates[1]: name "a.example.com" is in two certificates: ` + a.CertFile + " and " + a2.CertFile,
		`tls.certificates[2]: ` + bad.CertFile + `: the certificate's name "x.*.example.com" is not a host name or a one-label wildcard (*.example.com)`,
		"tls.certificates[3]: loading " + a.CertFile + " and " + a2.KeyFile + ": tls: private key does not match public key",
		`tls.min_version: must be "1.2" or "1.3", got "1.0"`,
		`tls.cipher_suites[0]: "TLS_RSA_WITH_AES_128_CBC_SHA256" is insecure`,
		`tls.cipher_suites[2]: "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" is listed twice`,
		`tls.client_auth.mode: must be "request" or "require", got "maybe"`,
		"tls.client_auth.ca_file: " + a.KeyFile + " holds no PEM certificate",
	}
	if len(errs) != len(want) {
		t.Fatalf("errors:\n%v\nwant %d", err, len(want))
	}
	for i, e := range errs {
		if !strings.HasPrefix(e.Error(), want[i]) {
			t.Errorf("error %d:\n%s\nwant it to begin\n%s", i, e, want[i])
		}
	}
	if _, err := Load(Spec{}); err == nil || err.Error() != "tls.cert_file: required (or tls.certificates)" {
		t.Errorf("empty spec: %v", err)
	}
}

// TestCipherSuite: every suite crypto/tls calls secure for TLS 1.2 is
// accepted, every insecure one refused.
func TestCipherSuite(t *testing.T) {
	for _, cs := range tls.CipherSuites() {
		_, err := CipherSuite(cs.Name)
		tls12 := false
		for _, v := range cs.SupportedVersions {
			tls12 = tls12 || v == tls.VersionTLS12
		}
		if (err == nil) != tls12 {
			t.Errorf("%s: %v (TLS 1.2: %v)", cs.Name, err, tls12)
		}
	}
	for _, cs := range tls.InsecureCipherSuites() {
		if _, err := CipherSuite(cs.Name); err == nil || !strings.Contains(err.Error(), "insecure") {
			t.Errorf("%s: %v, want refused as insecure", cs.Name, err)
		}
	}
}

// TestClientOf: the identity of a verified chain's leaf; nothing for
// clear text or a connection without a client certificate.
func TestClientOf(t *testing.T) {
	p := writePair(t, t.TempDir(), "c", "alice", "alice.example.com")
	pair, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ClientOf(nil); ok {
		t.Error("ClientOf(nil) found a client")
	}
	if _, ok := ClientOf(&tls.ConnectionState{PeerCertificates: []*x509.Certificate{pair.Leaf}}); ok {
		t.Error("an unverified peer certificate counted as a client identity")
	}
	c, ok := ClientOf(&tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{pair.Leaf}}})
	sum := sha256.Sum256(pair.Leaf.Raw)
	if !ok || c.Subject != "CN=alice" || c.SHA256 != hex.EncodeToString(sum[:]) || c.Leaf != pair.Leaf {
		t.Errorf("ClientOf: %+v %v", c, ok)
	}
}

// TestChoiceAllocatesNothing: choosing a certificate for a lower-case SNI
// costs no allocation (it runs in every handshake).
func TestChoiceAllocatesNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := Load(Spec{Certificates: []Pair{writePair(t, dir, "a", "a", "a.example.com"), writePair(t, dir, "w", "w", "*.w.example.com")}})
	if err != nil {
		t.Fatal(err)
	}
	hello := &tls.ClientHelloInfo{ServerName: "x.w.example.com"}
	if n := testing.AllocsPerRun(100, func() { _, _ = s.certificate(hello) }); n != 0 {
		t.Errorf("%v allocations per choice", n)
	}
}

// FuzzChoice: any server name a client sends gets a certificate of the
// set, without a panic; a name that differs from a configured exact name
// only in case or a trailing dot gets that name's certificate.
func FuzzChoice(f *testing.F) {
	dir := f.TempDir()
	def := writePair(f, dir, "def", "def", "def.example.org")
	a := writePair(f, dir, "a", "a", "a.example.com")
	w := writePair(f, dir, "w", "w", "*.w.example.com")
	s, err := Load(Spec{Default: def, Certificates: []Pair{a, w}})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{"", "a.example.com", "A.EXAMPLE.COM.", "x.w.example.com", ".", "..", "*.w.example.com", "\x00", strings.Repeat("a.", 200)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		c := s.Certificate(name)
		if c == nil {
			t.Fatalf("%q: no certificate", name)
		}
		if strings.EqualFold(strings.TrimSuffix(name, "."), "a.example.com") && c.Leaf.Subject.CommonName != "a" {
			t.Fatalf("%q: served %q, want a", name, c.Leaf.Subject.CommonName)
		}
	})
}
