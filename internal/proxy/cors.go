package proxy

// CORS (config `cors`). A preflight (OPTIONS with Origin and
// Access-Control-Request-Method) is answered by levee for the route that
// would take the request it announces, in the framing step, before the
// method check, auth and limits: it is never forwarded and never counted
// against an app's limits, only against a small per-address cap
// (preflightPolicy). Every other answer of a CORS route (the upstream's,
// a direct answer, a data route's and levee's own refusals, so that a
// page can read a 429's body) carries Vary: Origin and, for an allowed
// Origin, Access-Control-Allow-Origin and the rest; an upstream's own
// CORS headers are replaced.

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/ratelimit"
)

// CORSOptions configure a route's CORS.
type CORSOptions struct {
	// AllowOrigins are "*", exact origins (scheme://host[:port],
	// lower-case, without the scheme's default port) and subdomain
	// wildcards ("https://*.example.com[:port]").
	AllowOrigins []string
	// AllowMethods, AllowHeaders and ExposeHeaders are tokens (headers
	// canonical); MaxAge is a preflight's cache time.
	AllowMethods     []string
	AllowHeaders     []string
	ExposeHeaders    []string
	MaxAge           time.Duration
	AllowCredentials bool
}

// CORS is a route's compiled CORS policy. Immutable.
type CORS struct {
	any     bool
	exact   []string
	wild    []wildOrigin
	methods []string
	headers []string // allowed request headers, lower-case

	credentials  []string // ["true"], or nil
	allowMethods []string // the preflight's Access-Control-Allow-Methods
	allowHeaders []string // nil without AllowHeaders
	expose       []string // nil without ExposeHeaders
	maxAge       []string
}

// wildOrigin is "scheme://*.domain[:port]": suffix is ".domain".
type wildOrigin struct{ scheme, suffix, port string }

// NewCORS compiles o.
func NewCORS(o CORSOptions) (*CORS, error) {
	if len(o.AllowOrigins) == 0 {
		return nil, fmt.Errorf("cors: no allowed origins")
	}
	c := &CORS{methods: o.AllowMethods, maxAge: []string{strconv.FormatInt(int64(o.MaxAge/time.Second), 10)}}
	for _, s := range o.AllowOrigins {
		scheme, hostport, ok := strings.Cut(s, "://")
		switch {
		case s == "*":
			if o.AllowCredentials {
				return nil, fmt.Errorf("cors: \"*\" with credentials")
			}
			c.any = true
		case !ok:
			return nil, fmt.Errorf("cors: origin %q", s)
		case strings.HasPrefix(hostport, "*."):
			host, port := splitOriginPort(hostport)
			c.wild = append(c.wild, wildOrigin{scheme: scheme, suffix: host[1:], port: port})
		default:
			c.exact = append(c.exact, s)
		}
	}
	if o.AllowCredentials {
		c.credentials = []string{"true"}
	}
	c.allowMethods = []string{strings.Join(o.AllowMethods, ", ")}
	for _, h := range o.AllowHeaders {
		c.headers = append(c.headers, strings.ToLower(h))
	}
	if len(o.AllowHeaders) > 0 {
		c.allowHeaders = []string{strings.Join(o.AllowHeaders, ", ")}
	}
	if len(o.ExposeHeaders) > 0 {
		c.expose = []string{strings.Join(o.ExposeHeaders, ", ")}
	}
	return c, nil
}

// splitOriginPort splits "host:port" (port "" when absent).
func splitOriginPort(hostport string) (host, port string) {
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 && !strings.HasSuffix(hostport, "]") {
		return hostport[:i], hostport[i+1:]
	}
	return hostport, ""
}

// maxOrigin bounds the Origin values looked at; longer ones are not
// allowed.
const maxOrigin = 512

// allows reports whether origin (an Origin header's value) is allowed.
func (c *CORS) allows(origin string) bool {
	if c.any {
		return true
	}
	if len(origin) == 0 || len(origin) > maxOrigin {
		return false
	}
	if hasUpper(origin) {
		origin = strings.ToLower(origin) // browsers send lower case: the rare path allocates
	}
	if slices.Contains(c.exact, origin) {
		return true
	}
	scheme, hostport, ok := strings.Cut(origin, "://")
	if !ok || len(c.wild) == 0 {
		return false
	}
	host, port := splitOriginPort(hostport)
	if !hostnameChars(host) {
		return false
	}
	for _, w := range c.wild {
		if w.scheme == scheme && w.port == port && len(host) > len(w.suffix) && strings.HasSuffix(host, w.suffix) {
			return true
		}
	}
	return false
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}

// hostnameChars reports whether s holds only a host name's characters.
func hostnameChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.') {
			return false
		}
	}
	return s != ""
}

var (
	varyOrigin    = "Origin"
	starOrigin    = []string{"*"}
	preflightVary = []string{"Origin, Access-Control-Request-Method, Access-Control-Request-Headers"}
)

// corsAnswerHeaders are the fields answer replaces on an upstream's answer.
var corsAnswerHeaders = []string{
	"Access-Control-Allow-Origin", "Access-Control-Allow-Credentials", "Access-Control-Expose-Headers",
	"Access-Control-Allow-Methods", "Access-Control-Allow-Headers", "Access-Control-Max-Age",
}

