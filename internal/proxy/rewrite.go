package proxy

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/levee-gw/levee/internal/urlpath"
)

// Rewrites: what a route changes in the request it forwards
// (routes[i].rewrite).
//
// A rewrite runs after routing and after the consumer step, so the route,
// its auth and a signature over the path are all decided on the path the
// client sent (in its normal form); only the forwarded request changes.
// The rewritten path is normalised again (package urlpath, with the
// table's escaped-slash rule): that normal form is what is forwarded, and
// a result that does not normalise (a ".." above the root, a bad escape, a
// control byte a regex substitution put there) is refused 400 bad_path
// with detail "rewrite", never forwarded as is.

// Rewrite is a route's rewrite. Set at most one of StripPrefix,
// ReplacePrefix and Regex; Host may go with any.
type Rewrite struct {
	// StripPrefix is removed from the front of the path when the path
	// starts with it on a segment boundary ("/api" turns "/api/x" into
	// "/x" and "/api" into "/"); other paths are forwarded unchanged.
	StripPrefix string
	// ReplacePrefix replaces the route's PathPrefix (From) at the front
	// of the path with To ("/v1" -> "/internal/v1").
	ReplacePrefix *PrefixReplace
	// Regex, when set, replaces each match in the path with Substitution
	// (regexp.ReplaceAllString: $1 and ${name} expand).
	Regex        *regexp.Regexp
	Substitution string
	// Host, when set, is the Host sent upstream instead of the client's.
	Host string
}

// PrefixReplace is a prefix swap: From at the front of the path becomes To.
type PrefixReplace struct{ From, To string }

// rewriteRequest applies rt.Rewrite to r. It answers 400 bad_path (detail
// "rewrite") and returns false when the rewritten path does not normalise.
func (h *Handler) rewriteRequest(w http.ResponseWriter, r *http.Request, x *exchange, t *Table, rw *Rewrite) bool {
	if rw.Host != "" {
		r.Host = rw.Host
	}
	if rw.StripPrefix == "" && rw.ReplacePrefix == nil && rw.Regex == nil {
		return true
	}
	target := r.RequestURI
	if target == "" {
		target = r.URL.RequestURI()
	}
	cur, query, hasQuery := strings.Cut(target, "?")
	next := rewritePath(cur, rw)
	if next == cur {
		return true
	}
	norm, err := urlpath.Normalize(next, t.escapedSlashes)
	if err != nil {
		x.refuseDetail(w, ReasonBadPath, "rewrite")
		return false
	}
	r.URL.Opaque = ""
	r.URL.Path = urlpath.Unescape(norm)
	r.URL.RawPath = ""
	if r.URL.Path != norm {
		r.URL.RawPath = norm
	}
	if hasQuery {
		r.RequestURI = norm + "?" + query
	} else {
		r.RequestURI = norm
	}
	return true
}

// rewritePath returns p (a normal-form path, escaped) rewritten by rw.
func rewritePath(p string, rw *Rewrite) string {
	switch {
	case rw.StripPrefix != "":
		if rest, ok := cutSegmentPrefix(p, rw.StripPrefix); ok {
			if !strings.HasPrefix(rest, "/") {
				rest = "/" + rest
			}
			return rest
		}
	case rw.ReplacePrefix != nil:
		if rest, ok := cutSegmentPrefix(p, rw.ReplacePrefix.From); ok {
			to := rw.ReplacePrefix.To
			if strings.HasSuffix(rw.ReplacePrefix.From, "/") && !strings.HasSuffix(to, "/") && rest != "" {
				to += "/"
			}
			return to + rest
		}
	case rw.Regex != nil:
		return rw.Regex.ReplaceAllString(p, rw.Substitution)
	}
	return p
}

// cutSegmentPrefix returns p without prefix when p starts with it on a
// segment boundary (as a route's path_prefix matches).
func cutSegmentPrefix(p, prefix string) (string, bool) {
	if !strings.HasPrefix(p, prefix) {
		return p, false
	}
	rest := p[len(prefix):]
	if rest != "" && rest[0] != '/' && !strings.HasSuffix(prefix, "/") {
		return p, false
	}
	return rest, true
}
