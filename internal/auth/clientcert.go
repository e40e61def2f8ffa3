package auth

// Client certificates as credentials (auth: client_cert): a verified TLS
// client certificate mapped to an app by its SHA-256 fingerprint, a DNS
// name or a URI (SPIFFE ID) among its subject alternative names. The
// app store keeps the mappings (CertMapping), canonicalised by
// CanonicalCertValue; the identity index holds them (Index.WithCerts) and
// the request path asks it (Index.IdentifyClientCert) with the request's
// TLS state. Only the verified chains count: a certificate crypto/tls
// did not verify against tls.client_auth's CAs identifies no one.

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
)

// CertKind is what a mapping compares of a certificate.
type CertKind string

// The kinds of a certificate mapping.
const (
	// CertFingerprint pins one certificate: the SHA-256 of its DER bytes.
	CertFingerprint CertKind = "fingerprint_sha256"
	// CertSANDNS matches a DNS name among the leaf's subject alternative
	// names (case-insensitive; no wildcards).
	CertSANDNS CertKind = "san_dns"
	// CertSANURI matches a URI among the leaf's subject alternative names
	// (a SPIFFE ID such as spiffe://example.org/ns/prod/sa/orders).
	CertSANURI CertKind = "san_uri"
)

// CertKinds are the kinds in the order they are tried: the fingerprint
// (one certificate) first, then the names.
var CertKinds = []CertKind{CertFingerprint, CertSANURI, CertSANDNS}

// The reasons a client certificate identifies no app (401).
const (
	// ReasonClientCertMissing: the connection carries no verified client
	// certificate (none sent on a listener with client_auth mode request,
	// or a request over clear text).
	ReasonClientCertMissing Reason = "client_cert_missing"
	// ReasonClientCertUnknown: a verified certificate that no mapping
	// names.
	ReasonClientCertUnknown Reason = "client_cert_unknown"
	// ReasonClientCertAmbiguous: no fingerprint mapping, and the
	// certificate's names map to two different apps.
	ReasonClientCertAmbiguous Reason = "client_cert_ambiguous"
)

// Sentinels of the client-certificate reasons, for errors.Is.
var (
	ErrClientCertMissing   = &Error{Reason: ReasonClientCertMissing}
	ErrClientCertUnknown   = &Error{Reason: ReasonClientCertUnknown}
	ErrClientCertAmbiguous = &Error{Reason: ReasonClientCertAmbiguous}
)

// Bounds of certificate mappings and of what a certificate costs.
const (
	// MaxCertDNSLen and MaxCertURILen bound a mapping's name.
	MaxCertDNSLen = 253
	MaxCertURILen = 1024
	// maxSANs bounds the names of each kind examined in one certificate
	// (a CA may issue one with thousands; the first 64 of each count).
	maxSANs = 64
)

// CertMapping is one certificate mapping of an app, as the app store
// keeps it: Value is canonical (CanonicalCertValue).
type CertMapping struct {
	AppID string
	// ID names the mapping in the admin API and in logs.
	ID    string
	Kind  CertKind
	Value string
}

// CanonicalCertValue checks a mapping's value of kind and returns its
// canonical form, the one the index compares: a fingerprint as 64
// lower-case hex digits (either case, and the colon-separated form of
// `openssl x509 -fingerprint -sha256`, accepted); a DNS name in lower case
// (letters, digits, '-' and '_' in labels of 1 to 63, no wildcard, no
// trailing dot, at most 253 bytes); a URI as scheme://host/path with the
// scheme and host in lower case, no user, query or fragment, at most 1024
// bytes. The error says what is wrong, without echoing more than 64 bytes.
func CanonicalCertValue(kind CertKind, v string) (string, error) {
	switch kind {
	case CertFingerprint:
		return canonicalFingerprint(v)
	case CertSANDNS:
		return canonicalDNS(v)
	case CertSANURI:
		return canonicalURI(v)
	}
	return "", fmt.Errorf("kind must be %q, %q or %q", CertFingerprint, CertSANDNS, CertSANURI)
}