// answer writes the CORS headers of an answer (not a preflight's) to r
// into h: Vary: Origin always, and for an allowed Origin the origin, the
// credentials flag and the exposed headers; whatever CORS headers h
// already held (an upstream's) are replaced.
func (c *CORS) answer(h http.Header, r *http.Request) {
	for _, k := range corsAnswerHeaders {
		delete(h, k)
	}
	addVary(h, varyOrigin)
	origin := r.Header["Origin"]
	if len(origin) != 1 || !c.allows(origin[0]) {
		return
	}
	c.allowOrigin(h, origin[0])
	if c.expose != nil {
		h["Access-Control-Expose-Headers"] = c.expose
	}
}

// allowOrigin writes Access-Control-Allow-Origin (and -Credentials).
func (c *CORS) allowOrigin(h http.Header, origin string) {
	if c.any {
		h["Access-Control-Allow-Origin"] = starOrigin
		return
	}
	h["Access-Control-Allow-Origin"] = []string{origin}
	if c.credentials != nil {
		h["Access-Control-Allow-Credentials"] = c.credentials
	}
}

// maxRequestHeaders bounds the names of Access-Control-Request-Headers
// looked at: a preflight asking for more is not allowed.
const maxRequestHeaders = 64

// preflight writes the headers of the answer to the preflight r: for an
// allowed origin asking for an allowed method and allowed headers, the
// Access-Control-Allow-* fields; otherwise none (the browser then refuses
// the request it announced). It reports whether the preflight was
// allowed.
func (c *CORS) preflight(h http.Header, r *http.Request) bool {
	h["Vary"] = preflightVary
	origin := r.Header["Origin"]
	if len(origin) != 1 || !c.allows(origin[0]) {
		return false
	}
	if !slices.Contains(c.methods, r.Header.Get("Access-Control-Request-Method")) {
		return false
	}
	n := 0
	for _, v := range r.Header["Access-Control-Request-Headers"] {
		for _, name := range strings.Split(v, ",") {
			name = strings.ToLower(strings.TrimSpace(name))
			if name == "" {
				continue
			}
			if n++; n > maxRequestHeaders || !(slices.Contains(c.headers, name) || safelisted(name)) {
				return false
			}
		}
	}
	c.allowOrigin(h, origin[0])
	h["Access-Control-Allow-Methods"] = c.allowMethods
	if c.allowHeaders != nil {
		h["Access-Control-Allow-Headers"] = c.allowHeaders
	}
	h["Access-Control-Max-Age"] = c.maxAge
	return true
}

// safelisted reports a CORS-safelisted request header (Fetch standard),
// which a page sends without the server's leave.
func safelisted(lower string) bool {
	switch lower {
	case "accept", "accept-language", "content-language", "content-type", "range":
		return true
	}
	return false
}

// preflightPolicy caps each client address's preflights across all
// routes: a preflight costs levee little, but a flood of them must not.
var preflightPolicy = func() ratelimit.Policy {
	rate, err := ratelimit.NewRate(50, 100)
	if err != nil {
		panic(err)
	}
	return ratelimit.Policy{Rate: rate}
}()

// preflightKeys bounds the client addresses the preflight cap remembers
// (evicted idle first, see ratelimit.Limiter).
const preflightKeys = 1 << 14

// The result label values of levee_cors_preflights_total.
const (
	preflightAllowed = "allowed"
	preflightRefused = "refused"
)

// isPreflight reports a CORS preflight request.
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && len(r.Header["Origin"]) > 0 && len(r.Header["Access-Control-Request-Method"]) > 0
}

// preflight answers the CORS preflight r for the route that would take
// the request it announces, when that route has CORS; it reports false
// (and answers nothing) otherwise, and the request goes on as any OPTIONS.
func (h *Handler) preflight(w http.ResponseWriter, r *http.Request, x *exchange, t *Table) bool {
	if !isPreflight(r) || r.URL.Path == "" {
		return false
	}
	rt, ok := t.router.Match(r.Host, r.URL.Path, r.Header.Get("Access-Control-Request-Method"))
	if !ok || rt.CORS == nil {
		return false
	}
	x.route = rt
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		if d := h.preflights.Allow(ap.Addr().Unmap(), preflightPolicy, time.Now()); !d.Allowed {
			w.Header()["Vary"] = preflightVary
			x.refuse(w, ReasonRateLimited)
			h.metrics.preflights.WithLabelValues(rt.Name, preflightRefused).Inc()
			return true
		}
	}
	result := preflightRefused
	if rt.CORS.preflight(w.Header(), r) {
		result = preflightAllowed
	}
	h.metrics.preflights.WithLabelValues(rt.Name, result).Inc()
	x.status = http.StatusNoContent
	w.WriteHeader(http.StatusNoContent)
	return true
}

// answerHeaders makes the route's changes to an answer's headers h that
// is not a refusal (an upstream's, a direct answer): its response header
// changes, then its CORS headers.
func answerHeaders(h http.Header, r *http.Request, x *exchange) {
	rt := x.route
	if rt.Headers != nil && rt.Headers.Response != nil {
		rt.Headers.Response.apply(h, r, x)
	}
	if rt.CORS != nil {
		rt.CORS.answer(h, r)
	}
}
