package proxy

import (
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/jwtauth"
	"github.com/levee-gw/levee/internal/ratelimit"
	"github.com/levee-gw/levee/internal/retrybudget"
	"github.com/levee-gw/levee/internal/route"
	"github.com/levee-gw/levee/internal/upstream"
	"github.com/levee-gw/levee/internal/urlpath"
	"github.com/prometheus/client_golang/prometheus"
)

// Upstream is one upstream as a snapshot sees it: the forwarder that holds
// its connection pools (package upstream), its retry budget and admission
// limiter, and its current Balance. Everything but the Balance is fixed
// once the Upstream is placed in a Table (a reload builds a new Upstream,
// which may keep the old Transport so pooled connections survive it); the
// Balance is swapped whole, through an atomic pointer, when the upstream's
// health or discovery state changes, so such a change neither rebuilds the
// table nor touches any other upstream.
type Upstream struct {
	Name      string
	Transport upstream.Forwarder
	// Budget caps the retries all routes send to this upstream; nil: no
	// cap. Kept across reloads by the gateway, so a reload cannot refill it.
	Budget *retrybudget.Budget
	// Admission, when set, limits the requests in flight to the upstream,
	// queueing fairly per consumer and by priority (package admission).
	// Kept across reloads by the gateway while its options are unchanged.
	Admission *admission.Limiter
	// GRPCWeb translates gRPC-Web requests to gRPC for this upstream,
	// which speaks HTTP/2 (grpcweb.go).
	GRPCWeb bool

	balance  atomic.Pointer[Balance]
	duration prometheus.Observer // set by NewTable
}

// Balance is an upstream's endpoints and the picker built over them: an
// immutable snapshot. A request loads it once (Upstream.Balance) and makes
// every pick of every attempt from that one snapshot, so a swap in the
// middle of a request cannot mix two endpoint sets.
type Balance struct {
	Endpoints []*endpoint.Endpoint
	Picker    balance.Picker
	// HashOn, when set, picks by a key taken from each request: Picker must
	// then be a balance.KeyPicker. A request without the key gets a random
	// pick rather than piling every keyless request onto one endpoint.
	HashOn *HashOn
	// Observer, when set, is told each attempt's time to response headers
	// (the least_request balancer's latency estimate).
	Observer balance.Observer
	// Tiers, when the upstream balances by zone, lists each zone tier's
	// endpoints (those of Endpoints, weight 0 for the ones that do not
	// serve) in failover order, the local zone first. A retry whose tier
	// has no endpoint left that has not failed in its request goes to the
	// next tier (see pickRetry). nil: one tier, Endpoints.
	Tiers [][]*endpoint.Endpoint
	// Down reports that no endpoint serves: each failed its checks, was
	// ejected or is drained, or there is none (the picker may still pick
	// one in panic mode). A split gives a Down side's share to the others
	// (split.go).
	Down bool
}

// noBalance is what an Upstream without a Balance picks from: nothing.
var noBalance = &Balance{Picker: balance.NewSmoothWeighted(nil), Down: true}

// Balance returns the upstream's current endpoints and picker (never nil).
func (u *Upstream) Balance() *Balance {
	if b := u.balance.Load(); b != nil {
		return b
	}
	return noBalance
}

// SetBalance swaps the upstream's endpoints and picker. Requests already
// past their pick keep the Balance they loaded; new ones see b at once.
func (u *Upstream) SetBalance(b *Balance) { u.balance.Store(b) }

// WithBalance sets b and returns u, for building an Upstream in one
// expression.
func (u *Upstream) WithBalance(b *Balance) *Upstream {
	u.SetBalance(b)
	return u
}

// HashOn names the request key a consistent-hash upstream picks by.
type HashOn struct {
	// Kind is "header", "cookie", "query", "client_ip" or "path".
	Kind string
	// Name is the header (canonical form), cookie or query parameter name;
	// empty for client_ip and path.
	Name string
}

