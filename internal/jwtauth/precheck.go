package jwtauth

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
)

// MaxHeaderBytes bounds the decoded JOSE header PreCheck reads; a real
// header (alg, kid, typ) is under 200 bytes.
const MaxHeaderBytes = 2048

// Header is what PreCheck learned from a token's protected header.
type Header struct {
	Alg string
	Kid string
}

// BearerToken returns the token of an `Authorization: Bearer` header.
func BearerToken(h http.Header) (string, error) {
	v := h.Get("Authorization")
	const p = "Bearer "
	if len(v) <= len(p) || !strings.EqualFold(v[:len(p)], p) {
		return "", errMissing
	}
	return strings.TrimSpace(v[len(p):]), nil
}

// PreCheck refuses, before the JOSE library parses anything, what no
// accepted token may be: over maxBytes (first, on the length alone), not
// three base64url parts, a header that is not a JSON object, an alg not
// in allowed (never "none" nor HS*: allowed holds only the issuer's
// asymmetric algorithms), and the header parameters that let a token name
// or carry its own key or demand extensions levee does not implement:
// jku, x5u, jwk, x5c, crit (any crit is unknown to levee).
func PreCheck(token string, maxBytes int, allowed []string) (Header, error) {
	var h Header
	if len(token) > maxBytes {
		return h, errTooLarge
	}
	dot := strings.IndexByte(token, '.')
	if dot <= 0 {
		return h, errMalformed
	}
	rest := token[dot+1:]
	dot2 := strings.IndexByte(rest, '.')
	if dot2 < 0 || strings.IndexByte(rest[dot2+1:], '.') >= 0 {
		return h, errMalformed
	}
	if dot2 == 0 || dot2 == len(rest)-1 {
		return h, errMalformed // no payload or no signature: never skipped
	}
	seg := token[:dot]
	if base64.RawURLEncoding.DecodedLen(len(seg)) > MaxHeaderBytes {
		return h, errMalformed
	}
	raw, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return h, errMalformed
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return h, errMalformed
	}
	for _, k := range forbiddenHeaders {
		if _, ok := fields[k]; ok {
			return h, errInvalid
		}
	}
	if err := json.Unmarshal(fields["alg"], &h.Alg); err != nil {
		return h, errMalformed
	}
	if !algAllowed(h.Alg, allowed) {
		return h, errInvalid
	}
	if k, ok := fields["kid"]; ok {
		if err := json.Unmarshal(k, &h.Kid); err != nil {
			return h, errMalformed
		}
	}
	return h, nil
}

// forbiddenHeaders are refused in any token (RFC 8725 section 3.1: the
// key comes from the issuer's key set, never from the token). x5t, a
// thumbprint some providers send beside kid, names no key and is ignored.
var forbiddenHeaders = []string{"jku", "x5u", "jwk", "x5c", "crit"}

func algAllowed(alg string, allowed []string) bool {
	if alg == "" || strings.EqualFold(alg, "none") || strings.HasPrefix(strings.ToUpper(alg), "HS") {
		return false
	}
	for _, a := range allowed {
		if a == alg {
			return true
		}
	}
	return false
}

// Algorithms are the signature algorithms an issuer may allow: RSA
// (RS*, PS*), ECDSA (ES*) and EdDSA. HS* (a shared secret) is not
// supported, so a public key can never be used as an HMAC secret.
var Algorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