func canonicalFingerprint(v string) (string, error) {
	const want = "must be the certificate's SHA-256: 64 hex digits (or 32 colon-separated pairs)"
	s := v
	if len(v) == 95 {
		var b strings.Builder
		for i := 0; i < len(v); i++ {
			if i%3 == 2 {
				if v[i] != ':' {
					return "", fmt.Errorf("%s, got %d characters", want, len(v))
				}
				continue
			}
			b.WriteByte(v[i])
		}
		s = b.String()
	}
	if len(s) != 64 {
		return "", fmt.Errorf("%s, got %d characters", want, len(v))
	}
	var d [32]byte
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return "", fmt.Errorf("%s: not hex", want)
	}
	return hex.EncodeToString(d[:]), nil
}

func canonicalDNS(v string) (string, error) {
	if v == "" || len(v) > MaxCertDNSLen {
		return "", fmt.Errorf("must be a DNS name of 1 to %d bytes, got %d", MaxCertDNSLen, len(v))
	}
	s := strings.ToLower(v)
	for i, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 {
			return "", fmt.Errorf("label %d must be 1 to 63 bytes (no empty label, no trailing dot)", i+1)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return "", fmt.Errorf("label %d must not begin or end with '-'", i+1)
		}
		for j := 0; j < len(label); j++ {
			c := label[j]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				if c == '*' {
					return "", fmt.Errorf("must be one name, not a wildcard (map the certificate by fingerprint)")
				}
				return "", fmt.Errorf("label %d holds %q: only letters, digits, '-' and '_'", i+1, string(rune(c)))
			}
		}
	}
	return s, nil
}

func canonicalURI(v string) (string, error) {
	if v == "" || len(v) > MaxCertURILen {
		return "", fmt.Errorf("must be a URI of 1 to %d bytes, got %d", MaxCertURILen, len(v))
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c <= 0x20 || c >= 0x7f {
			return "", fmt.Errorf("must be ASCII without spaces or control bytes (percent-encode them)")
		}
	}
	u, err := url.Parse(v)
	if err != nil {
		if ue, ok := err.(*url.Error); ok {
			err = ue.Err // without the value, which may be long
		}
		return "", fmt.Errorf("must be a URI: %v", err)
	}
	switch {
	case u.Scheme == "" || u.Host == "":
		return "", fmt.Errorf("must be an absolute URI with a host, as spiffe://trust-domain/path")
	case u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(v, "#"):
		return "", fmt.Errorf("must be scheme://host/path without user, query or fragment")
	}
	for i := 0; i < len(u.Host); i++ {
		// Letters, digits, '.', '-', '_' (a SPIFFE trust domain), and a port
		// or an IPv6 literal; no percent-encoding.
		if c := u.Host[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte(".-_:[]", c) >= 0) {
			return "", fmt.Errorf("host must be letters, digits, '.', '-', '_' (and a port), not percent-encoded")
		}
	}
	c := u.Scheme + "://" + strings.ToLower(u.Host) + u.EscapedPath()
	// The canonical form must parse back to the same parts, or a
	// certificate could never match it.
	if back, err := url.Parse(c); err != nil || back.Path != u.Path || back.Host != strings.ToLower(u.Host) || back.Scheme != u.Scheme {
		return "", fmt.Errorf("must be a URI whose path survives a round trip")
	}
	return c, nil
}

// certIndex maps certificate fingerprints and SANs to mappings (indexes
// into entries). Immutable once built.
type certIndex struct {
	byFingerprint map[[32]byte]int32
	byDNS         map[string]int32
	// byURIPath: a URI's path to the mappings with that path, whose scheme
	// and host are compared then (so a certificate's URI is matched
	// without building a string).
	byURIPath map[string][]uriEntry
	entries   []CertMapping
}

type uriEntry struct {
	scheme, host string
	n            int32
}

// certKey is a mapping's value as the index keys it, for conflicts.
type certKey struct {
	kind  CertKind
	value string
}