// Route is one routing rule and what the request path needs to serve it.
// Immutable once placed in a Table.
type Route struct {
	Name string
	// Host, the path kind (Path, PathTemplate, PathRegex or PathPrefix),
	// Methods, Headers and Query are the match conditions (see
	// route.Table).
	Host         string
	Path         string
	PathTemplate string
	PathRegex    string
	PathPrefix   string
	Methods      []string
	HeaderConds  []route.Cond // match.headers
	QueryConds   []route.Cond // match.query
	// Rewrite, when set, changes the forwarded path or Host (rewrite.go).
	Rewrite  *Rewrite
	Upstream *Upstream
	// SendTimeout, when > 0, bounds each write of the answer to the client
	// (NGINX's send_timeout; see sender in copy.go): a client that takes no byte of
	// the answer for that long has its connection (HTTP/2: its stream)
	// aborted. 0: none.
	SendTimeout time.Duration
	// BodyTimeout, when > 0, bounds each wait for the next bytes of the
	// request body (server.body_timeout; see clientbody.go): past it the
	// client gets 408 body_timeout. 0: none.
	BodyTimeout time.Duration
	// BufferBodyBytes is the largest request body of known length read
	// whole before admission (see bufferBody); larger bodies, and bodies of
	// unknown length, stream to the upstream. 0: every body streams.
	BufferBodyBytes int64
	// BufferAnswerBytes is the largest upstream answer of known length
	// read whole before it is written to the client, so that the attempt
	// ends and the admission slot is released first (see respond); the
	// buffer is reserved from the memory budget, and without room the
	// answer streams. Answers within the copy buffer (32 KiB) are always
	// read whole.
	BufferAnswerBytes int64
	// Forwarder, when set, sends the route's attempts instead of the
	// upstream's Transport: a data route's query (package dataapi), whose
	// Upstream stands for its data source (admission, endpoint stats).
	Forwarder upstream.Forwarder
	// MaxBodyBytes bounds the request body; 0 means no limit (bodies are
	// streamed, so a large body costs bandwidth, not memory).
	MaxBodyBytes int64
	// Timeout bounds the time from the request's arrival to the upstream's
	// response headers, across every attempt; 0: none.
	Timeout time.Duration
	// Retry is the route's retry policy; nil: no retries.
	Retry *RetryPolicy
	// Priority is the route's admission priority (a client's retry,
	// marked by Levee-Attempt > 1, counts as Sheddable).
	Priority admission.Priority
	// Access, when set, limits the client addresses that may call the
	// route (access.go); nil: every address.
	Access *Access
	// Auth is how the route identifies its callers (see consumers.go).
	Auth AuthMode
	// JWT are the issuers whose tokens a route with AuthJWT accepts.
	JWT []*jwtauth.Issuer
	// JWTSubjectLimits, parallel to JWT, limit each end user (the token's
	// sub) inside each app of that issuer; the zero Policy: no limit
	// (subjectlimit.go).
	JWTSubjectLimits []ratelimit.Policy
	// ForwardAuth asks the authorization service of a route with
	// AuthForward (forwardauth.go).
	ForwardAuth *ForwardAuth
	// AnonymousLimit, on a route with AuthNone, limits each client
	// address; the zero Policy means no limit.
	AnonymousLimit ratelimit.Policy
	// RawPath forwards the request target's path as received instead of
	// its normal form (match.raw_path). The route is still matched, and
	// its auth decided, on the normal form; see paths.go.
	RawPath bool
	// Upgrades lists the protocols (lower case) a client may switch to
	// with Upgrade; others are removed from the request (framing.go).
	// nil: none.
	Upgrades []string
	// ForwardTrailers lists the request trailer fields (canonical names)
	// forwarded upstream; every other request trailer is dropped. nil:
	// none.
	ForwardTrailers []string
	// Headers changes the request forwarded and the answer (headers.go);
	// nil: none. Direct, when set, answers every request itself
	// (direct.go: a redirect or a fixed answer); Upstream is then a
	// placeholder. CORS answers preflights and adds the CORS headers
	// (cors.go); nil: none.
	Headers *Headers
	Direct  *Direct
	CORS    *CORS
	// Compression, when set, compresses the route's answers (compress.go).
	// nil: never.
	Compression *Compression
	// Split, when set, shares the route's requests across upstreams
	// (split.go): Upstream is then a placeholder and each request
	// continues, after the route's auth, rewrite and header changes, as
	// one of Split.Sides.
	Split *Split
	// Mirror, when set, copies a share of the route's forwarded requests
	// to a shadow upstream (mirror.go). nil: none.
	Mirror *Mirror

	metrics *routeMetrics // set by NewTable
}

