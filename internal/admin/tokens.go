package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Scope is what an admin token may do.
type Scope uint8

// The scopes, each including the one before.
const (
	// ScopeRead may make GET and HEAD requests: metrics, pprof, the
	// upstreams and apps as JSON. A metrics scraper's or a dashboard's
	// token, which must not be able to mint API keys or reload levee.
	ScopeRead Scope = 1
	// ScopeWrite may do everything (admin.token_file's only meaning).
	ScopeWrite Scope = 2
)

// Token is one accepted bearer token: the SHA-256 of its secret (the
// secret itself is not kept) and its scope.
type Token struct {
	digest [sha256.Size]byte
	scope  Scope
}

// NewToken returns the token whose secret is secret, with scope.
func NewToken(secret string, scope Scope) Token {
	return Token{digest: sha256.Sum256([]byte(secret)), scope: scope}
}

// requireToken guards every path but /healthz, /readyz and the web UI's
// files (isOpenPath) with bearer tokens when tokens returns any. The presented token is compared with
// every configured one, each as SHA-256 digests in constant time and
// without stopping at a match, so neither a token's bytes, its length nor
// which of them matched leak through timing. A read token may make GET and
// HEAD requests; anything else needs a write token (403 otherwise).
//
// With openReads returning true, GET and HEAD requests need no token (the
// generated token guards writes only).
func requireToken(tokens func() []Token, openReads func() bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		toks := tokens()
		if len(toks) == 0 || isOpenPath(r.URL.Path) || (!isWrite(r.Method) && r.Method != http.MethodOptions && openReads != nil && openReads()) {
			next.ServeHTTP(w, r)
			return
		}
		scope := int(presentedScope(toks, r))
		if scope == 0 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="levee-admin"`)
			writeError(w, http.StatusUnauthorized, "unauthorized", "the admin API needs Authorization: Bearer TOKEN (admin.token_file or admin.tokens)")
			return
		}
		if Scope(scope) < ScopeWrite && r.Method != http.MethodGet && r.Method != http.MethodHead {
			// RFC 6750 section 3.1: the token is good, its scope too narrow.
			w.Header().Set("WWW-Authenticate", `Bearer realm="levee-admin", error="insufficient_scope"`)
			writeError(w, http.StatusForbidden, "insufficient_scope", "this admin token has scope read (GET and HEAD requests only); "+r.Method+" needs a token with scope write")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// presentedScope is the scope of the bearer token r presents among toks
// (0: none presented, or none of them). Every token is compared, as
// SHA-256 digests in constant time, without stopping at a match.
func presentedScope(toks []Token, r *http.Request) Scope {
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return 0
	}
	gotSum := sha256.Sum256([]byte(got))
	scope := 0
	for i := range toks {
		eq := subtle.ConstantTimeCompare(gotSum[:], toks[i].digest[:])
		scope = subtle.ConstantTimeSelect(eq, max(scope, int(toks[i].scope)), scope)
	}
	return Scope(scope)
}
