package admin

import "net/http"

// TokenView is GET /api/v1/token: what the token the request presents
// may do, so that the web UI enables only the actions it may take (the
// API refuses the others anyway: 403 insufficient_scope).
type TokenView struct {
	// Scope is "write" (every call; also when the API has no tokens),
	// "read" (GET and HEAD only) or "none": no token of the API's was
	// presented and reads are open (admin.token: generate), so a write
	// will be answered 401 and the page asks for the token then.
	Scope string `json:"scope"`
	// Tokens says whether the API has tokens at all.
	Tokens bool `json:"tokens"`
}

// tokenRoute registers GET /api/v1/token. Without tokens the API is open
// (write). With tokens, requireToken has already refused a missing or
// unknown token 401, except when reads are open; the scope is then read
// here the same way (every token compared in constant time).
func tokenRoute(mux *adminMux, tokens func() []Token) {
	mux.HandleFunc("GET /api/v1/token", func(w http.ResponseWriter, r *http.Request) {
		var toks []Token
		if tokens != nil {
			toks = tokens()
		}
		v := TokenView{Scope: "write", Tokens: len(toks) > 0}
		if len(toks) > 0 {
			switch presentedScope(toks, r) {
			case ScopeWrite:
				v.Scope = "write"
			case ScopeRead:
				v.Scope = "read"
			default:
				v.Scope = "none"
			}
		}
		writeJSON(w, http.StatusOK, v)
	})
}