// Table is an immutable routing snapshot: the request path loads it once per
// request from an atomic pointer, so a reload never blocks or tears a
// request in flight.
type Table struct {
	router    *route.Table[*Route]
	routes    []*Route
	upstreams []*Upstream
	noRoute   *Route // stands in for "no route matched" in metrics and logs
	// escapedSlashes is what a path's %2F and %5C get (see
	// WithEscapedSlashes).
	escapedSlashes urlpath.EscapedSlashes
	// drain is the table's retirement once replaced, drainTimeout what the
	// table it replaces gets (drain.go).
	drain        *tableDrain
	drainTimeout time.Duration
}

// NewTable builds a Table from routes (in precedence-irrelevant order; the
// router orders them) and the upstreams they reference.
func NewTable(routes []*Route, upstreams []*Upstream, m *Metrics) *Table {
	rules := make([]route.Rule[*Route], 0, len(routes))
	rmb := m.beginRouteMetrics(len(routes))
	defer rmb.done()
	for _, rt := range routes {
		rt.metrics = rmb.get(rt.Name, rt.Upstream.Name)
		if sp := rt.Split; sp != nil {
			sp.picks = make([]prometheus.Counter, len(sp.Sides))
			for i, side := range sp.Sides {
				side.metrics = rmb.get(rt.Name, side.Upstream.Name)
				sp.picks[i] = m.splitRequests.WithLabelValues(rt.Name, side.Upstream.Name)
			}
		}
		if rt.CORS != nil { // from the start at 0 (cors.go)
			m.preflights.WithLabelValues(rt.Name, preflightAllowed)
			m.preflights.WithLabelValues(rt.Name, preflightRefused)
		}
		if rt.Mirror != nil {
			resolveMirrorMetrics(m, rt)
		}
		rules = append(rules, route.Rule[*Route]{Host: rt.Host, Path: rt.Path, PathTemplate: rt.PathTemplate, PathRegex: rt.PathRegex,
			PathPrefix: rt.PathPrefix, Headers: rt.HeaderConds, Query: rt.QueryConds, Methods: rt.Methods, Value: rt})
	}
	for _, up := range upstreams {
		up.duration = m.upstreamDuration.WithLabelValues(up.Name)
		// The retry reasons that are not status codes, from the start at 0.
		for _, f := range []failure{failConnect, failReset, failTimeout, failRefused} {
			m.retries.WithLabelValues(up.Name, string(f))
		}
		if up.Budget != nil {
			// From the start at 0, so increase() sees the first spent budget.
			m.budgetExhausted.WithLabelValues(up.Name)
		}
	}
	noRoute := &Route{Upstream: &Upstream{}}
	noRoute.metrics = rmb.get("", "")
	return &Table{router: route.NewTable(rules), routes: routes, upstreams: upstreams, noRoute: noRoute,
		drain: newTableDrain(), drainTimeout: DefaultDrainTimeout}
}

// Upstreams returns the table's upstreams in configuration order. The slice
// must not be modified.
func (t *Table) Upstreams() []*Upstream { return t.upstreams }

// Upstream returns the table's upstream called name, or nil.
func (t *Table) Upstream(name string) *Upstream {
	for _, up := range t.upstreams {
		if up.Name == name {
			return up
		}
	}
	return nil
}

// Routes returns the table's routes in configuration order. The slice must
// not be modified.
func (t *Table) Routes() []*Route { return t.routes }
