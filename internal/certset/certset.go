// Package certset is the data listener's TLS as loaded from files: its
// certificates chosen by SNI, its version and cipher policy and its client
// certificate rule, read into one immutable Set. The configuration parser
// loads a Set to validate the files (so `levee validate` refuses exactly
// what `levee run` refuses), the gateway loads one at start and on every
// reload and h1server serves the one stored last. Client is the verified
// client certificate's identity that the request path reads.
package certset

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// Pair names a certificate chain and its key, PEM files.
type Pair struct {
	CertFile, KeyFile string
}

// The accepted values of Spec.MinVersion.
const (
	Version12 = "1.2"
	Version13 = "1.3"
)

// The accepted values of ClientAuth.Mode.
const (
	// ModeRequest asks for a client certificate and verifies one that is
	// sent; a client that sends none is served without one, a client
	// whose certificate does not verify fails the handshake.
	ModeRequest = "request"
	// ModeRequire fails the handshake of a client that sends no
	// certificate or one that does not verify.
	ModeRequire = "require"
)

// ClientAuth is the client certificate rule: the CAs a client chain must
// lead to and the mode.
type ClientAuth struct {
	CAFile string
	Mode   string
}

// Spec is what a Set is loaded from (the configuration's tls block).
type Spec struct {
	// Default is served to a client whose SNI names no certificate, and
	// to one that sends none; its names are matched as the others'. The
	// zero Pair: Certificates[0] is the default.
	Default Pair
	// Certificates are further certificates chosen by SNI.
	Certificates []Pair
	// MinVersion is Version12 ("" too) or Version13.
	MinVersion string
	// CipherSuites names TLS 1.2 suites as crypto/tls does; nil: Go's
	// defaults. TLS 1.3 suites are not configurable (crypto/tls).
	CipherSuites []string
	// ClientAuth, when set, asks clients for certificates.
	ClientAuth *ClientAuth
}

// Error is one problem of a Spec, Field naming it as the configuration
// does below `tls` ("cert_file", "certificates[1].cert_file",
// "cipher_suites[0]", "client_auth.ca_file").
type Error struct {
	Field string
	Msg   string
}

func (e *Error) Error() string { return "tls." + e.Field + ": " + e.Msg }

// Errors are every problem found in a Spec.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "; ")
}

// Bounds.
const (
	// MaxCertificates bounds Spec.Certificates (each is a map entry per
	// name and a metric series).
	MaxCertificates = 100
	// maxNamesPerCertificate bounds the SANs one certificate may carry.
	maxNamesPerCertificate = 1000
	// maxCAFileBytes bounds a client_auth.ca_file read.
	maxCAFileBytes = 4 << 20
)

// Entry is one loaded certificate: the names it answers for, its leaf's
// expiry, the files it came from.
type Entry struct {
	// Name is the certificate's first name (the metric's label).
	Name     string
	Names    []string
	NotAfter time.Time
	Files    Pair
	cert     *tls.Certificate
}

// Set is a loaded Spec: immutable, shared by every handshake that starts
// while it is the one stored.
type Set struct {
	exact   map[string]*tls.Certificate // lower-case names
	wild    map[string]*tls.Certificate // "*.example.com" by "example.com"
	def     *tls.Certificate
	entries []Entry // the default first, then Certificates in order
	config  *tls.Config
}

