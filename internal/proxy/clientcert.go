package proxy

// Client certificates as credentials on the request path (auth:
// client_cert): the connection's verified client certificate (r.TLS's
// VerifiedChains, never PeerCertificates alone) is looked up in the app
// store's identity index (auth.Index.IdentifyClientCert: its SHA-256
// fingerprint, then its SAN URIs and DNS names, map lookups without
// allocation).

import (
	"crypto/tls"

	"github.com/levee-gw/levee/internal/auth"
)

// CertIdentities is what the request path asks of an identity index that
// also maps client certificates (auth.Index does).
type CertIdentities interface {
	IdentifyClientCert(st *tls.ConnectionState) (appID, mappingID string, err error)
}

// clientCertChallenge is the WWW-Authenticate of a 401 on an auth:
// client_cert route. No scheme is registered for TLS client certificates
// (the credential is the connection's, not a header's); a 401 must carry
// one (RFC 9110 section 15.5.2), so levee names its own, which tells a
// client what to fix.
var clientCertChallenge = []string{`ClientCertificate realm="levee"`}

// identifyClientCert returns the app id the verified client certificate
// of st maps to, or an *auth.Error (client_cert_missing, _unknown,
// _ambiguous).
func (s *Apps) identifyClientCert(st *tls.ConnectionState) (appID, mappingID string, err error) {
	if st == nil || len(st.VerifiedChains) == 0 {
		return "", "", auth.ErrClientCertMissing
	}
	var ci CertIdentities
	if s != nil {
		ci, _ = s.ids.(CertIdentities)
	}
	if ci == nil {
		return "", "", auth.ErrClientCertUnknown
	}
	return ci.IdentifyClientCert(st)
}