// WithCerts returns a copy of x that also maps client certificates by
// certs (values canonical: CanonicalCertValue; one that is not is left
// out and reported). A value two apps map admits neither and is reported
// in Conflicts, as a key digest two apps hold. x itself is not changed.
func (x *Index) WithCerts(certs []CertMapping) *Index {
	var c Index
	if x != nil {
		c = *x
	}
	c.conflicts = append([]Conflict(nil), c.conflicts...)
	owner := make(map[certKey]string, len(certs))
	ambiguous := map[certKey]bool{}
	for _, m := range certs {
		k := certKey{m.Kind, m.Value}
		switch o, ok := owner[k]; {
		case !ok:
			owner[k] = m.AppID
		case o != m.AppID:
			ambiguous[k] = true
			c.conflicts = append(c.conflicts, Conflict{What: "certificate " + string(m.Kind), Key: m.ID, Apps: [2]string{o, m.AppID}})
		}
	}
	ci := &certIndex{byFingerprint: map[[32]byte]int32{}, byDNS: map[string]int32{}, byURIPath: map[string][]uriEntry{}}
	seen := map[certKey]bool{}
	for _, m := range certs {
		k := certKey{m.Kind, m.Value}
		if ambiguous[k] || seen[k] {
			continue
		}
		if canon, err := CanonicalCertValue(m.Kind, m.Value); err != nil || canon != m.Value {
			c.conflicts = append(c.conflicts, Conflict{What: "certificate " + string(m.Kind) + " not canonical", Key: m.ID, Apps: [2]string{m.AppID, m.AppID}})
			continue
		}
		seen[k] = true
		n := int32(len(ci.entries))
		switch m.Kind {
		case CertFingerprint:
			var d [32]byte
			hex.Decode(d[:], []byte(m.Value)) // canonical: 64 hex digits
			ci.byFingerprint[d] = n
		case CertSANDNS:
			ci.byDNS[m.Value] = n
		case CertSANURI:
			u, _ := url.Parse(m.Value) // canonical: parses
			ci.byURIPath[u.Path] = append(ci.byURIPath[u.Path], uriEntry{scheme: u.Scheme, host: u.Host, n: n})
		}
		ci.entries = append(ci.entries, m)
	}
	c.certs = ci
	return &c
}

// CertLen returns the number of certificate mappings the index admits.
func (x *Index) CertLen() int {
	if x == nil || x.certs == nil {
		return 0
	}
	return len(x.certs.entries)
}

// IdentifyClientCert returns the app and mapping that the verified
// client certificate of st maps to: its fingerprint's mapping when there
// is one; else the one app its URI and DNS names map to (the first 64 of
// each). Only st.VerifiedChains is read: crypto/tls fills it only for a
// certificate that chained to client_auth's CAs, so a certificate sent
// but not verified (PeerCertificates alone) is client_cert_missing.
// Errors: ErrClientCertMissing, ErrClientCertUnknown,
// ErrClientCertAmbiguous. It does not allocate (the fingerprint is
// computed on the stack).
func (x *Index) IdentifyClientCert(st *tls.ConnectionState) (appID, mappingID string, err error) {
	if st == nil || len(st.VerifiedChains) == 0 || len(st.VerifiedChains[0]) == 0 || st.VerifiedChains[0][0] == nil {
		return "", "", ErrClientCertMissing
	}
	if x == nil || x.certs == nil {
		return "", "", ErrClientCertUnknown
	}
	ci := x.certs
	leaf := st.VerifiedChains[0][0]
	if len(ci.byFingerprint) > 0 {
		if n, ok := ci.byFingerprint[sha256.Sum256(leaf.Raw)]; ok {
			e := &ci.entries[n]
			return e.AppID, e.ID, nil
		}
	}
	found := int32(-1)
	match := func(n int32) bool {
		if found >= 0 && ci.entries[found].AppID != ci.entries[n].AppID {
			return false
		}
		found = n
		return true
	}
	if len(ci.byURIPath) > 0 {
		for i, u := range leaf.URIs {
			if i == maxSANs {
				break
			}
			if u == nil || u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
				continue
			}
			for _, e := range ci.byURIPath[u.Path] {
				if e.scheme == u.Scheme && strings.EqualFold(e.host, u.Host) && !match(e.n) {
					return "", "", ErrClientCertAmbiguous
				}
			}
		}
	}
	if len(ci.byDNS) > 0 {
		for i, name := range leaf.DNSNames {
			if i == maxSANs {
				break
			}
			if n, ok := lookupFold(ci.byDNS, name); ok && !match(n) {
				return "", "", ErrClientCertAmbiguous
			}
		}
	}
	if found < 0 {
		return "", "", ErrClientCertUnknown
	}
	e := &ci.entries[found]
	return e.AppID, e.ID, nil
}

// lookupFold looks name up in m (whose keys are lower case) ignoring
// ASCII case, without allocating.
func lookupFold(m map[string]int32, name string) (int32, bool) {
	if len(name) > MaxCertDNSLen {
		return 0, false
	}
	var buf [MaxCertDNSLen]byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[i] = c
	}
	n, ok := m[string(buf[:len(name)])]
	return n, ok
}