// Load reads every file of spec and checks the rules between them. On
// error it returns every problem found (Errors) and no Set.
func Load(spec Spec) (*Set, error) {
	var errs Errors
	add := func(field, format string, args ...any) {
		errs = append(errs, &Error{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	s := &Set{exact: map[string]*tls.Certificate{}, wild: map[string]*tls.Certificate{}}
	owner := map[string]Pair{} // name → the files that hold it
	load := func(field string, p Pair) {
		e, err := loadPair(p)
		if err != nil {
			add(field, "%v", err)
			return
		}
		for _, n := range e.Names {
			if prev, dup := owner[n]; dup {
				add(field, "name %q is in two certificates: %s and %s", n, prev.CertFile, p.CertFile)
				continue
			}
			owner[n] = p
			if rest, ok := strings.CutPrefix(n, "*."); ok {
				s.wild[rest] = e.cert
			} else {
				s.exact[n] = e.cert
			}
		}
		s.entries = append(s.entries, e)
	}
	if spec.Default != (Pair{}) {
		load("cert_file", spec.Default)
	}
	if len(spec.Certificates) > MaxCertificates {
		add("certificates", "at most %d certificates, got %d", MaxCertificates, len(spec.Certificates))
	} else {
		for i, p := range spec.Certificates {
			load(fmt.Sprintf("certificates[%d]", i), p)
		}
	}
	if spec.Default == (Pair{}) && len(spec.Certificates) == 0 {
		add("cert_file", "required (or tls.certificates)")
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1"},
		GetCertificate: s.certificate,
	}
	switch spec.MinVersion {
	case "", Version12:
	case Version13:
		cfg.MinVersion = tls.VersionTLS13
	default:
		add("min_version", "must be %q or %q, got %q", Version12, Version13, spec.MinVersion)
	}
	if len(spec.CipherSuites) > 0 {
		if cfg.MinVersion == tls.VersionTLS13 {
			add("cipher_suites", "has no effect with min_version %q (TLS 1.3 suites are not configurable); omit it", Version13)
		}
		for i, name := range spec.CipherSuites {
			id, err := CipherSuite(name)
			if err != nil {
				add(fmt.Sprintf("cipher_suites[%d]", i), "%v", err)
				continue
			}
			if slices.Contains(cfg.CipherSuites, id) {
				add(fmt.Sprintf("cipher_suites[%d]", i), "%q is listed twice", name)
				continue
			}
			cfg.CipherSuites = append(cfg.CipherSuites, id)
		}
	}
	if ca := spec.ClientAuth; ca != nil {
		switch ca.Mode {
		case ModeRequest:
			cfg.ClientAuth = tls.VerifyClientCertIfGiven
		case ModeRequire:
			cfg.ClientAuth = tls.RequireAndVerifyClientCert
		default:
			add("client_auth.mode", "must be %q or %q, got %q", ModeRequest, ModeRequire, ca.Mode)
		}
		pool, err := loadCAs(ca.CAFile)
		if err != nil {
			add("client_auth.ca_file", "%v", err)
		}
		cfg.ClientCAs = pool
	}
	if errs != nil {
		return nil, errs
	}
	s.def = s.entries[0].cert
	s.config = cfg
	return s, nil
}

// loadPair reads one certificate and key and the names of its leaf.
func loadPair(p Pair) (Entry, error) {
	cert, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
	if err != nil {
		return Entry{}, fmt.Errorf("loading %s and %s: %w", p.CertFile, p.KeyFile, err)
	}
	leaf := cert.Leaf
	if leaf == nil { // LoadX509KeyPair sets it since Go 1.23
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return Entry{}, fmt.Errorf("%s: %w", p.CertFile, err)
		}
		cert.Leaf = leaf
	}
	names, err := Names(leaf)
	if err != nil {
		return Entry{}, fmt.Errorf("%s: %w", p.CertFile, err)
	}
	return Entry{Name: names[0], Names: names, NotAfter: leaf.NotAfter, Files: p, cert: &cert}, nil
}

// Names are the names a certificate answers for, lower case, in its
// order, each once: its DNS SANs, or its subject's common name when it
// has none. A wildcard is "*." and one label's worth of name
// ("*.example.com" answers for "a.example.com", not "a.b.example.com"
// nor "example.com"); any other "*" is refused. IP SANs are not names
// (SNI carries none: a client that connects by address gets the
// default).
func Names(leaf *x509.Certificate) ([]string, error) {
	src := leaf.DNSNames
	if len(src) == 0 && leaf.Subject.CommonName != "" {
		src = []string{leaf.Subject.CommonName}
	}
	if len(src) == 0 {
		return nil, fmt.Errorf("the certificate names no host (no DNS SAN, no common name)")
	}
	if len(src) > maxNamesPerCertificate {
		return nil, fmt.Errorf("the certificate has %d names, at most %d", len(src), maxNamesPerCertificate)
	}
	names := make([]string, 0, len(src))
	for _, n := range src {
		n = strings.TrimSuffix(strings.ToLower(n), ".")
		if strings.Contains(strings.TrimPrefix(n, "*."), "*") || n == "*." || n == "" {
			return nil, fmt.Errorf("the certificate's name %q is not a host name or a one-label wildcard (*.example.com)", n)
		}
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return names, nil
}

// loadCAs reads a PEM bundle of CA certificates; it must hold at least
// one.
func loadCAs(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, fmt.Errorf("required")
	}
	fi, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	if fi.Size() > maxCAFileBytes {
		return nil, fmt.Errorf("%s: larger than %d bytes", file, maxCAFileBytes)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	n := 0
	// Each pass takes one PEM block off data: at most len(data) passes.
	for len(data) > 0 {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%s: certificate %d: %w", file, n+1, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}

// CipherSuite returns the ID of a TLS 1.2 cipher suite named as
// crypto/tls names it. Insecure suites (tls.InsecureCipherSuites), TLS
// 1.3 suites and unknown names are refused.
func CipherSuite(name string) (uint16, error) {
	for _, cs := range tls.InsecureCipherSuites() {
		if cs.Name == name {
			return 0, fmt.Errorf("%q is insecure (crypto/tls lists it among InsecureCipherSuites); use one of %s", name, strings.Join(SecureCipherSuites(), ", "))
		}
	}
	for _, cs := range tls.CipherSuites() {
		if cs.Name != name {
			continue
		}
		if !slices.Contains(cs.SupportedVersions, tls.VersionTLS12) {
			return 0, fmt.Errorf("%q is a TLS 1.3 suite, which is not configurable; use one of %s", name, strings.Join(SecureCipherSuites(), ", "))
		}
		return cs.ID, nil
	}
	return 0, fmt.Errorf("unknown cipher suite %q; use one of %s", name, strings.Join(SecureCipherSuites(), ", "))
}

// SecureCipherSuites are the names CipherSuite accepts.
func SecureCipherSuites() []string {
	var out []string
	for _, cs := range tls.CipherSuites() {
		if slices.Contains(cs.SupportedVersions, tls.VersionTLS12) {
			out = append(out, cs.Name)
		}
	}
	return out
}

// certificate chooses the certificate of a handshake: the exact name,
// then the wildcard one label up, then the default.
func (s *Set) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	name := hello.ServerName
	if name == "" {
		return s.def, nil
	}
	// A name is looked up as sent when it is already lower case without a
	// trailing dot (the usual case: no allocation).
	if hasUpperOrDot(name) {
		name = strings.TrimSuffix(strings.ToLower(name), ".")
	}
	if c, ok := s.exact[name]; ok {
		return c, nil
	}
	if _, rest, ok := strings.Cut(name, "."); ok {
		if c, ok := s.wild[rest]; ok {
			return c, nil
		}
	}
	return s.def, nil
}

func hasUpperOrDot(s string) bool {
	if strings.HasSuffix(s, ".") {
		return true
	}
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// Certificate returns the certificate a handshake naming serverName ("":
// no SNI) gets.
func (s *Set) Certificate(serverName string) *tls.Certificate {
	c, _ := s.certificate(&tls.ClientHelloInfo{ServerName: serverName})
	return c
}

// Entries are the loaded certificates, the default first. The caller
// must not change them.
func (s *Set) Entries() []Entry { return s.entries }

// Config is the set's TLS configuration for one handshake (shared: the
// caller must not change it).
func (s *Set) Config() *tls.Config { return s.config }

// Client is a verified client certificate's identity: what the request
// path (the access log, the identity layer) reads of it.
type Client struct {
	// Subject is the leaf's subject as an RFC 2253 string
	// (pkix.Name.String: "CN=alice,O=Example").
	Subject string
	// SHA256 is the hex SHA-256 of the leaf's DER bytes (lower case, 64
	// characters): the fingerprint that pins one certificate.
	SHA256 string
	// Leaf is the verified leaf certificate itself.
	Leaf *x509.Certificate
}

// ClientOf returns the client certificate identity of a TLS connection
// (a request's r.TLS), and false when the client sent none (or st is nil:
// clear text). Only a certificate that verified against client_auth's
// CAs is returned (crypto/tls fails the handshake of any other). It
// allocates (the subject and fingerprint strings): call it when the
// identity is needed, not on every request.
func ClientOf(st *tls.ConnectionState) (Client, bool) {
	if st == nil || len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 {
		return Client{}, false
	}
	leaf := st.VerifiedChains[0][0]
	sum := sha256.Sum256(leaf.Raw)
	return Client{Subject: leaf.Subject.String(), SHA256: hex.EncodeToString(sum[:]), Leaf: leaf}, true
}
