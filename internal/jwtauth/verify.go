package jwtauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"errors"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Issuer verifies the tokens of one configured issuer
// (identity.jwt_issuers.<name>).
type Issuer struct {
	Name string
	// Issuer is the iss every token must carry.
	Issuer string
	// Audiences: a token's aud must hold one of them.
	Audiences []string
	// Algorithms is the allow-list (a subset of Algorithms).
	Algorithms []string
	// ClockSkew is allowed on exp, nbf and iat.
	ClockSkew time.Duration
	// MaxTokenBytes bounds the token, checked before any parsing.
	MaxTokenBytes int
	// AppClaim names the claim holding the app's id; or App, one fixed
	// app for every token of the issuer.
	AppClaim, App string
	// ScopesClaim, when set, names the claim holding the scopes (a
	// space-separated string, or an array of strings).
	ScopesClaim string
	// Claims names the claims kept in Identity.Claims (claims.go): the
	// ones the route's data parameters bind. Empty: none is read, at no
	// cost.
	Claims []string
	Keys   *KeySet
	// Cache configures the verification cache (cache.go); MaxEntries 0:
	// none.
	Cache CacheOptions

	algs  []jose.SignatureAlgorithm
	cache *verifyCache
}

// Init prepares is for Verify; call it once, before any Verify.
func (is *Issuer) Init() *Issuer {
	is.algs = make([]jose.SignatureAlgorithm, 0, len(is.Algorithms))
	for _, a := range is.Algorithms {
		is.algs = append(is.algs, jose.SignatureAlgorithm(a))
	}
	is.cache = newVerifyCache(is.Cache)
	return is
}

// Identity is what a verified token says.
type Identity struct {
	App     string
	Subject string
	// Scopes is nil when the issuer has no ScopesClaim.
	Scopes []string
	// Claims holds those of the issuer's Claims the token carries as a
	// string or a number (claims.go); nil when the issuer keeps none.
	Claims map[string]string
}

// HasScope reports whether s is among the token's scopes.
func (id *Identity) HasScope(s string) bool {
	for _, v := range id.Scopes {
		if v == s {
			return true
		}
	}
	return false
}

// MaxScopes bounds the scopes kept from one token.
const MaxScopes = 256

// Verify checks token at now: PreCheck, then the signature with the key
// its kid names in the issuer's key set (the JOSE library refuses a key
// whose type does not fit the alg), then iss, aud, exp (required), nbf
// and iat with the clock skew. Failures are *Error. With the cache on, a
// token verified before is answered from it (cache.go). The Identity's
// Scopes and Claims may be shared between calls: read them, never write.
func (is *Issuer) Verify(ctx context.Context, token string, now time.Time) (Identity, error) {
	if is.cache == nil {
		id, _, err := is.verify(ctx, token, now)
		return id, err
	}
	h := tokenHash(token)
	if id, ok := is.cached(ctx, &h, now); ok {
		return id, nil
	}
	id, e, err := is.verify(ctx, token, now)
	if err == nil {
		e.id = id
		e.until = now.Add(is.cache.ttl)
		is.cache.put(&h, e)
	}
	return id, err
}

// verify is Verify without the cache; on success it also returns the
// entry to cache (all but id and until).
func (is *Issuer) verify(ctx context.Context, token string, now time.Time) (Identity, *cacheEntry, error) {
	var id Identity
	h, err := PreCheck(token, is.MaxTokenBytes, is.Algorithms)
	if err != nil {
		return id, nil, err
	}
	tok, err := jwt.ParseSigned(token, is.algs)
	if err != nil || len(tok.Headers) != 1 {
		return id, nil, errMalformed
	}
	key, have := is.Keys.Lookup(ctx, h.Kid)
	if !have {
		return id, nil, errKeyUnavailable
	}
	if key == nil || !keyFits(key, h.Alg) {
		return id, nil, errInvalid
	}
	var claims jwt.Claims
	extra := map[string]any{}
	dest := []any{&claims, &extra}
	var kept keptClaims
	if len(is.Claims) > 0 {
		kept.want = is.Claims
		dest = append(dest, &kept)
	}
	if err := tok.Claims(key.Key, dest...); err != nil {
		return id, nil, errInvalid
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{Issuer: is.Issuer, AnyAudience: is.Audiences, Time: now}, is.ClockSkew); err != nil {
		switch {
		case errors.Is(err, jwt.ErrExpired):
			return id, nil, errExpired
		case errors.Is(err, jwt.ErrNotValidYet), errors.Is(err, jwt.ErrIssuedInTheFuture):
			return id, nil, errNotYetValid
		case errors.Is(err, jwt.ErrInvalidIssuer):
			return id, nil, errWrongIssuer
		case errors.Is(err, jwt.ErrInvalidAudience):
			return id, nil, errWrongAudience
		}
		return id, nil, errInvalid
	}
	if claims.Expiry == nil {
		return id, nil, errExpired // a token that never expires is not accepted
	}
	if len(is.Audiences) > 0 && len(claims.Audience) == 0 {
		return id, nil, errWrongAudience
	}
	id.Subject = claims.Subject
	id.App = is.App
	if is.AppClaim != "" {
		s, ok := extra[is.AppClaim].(string)
		if !ok || s == "" {
			return id, nil, errNoApp
		}
		id.App = s
	}
	if is.ScopesClaim != "" {
		id.Scopes = scopes(extra[is.ScopesClaim])
	}
	id.Claims = kept.got
	e := &cacheEntry{kid: h.Kid, key: key, exp: claims.Expiry.Time()}
	if claims.NotBefore != nil {
		e.nbf = claims.NotBefore.Time()
	}
	return id, e, nil
}

// scopes reads a scope claim: "a b c" or ["a","b","c"]; at most MaxScopes.
func scopes(v any) []string {
	out := []string{}
	switch s := v.(type) {
	case string:
		for _, f := range strings.Fields(s) {
			if len(out) == MaxScopes {
				break
			}
			out = append(out, f)
		}
	case []any:
		for _, e := range s {
			if len(out) == MaxScopes {
				break
			}
			if str, ok := e.(string); ok {
				out = append(out, str)
			}
		}
	}
	return out
}

// keyFits reports whether key's type is the one alg signs with, and its
// own alg, when the JWKS gives one, is alg.
func keyFits(key *jose.JSONWebKey, alg string) bool {
	if key.Algorithm != "" && key.Algorithm != alg {
		return false
	}
	switch key.Key.(type) {
	case *rsa.PublicKey:
		return strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS")
	case *ecdsa.PublicKey:
		return strings.HasPrefix(alg, "ES")
	case ed25519.PublicKey:
		return alg == "EdDSA"
	}
	return false
}
