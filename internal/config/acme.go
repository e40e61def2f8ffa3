package config

import (
	"net"
	"net/url"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// The tls.acme block: certificates ordered from an ACME server (RFC 8555)
// for the names in domains, validated over HTTP-01 (a listener with
// redirect_https, or any clear-text listener on port 80 the CA reaches)
// or TLS-ALPN-01 (the TLS listener itself), kept with the account key
// under state_dir/acme and renewed renew_before their expiry. See
// docs/tls.md, "ACME".

// Bounds and defaults of this file's fields.
const (
	// DefaultACMEDirectory is ACMEConfig.Directory when omitted: Let's
	// Encrypt's production directory.
	DefaultACMEDirectory = "https://acme-v02.api.letsencrypt.org/directory"
	// DefaultACMERenewBefore is ACMEConfig.RenewBefore when omitted.
	DefaultACMERenewBefore = 30 * 24 * time.Hour
	// maxACMEDomains bounds tls.acme.domains (an order and a renewal timer
	// per name).
	maxACMEDomains = 100
	// The bounds of renew_before: the ACME client caps it at 30 days.
	minACMERenewBefore = time.Second
	maxACMERenewBefore = 30 * 24 * time.Hour
)

var acmeBlock = engine.NewBlock(
	engine.Field{Name: "email", Kind: engine.KindString, Doc: "the account's contact address; none when omitted",
		Bind: engine.At(func(a *ACMEConfig) *string { return &a.Email })},
	engine.Field{Name: "directory", Kind: engine.KindString, Def: DefaultACMEDirectory, Doc: "the ACME server's directory URL (https)",
		Check: checkACMEDirectory, Bind: engine.At(func(a *ACMEConfig) *string { return &a.Directory })},
	engine.Field{Name: "ca_file", Kind: engine.KindString, Doc: "PEM CA certificates the directory's own TLS certificate must chain to; the system roots when omitted",
		Check: checkReadable, Bind: engine.At(func(a *ACMEConfig) *string { return &a.CAFile })},
	engine.Field{Name: "domains", Kind: engine.KindList, Required: true, MinItems: 1, MaxItems: maxACMEDomains, Item: &engine.Field{Kind: engine.KindString},
		Doc:   "the DNS names certificates are ordered for (one certificate each; no wildcards: HTTP-01 and TLS-ALPN-01 cannot prove one)",
		Check: checkACMEDomains, Bind: engine.At(func(a *ACMEConfig) *[]string { return &a.Domains })},
	engine.Field{Name: "renew_before", Kind: engine.KindDuration, Def: DefaultACMERenewBefore, Doc: "how long before expiry a certificate is renewed; 1s to 720h",
		Check: engine.CheckDurationWithin(minACMERenewBefore, maxACMERenewBefore), Bind: engine.At(func(a *ACMEConfig) *time.Duration { return &a.RenewBefore })},
)

// ACMEConfig is `tls.acme`.
type ACMEConfig struct {
	// Email is the account's contact (`email`, optional).
	Email string
	// Directory is the ACME directory URL (`directory`, an https URL;
	// DefaultACMEDirectory when omitted).
	Directory string
	// CAFile, when set, holds the CA certificates the directory's TLS
	// certificate is verified against (`ca_file`; a private ACME server).
	CAFile string
	// Domains are the names ordered for (`domains`, 1 to 100 distinct
	// lower-case DNS names, no wildcard).
	Domains []string
	// RenewBefore is how long before its expiry a certificate is renewed
	// (`renew_before`, DefaultACMERenewBefore when omitted).
	RenewBefore time.Duration
}

var checkACMEDirectory = engine.CheckStr(func(p *engine.Parser, path string, n *yaml.Node, s *string) bool {
	u, err := url.Parse(*s)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		p.Add(n, path, "must be an https URL, got %s", engine.Quote(*s))
		return false
	}
	return true
})

// checkACMEDomains reads the bound list: each a DNS name (normalised to
// lower case), no wildcard, no repeat.
func checkACMEDomains(p *engine.Parser, path string, n *yaml.Node, ptr any) bool {
	items, ok := p.Sequence(path, n)
	if !ok {
		return false
	}
	out := ptr.(*[]string)
	seen := map[string]bool{}
	ok = true
	for i, item := range items {
		ip := engine.Index(path, i)
		s, sok := p.Str(ip, item)
		if !sok {
			ok = false
			continue
		}
		h, problem := normalizeMatchHost(s)
		switch {
		case problem != "":
		case h == "":
			problem = "must not be empty"
		case h[0] == '*':
			problem = "a wildcard cannot be proven over HTTP-01 or TLS-ALPN-01"
		case net.ParseIP(h) != nil:
			problem = "must be a DNS name, not an address"
		}
		if problem != "" {
			p.Add(item, ip, "invalid domain %s: %s", engine.Quote(s), problem)
			ok = false
			continue
		}
		if seen[h] {
			p.Add(item, ip, "domain %s is listed twice", engine.Quote(h))
			ok = false
			continue
		}
		seen[h] = true
		*out = append(*out, h)
	}
	return ok
}
