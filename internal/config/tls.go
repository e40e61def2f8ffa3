package config

import (
	"errors"
	"strings"

	"github.com/levee-gw/levee/internal/certset"
	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// The tls block: the data-plane listener's certificates (one pair, and
// more chosen by SNI), its minimum version and cipher suites, and client
// certificates. The reader loads every file as the gateway will
// (certset.Load), so `levee validate` refuses what `levee run` refuses:
// an unreadable pair, a key that does not match, two certificates with a
// name in common, an insecure cipher suite, a CA file without a
// certificate.

// The field tables of this file's blocks (fields.go says how a table is read).
var (
	tlsCertificateBlock = engine.NewBlock(
		engine.Field{Name: "cert_file", Kind: engine.KindString, Required: true, Doc: "PEM certificate chain; its names (DNS SANs, else the common name) choose it by SNI",
			Check: checkReadable, Bind: engine.At(func(p *TLSCertificate) *string { return &p.CertFile })},
		engine.Field{Name: "key_file", Kind: engine.KindString, Required: true, Doc: "PEM private key of cert_file", NotSecret: "a path; the key is read from the file",
			Check: checkReadable, Bind: engine.At(func(p *TLSCertificate) *string { return &p.KeyFile })},
	)
	tlsClientAuthBlock = engine.NewBlock(
		engine.Field{Name: "ca_file", Kind: engine.KindString, Required: true, Doc: "PEM CA certificates a client certificate must chain to",
			Check: checkReadable, Bind: engine.At(func(a *TLSClientAuth) *string { return &a.CAFile })},
		engine.Field{Name: "mode", Kind: engine.KindEnum, Enum: tlsClientAuthModes, Def: DefaultTLSClientAuthMode,
			Doc:  "require: a client without a valid certificate fails the handshake; request: a certificate is verified if sent (an invalid one fails the handshake)",
			Bind: engine.At(func(a *TLSClientAuth) *string { return &a.Mode })},
	)
	tlsBlock = engine.NewBlock(
		engine.Field{Name: "cert_file", Kind: engine.KindString, Doc: "PEM certificate chain of the default certificate; with key_file, or tls.certificates",
			Check: checkReadable, Bind: engine.At(func(t *TLS) *string { return &t.CertFile })},
		engine.Field{Name: "key_file", Kind: engine.KindString, Doc: "PEM private key of cert_file", NotSecret: "a path; the key is read from the file",
			Check: checkReadable, Bind: engine.At(func(t *TLS) *string { return &t.KeyFile })},
		engine.Field{Name: "certificates", Kind: engine.KindList, MinItems: 1, MaxItems: certset.MaxCertificates, Item: &engine.Field{Kind: engine.KindBlock, Sub: tlsCertificateBlock},
			Doc: "more certificates, chosen by SNI (exact name, then wildcard, then the default: cert_file, else the first); no name in two"},
		engine.Field{Name: "min_version", Kind: engine.KindEnum, Enum: tlsVersions, Def: DefaultTLSMinVersion,
			Doc:  "lowest TLS version a client may use",
			Bind: engine.At(func(t *TLS) *string { return &t.MinVersion })},
		engine.Field{Name: "cipher_suites", Kind: engine.KindList, MinItems: 1, MaxItems: maxTLSCipherSuites, Item: &engine.Field{Kind: engine.KindString},
			Doc: "TLS 1.2 cipher suites allowed, crypto/tls names; insecure ones refused; Go's defaults when omitted"},
		engine.Field{Name: "acme", Kind: engine.KindBlock, Sub: acmeBlock, Doc: "order certificates for domains from an ACME server (acme.go); with cert_file or certificates too, those serve the names acme.domains does not list",
			Reload: engine.Restart, // the ACME client is built at start (internal/gateway newACME)
			Bind:   engine.Opt(func(t *TLS) **ACMEConfig { return &t.ACME }, func() *ACMEConfig { return engine.WithDefaults(acmeBlock, &ACMEConfig{}) })},
		engine.Field{Name: "client_auth", Kind: engine.KindBlock, Sub: tlsClientAuthBlock, Doc: "ask clients for certificates signed by ca_file; off when omitted",
			Bind: engine.Opt(func(t *TLS) **TLSClientAuth { return &t.ClientAuth }, func() *TLSClientAuth {
				return engine.WithDefaults(tlsClientAuthBlock, &TLSClientAuth{})
			})},
	)
)

// TLS is the data-plane listener's TLS (`tls`). Every file must exist and
// be readable when the configuration is parsed, and is loaded then as the
// gateway will load it (certset.Load); a reload reads them all again.
type TLS struct {
	// CertFile is the default certificate's PEM chain (`cert_file`): with
	// KeyFile, required unless Certificates is set. A relative path is
	// relative to the process's working directory.
	CertFile string
	// KeyFile is CertFile's PEM private key (`key_file`).
	KeyFile string
	// Certificates are more certificates chosen by SNI (`certificates`,
	// at most certset.MaxCertificates). Each answers for its leaf's DNS
	// SANs (the common name when it has none), exact or a one-label
	// wildcard ("*.example.com"); a handshake gets the exact name's, then
	// the wildcard's, then the default: CertFile's, else Certificates[0]'s.
	// No name may be in two certificates (CertFile's included).
	Certificates []TLSCertificate
	// MinVersion is the lowest TLS version accepted (`min_version`):
	// TLSVersion12 (the default) or TLSVersion13.
	MinVersion string
	// CipherSuites are the TLS 1.2 suites allowed (`cipher_suites`,
	// crypto/tls names); nil: Go's defaults. Insecure suites, TLS 1.3
	// suites and any list with MinVersion 1.3 are refused.
	CipherSuites []string
	// ClientAuth, when set, asks clients for certificates (`client_auth`).
	ClientAuth *TLSClientAuth
	// ACME, when set, orders certificates for its domains (`acme`,
	// acme.go); CertFile and Certificates are then optional.
	ACME *ACMEConfig
}

// HasFiles reports whether t names certificate files (cert_file or
// certificates); without, its certificates all come from ACME.
func (t *TLS) HasFiles() bool { return t.CertFile != "" || len(t.Certificates) > 0 }

// TLSCertificate is one of TLS.Certificates.
type TLSCertificate struct {
	CertFile string // `cert_file`, required
	KeyFile  string // `key_file`, required
}

// TLSClientAuth is the client certificate rule (`tls.client_auth`).
type TLSClientAuth struct {
	// CAFile holds the PEM CA certificates a client chain must lead to
	// (`ca_file`, required).
	CAFile string
	// Mode is TLSClientAuthRequire (the default: a client without a
	// certificate that verifies fails the handshake) or
	// TLSClientAuthRequest (a certificate is asked for and verified if
	// sent; one that does not verify fails the handshake too).
	Mode string
}

// The accepted values of TLS.MinVersion and TLSClientAuth.Mode.
const (
	TLSVersion12         = certset.Version12
	TLSVersion13         = certset.Version13
	TLSClientAuthRequest = certset.ModeRequest
	TLSClientAuthRequire = certset.ModeRequire
)

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultTLSMinVersion is TLS.MinVersion when omitted.
	DefaultTLSMinVersion = TLSVersion12
	// DefaultTLSClientAuthMode is TLSClientAuth.Mode when omitted: the
	// stricter of the two.
	DefaultTLSClientAuthMode = TLSClientAuthRequire
)

