package config

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/levee-gw/levee/internal/config/engine"
)

// The upstream TLS block (`upstreams.<name>.tls`): TLS, and mTLS with a
// client certificate, from levee to an upstream's endpoints. The files
// are read and parsed here, so `levee validate` refuses what `levee run`
// would: a missing or unreadable file, a CA file without a certificate, a
// certificate and key that do not parse or do not match.

// upstreamTLSVersions are min_version's values.
var upstreamTLSVersions = []string{"1.2", "1.3"}

// The field table of this file's block (fields.go says how a table is read).
var upstreamTLSBlock = engine.NewBlock(
	engine.Field{Name: "ca_file", Kind: engine.KindString, NonEmpty: true, Doc: "PEM bundle of the roots that verify the endpoints' certificates; the system roots when omitted",
		Check: checkReadable, Bind: engine.At(func(t *UpstreamTLS) *string { return &t.CAFile })},
	engine.Field{Name: "server_name", Kind: engine.KindString, NonEmpty: true, Doc: "name sent (SNI) and verified; the host of each endpoint's address when omitted",
		Check: engine.ProblemOf(serverNameProblem), Bind: engine.At(func(t *UpstreamTLS) *string { return &t.ServerName })},
	engine.Field{Name: "cert_file", Kind: engine.KindString, NonEmpty: true, Doc: "PEM client certificate (chain) for mTLS; with key_file",
		Check: checkReadable, Bind: engine.At(func(t *UpstreamTLS) *string { return &t.CertFile })},
	engine.Field{Name: "key_file", Kind: engine.KindString, NonEmpty: true, Doc: "PEM private key of cert_file", NotSecret: "a path; the key is read from the file",
		Check: checkReadable, Bind: engine.At(func(t *UpstreamTLS) *string { return &t.KeyFile })},
	engine.Field{Name: "insecure_skip_verify", Kind: engine.KindBool, Def: DefaultUpstreamTLSInsecureSkipVerify,
		Doc:  "accept any certificate (no verification; logged as a warning at start and reload)",
		Bind: engine.At(func(t *UpstreamTLS) *bool { return &t.InsecureSkipVerify })},
	engine.Field{Name: "min_version", Kind: engine.KindEither, Def: DefaultUpstreamTLSMinVersion, Doc: "lowest TLS version: 1.2 or 1.3",
		Either: []engine.Field{{Kind: engine.KindEnum, Enum: upstreamTLSVersions}, {Kind: engine.KindNumber, Flo: 1.2, Fhi: 1.3}}},
)

// UpstreamTLS makes every connection to an upstream's endpoints TLS
// (`upstreams.<name>.tls`, optional; nil: clear text). Certificates are
// verified unless InsecureSkipVerify. The files are read at parse time
// and again at every start and reload: new contents apply to new
// connections, requests in flight finish on theirs.
type UpstreamTLS struct {
	// CAFile is a PEM file of root certificates that verify the
	// endpoints (`ca_file`, a readable file holding at least one
	// certificate). Default "": the system roots.
	CAFile string
	// ServerName is the name sent in the handshake (SNI) and checked
	// against the endpoint's certificate (`server_name`, a DNS name or an
	// IP address). Default "": each endpoint's own host.
	ServerName string
	// CertFile is the PEM client certificate (and chain) sent when the
	// endpoint asks for one (`cert_file`, with key_file; mTLS). Default
	// "": none.
	CertFile string
	// KeyFile is CertFile's PEM private key (`key_file`, with cert_file).
	KeyFile string
	// InsecureSkipVerify accepts any certificate (`insecure_skip_verify`).
	// Default false. Allowed, and logged as a warning at start and reload;
	// exclusive with ca_file.
	InsecureSkipVerify bool
	// MinVersion is the lowest TLS version accepted (`min_version`, 1.2
	// or 1.3, written as a number or a string). Default
	// DefaultUpstreamTLSMinVersion ("1.2").
	MinVersion string
}

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultUpstreamTLSInsecureSkipVerify is UpstreamTLS.InsecureSkipVerify
	// when omitted.
	DefaultUpstreamTLSInsecureSkipVerify = false
	// DefaultUpstreamTLSMinVersion is UpstreamTLS.MinVersion when omitted.
	DefaultUpstreamTLSMinVersion = "1.2"
)

// TLSVersion returns MinVersion as a crypto/tls version constant.
func (t *UpstreamTLS) TLSVersion() uint16 {
	if t.MinVersion == "1.3" {
		return tls.VersionTLS13
	}
	return tls.VersionTLS12
}

