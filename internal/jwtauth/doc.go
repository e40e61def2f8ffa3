// Package jwtauth verifies JSON Web Tokens (RFC 7519) from OpenID
// providers for routes with `auth: jwt` (docs/authentication.md).
//
// The JOSE parts (compact serialisation, JWK parsing, signature
// verification) are github.com/go-jose/go-jose/v4; this package adds what
// a gateway must refuse before and around them (PreCheck: size, alg
// allow-list, header parameters that would let a token choose its own key)
// and the key set of an issuer (KeySet: fetched from the JWKS URI or the
// discovery document, cached within bounds, refreshed on an unknown kid at
// most once per interval, kept across outages and restarts in a file).
//
// Every refusal is an *Error whose Detail is one of a small fixed set; it
// never says which part of a signature check failed.
package jwtauth