// maxTLSCipherSuites bounds tls.cipher_suites (crypto/tls has fewer
// secure TLS 1.2 suites than this).
const maxTLSCipherSuites = 32

var (
	tlsVersions        = []string{TLSVersion12, TLSVersion13}
	tlsClientAuthModes = []string{TLSClientAuthRequire, TLSClientAuthRequest}
)

// Spec is what the gateway loads (certset.Load) for t.
func (t *TLS) Spec() certset.Spec {
	s := certset.Spec{Default: certset.Pair{CertFile: t.CertFile, KeyFile: t.KeyFile}, MinVersion: t.MinVersion, CipherSuites: t.CipherSuites}
	for _, c := range t.Certificates {
		s.Certificates = append(s.Certificates, certset.Pair(c))
	}
	if a := t.ClientAuth; a != nil {
		s.ClientAuth = &certset.ClientAuth{CAFile: a.CAFile, Mode: a.Mode}
	}
	return s
}

// tls reads `tls` (n: its value) into c.TLS.
func (p *parser) tls(c *Config, n *yaml.Node) { c.TLS = p.tlsAt("tls", n) }

// tlsAt reads a tls block at path (`tls`, `listeners[i].tls`); nil when
// it is not a mapping. Errors are added to p.
func (p *parser) tlsAt(path string, n *yaml.Node) *TLS {
	f, ok := p.Block(path, n, tlsBlock)
	if !ok {
		return nil
	}
	t := engine.WithDefaults(tlsBlock, &TLS{})
	bad := p.Bind(f, n, path, tlsBlock, t)
	ok = bad == nil
	if v := f["certificates"]; v != nil {
		ok = p.tlsCertificates(path, t, v) && ok
	}
	if v := f["cipher_suites"]; v != nil {
		ok = p.tlsCipherSuites(path, t, v) && ok
	}
	certV, keyV := f["cert_file"], f["key_file"]
	switch {
	case certV == nil && keyV == nil && f["certificates"] == nil && f["acme"] != nil:
		// every certificate from ACME: no files to load (only the policy)
	case certV == nil && keyV == nil && f["certificates"] == nil:
		p.Add(n, path+".cert_file", "required unless %s.certificates or %s.acme is set", path, path)
		p.Add(n, path+".key_file", "required unless %s.certificates or %s.acme is set", path, path)
		ok = false
	case certV != nil && keyV == nil:
		p.Add(n, path+".key_file", "required with %s.cert_file", path)
		ok = false
	case certV == nil && keyV != nil:
		p.Add(n, path+".cert_file", "required with %s.key_file", path)
		ok = false
	}
	if !ok || !t.HasFiles() {
		return t // the files are loaded only once every field is valid
	}
	if _, err := certset.Load(t.Spec()); err != nil {
		var errs certset.Errors
		if !errors.As(err, &errs) {
			p.Add(n, path, "%v", err)
			return t
		}
		for _, e := range errs {
			p.Add(tlsNode(f, n, e.Field), path+"."+e.Field, "%s", e.Msg)
		}
	}
	return t
}