func defaultUpstreamTLS() *UpstreamTLS {
	t := engine.WithDefaults(upstreamTLSBlock, &UpstreamTLS{})
	t.MinVersion = DefaultUpstreamTLSMinVersion
	return t
}

// upstreamTLS reads `upstreams.<name>.tls`; null reads as every default
// (TLS verified against the system roots).
func (p *parser) upstreamTLS(path string, n *yaml.Node) *UpstreamTLS {
	t := defaultUpstreamTLS()
	f, ok := p.Block(path, n, upstreamTLSBlock)
	if !ok {
		return t
	}
	if v := f["min_version"]; v != nil {
		// 1.3 is a YAML number, "1.3" a string: either is the version.
		if v.Kind == yaml.ScalarNode && (v.ShortTag() == "!!str" || v.ShortTag() == "!!float") && (v.Value == "1.2" || v.Value == "1.3") {
			t.MinVersion = v.Value
		} else if v.Kind != yaml.AliasNode {
			p.Add(v, engine.Key(path, "min_version"), "must be 1.2 or 1.3, got %s", engine.Describe(v))
		}
	}
	bad := p.Bind(f, n, path, upstreamTLSBlock, t)
	cert, key := f["cert_file"], f["key_file"]
	switch {
	case cert != nil && key == nil:
		p.Add(n, engine.Key(path, "key_file"), "required with cert_file")
	case key != nil && cert == nil:
		p.Add(n, engine.Key(path, "cert_file"), "required with key_file")
	case cert != nil && !bad["cert_file"] && !bad["key_file"]:
		p.checkKeyPair(path, cert, key, t.CertFile, t.KeyFile)
	}
	if v := f["ca_file"]; v != nil && !bad["ca_file"] {
		if problem := caFileProblem(t.CAFile); problem != "" {
			p.Add(v, engine.Key(path, "ca_file"), "%s", problem)
		}
	}
	if t.InsecureSkipVerify && f["ca_file"] != nil && !bad["insecure_skip_verify"] {
		p.Add(f["insecure_skip_verify"], engine.Key(path, "insecure_skip_verify"), "true skips the verification ca_file is for; set one of them")
	}
	return t
}

// caFileProblem returns what is wrong with a readable CA file, or "".
func caFileProblem(name string) string {
	data, err := os.ReadFile(name)
	if err != nil {
		return "cannot read " + engine.QuoteMax(name, maxPathShown) + ": " + pathErrCause(err).Error()
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return "no PEM certificate in " + engine.QuoteMax(name, maxPathShown)
	}
	return ""
}

// checkKeyPair reports a certificate or key file that does not parse, or
// a pair that does not match, at the field at fault.
func (p *parser) checkKeyPair(path string, certNode, keyNode *yaml.Node, certFile, keyFile string) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		p.Add(certNode, engine.Key(path, "cert_file"), "cannot read %s: %v", engine.QuoteMax(certFile, maxPathShown), pathErrCause(err))
		return
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		p.Add(keyNode, engine.Key(path, "key_file"), "cannot read %s: %v", engine.QuoteMax(keyFile, maxPathShown), pathErrCause(err))
		return
	}
	if problem := pemCertProblem(certPEM); problem != "" {
		p.Add(certNode, engine.Key(path, "cert_file"), "%s in %s", problem, engine.QuoteMax(certFile, maxPathShown))
		return
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		p.Add(keyNode, engine.Key(path, "key_file"), "%s is not the private key of cert_file: %s",
			engine.QuoteMax(keyFile, maxPathShown), strings.TrimPrefix(err.Error(), "tls: "))
	}
}

// pemCertProblem returns what is wrong with a PEM certificate file's
// contents, or "": its first block must be a certificate that parses.
func pemCertProblem(data []byte) string {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "CERTIFICATE" {
		return "no PEM certificate"
	}
	if _, err := x509.ParseCertificate(b.Bytes); err != nil {
		return "a certificate that does not parse (" + err.Error() + ")"
	}
	return ""
}

// serverNameProblem returns what is wrong with a TLS server name, or "": a
// DNS name (letters, digits, "-", "." and "_", at most 253 bytes) or an
// IP address.
func serverNameProblem(s string) string {
	const rule = "must be a DNS name or an IP address"
	if net.ParseIP(s) != nil {
		return ""
	}
	if len(s) > 253 || strings.HasPrefix(s, ".") || strings.HasSuffix(s, ".") || strings.Contains(s, "..") {
		return rule
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return rule
		}
	}
	return ""
}