// tlsNode is the node a certset.Error's field names (for its position):
// the field's own when it is set, else the tls block's.
func tlsNode(f map[string]*yaml.Node, n *yaml.Node, field string) *yaml.Node {
	key, rest, _ := strings.Cut(field, "[")
	key, _, _ = strings.Cut(key, ".")
	v := f[key]
	if v == nil {
		return n
	}
	if rest != "" && v.Kind == yaml.SequenceNode {
		i := 0
		for j := 0; j < len(rest) && rest[j] >= '0' && rest[j] <= '9'; j++ {
			i = i*10 + int(rest[j]-'0')
		}
		if i < len(v.Content) {
			return v.Content[i]
		}
	}
	return v
}

// tlsCertificates reads `tls.certificates` into t.Certificates, reporting
// whether every item was valid.
func (p *parser) tlsCertificates(tlsPath string, t *TLS, n *yaml.Node) bool {
	path := tlsPath + ".certificates"
	items, ok := p.Sequence(path, n)
	if !ok {
		return false
	}
	switch {
	case len(items) == 0:
		p.Add(n, path, "must list at least one certificate (omit it for cert_file alone)")
		return false
	case len(items) > certset.MaxCertificates:
		p.Add(n, path, "at most %d certificates, got %d", certset.MaxCertificates, len(items))
		return false
	}
	ok = true
	for i, item := range items {
		ip := engine.Index(path, i)
		if engine.IsNull(item) || item.Kind != yaml.MappingNode {
			p.Add(item, ip, "must be a mapping {cert_file, key_file}, got %s", engine.Describe(item))
			ok = false
			continue
		}
		f, fok := p.Block(ip, item, tlsCertificateBlock)
		if !fok {
			ok = false
			continue
		}
		var pair TLSCertificate
		if p.Bind(f, item, ip, tlsCertificateBlock, &pair) != nil {
			ok = false
			continue
		}
		t.Certificates = append(t.Certificates, pair)
	}
	return ok
}

// tlsCipherSuites reads `tls.cipher_suites` into t.CipherSuites; each
// name is checked by certset.Load.
func (p *parser) tlsCipherSuites(tlsPath string, t *TLS, n *yaml.Node) bool {
	path := tlsPath + ".cipher_suites"
	items, ok := p.Sequence(path, n)
	if !ok {
		return false
	}
	switch {
	case len(items) == 0:
		p.Add(n, path, "must list at least one suite (omit it for Go's defaults)")
		return false
	case len(items) > maxTLSCipherSuites:
		p.Add(n, path, "at most %d suites, got %d", maxTLSCipherSuites, len(items))
		return false
	}
	ok = true
	for i, item := range items {
		s, sok := p.Str(engine.Index(path, i), item)
		if !sok {
			ok = false
			continue
		}
		t.CipherSuites = append(t.CipherSuites, s)
	}
	return ok
}
