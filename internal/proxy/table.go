package proxy

import (
	"time"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/ratelimit"
	"github.com/levee-gw/levee/internal/retrybudget"
	"github.com/levee-gw/levee/internal/route"
	"github.com/levee-gw/levee/internal/upstream"
	"github.com/levee-gw/levee/internal/urlpath"
	"github.com/prometheus/client_golang/prometheus"
)

// Upstream is one upstream as a snapshot sees it: its endpoints, the picker
// built over them and the forwarder that holds its connection pools
// (package upstream). It is immutable once placed in a Table; a change
// builds a new Upstream (which may keep the old Transport so pooled
// connections survive a reload).
type Upstream struct {
	Name      string
	Endpoints []*endpoint.Endpoint
	Picker    balance.Picker
	Transport upstream.Forwarder
	// Budget caps the retries all routes send to this upstream; nil: no
	// cap. Kept across reloads by the gateway, so a reload cannot refill it.
	Budget *retrybudget.Budget
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
	// Admission, when set, limits the requests in flight to the upstream,
	// queueing fairly per consumer and by priority (package admission).
	// Kept across reloads by the gateway while its options are unchanged.
	Admission *admission.Limiter

	duration prometheus.Observer // set by NewTable
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
	// Host, PathPrefix and Methods are the match conditions (see route.Table).
	Host       string
	PathPrefix string
	Methods    []string
	Upstream   *Upstream
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
	// Auth is how the route identifies its callers (see consumers.go).
	Auth AuthMode
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
}

// NewTable builds a Table from routes (in precedence-irrelevant order; the
// router orders them) and the upstreams they reference.
func NewTable(routes []*Route, upstreams []*Upstream, m *Metrics) *Table {
	rules := make([]route.Rule[*Route], 0, len(routes))
	for _, rt := range routes {
		rt.metrics = newRouteMetrics(m, rt.Name, rt.Upstream.Name)
		rules = append(rules, route.Rule[*Route]{Host: rt.Host, PathPrefix: rt.PathPrefix, Methods: rt.Methods, Value: rt})
	}
	for _, up := range upstreams {
		up.duration = m.upstreamDuration.WithLabelValues(up.Name)
	}
	noRoute := &Route{Upstream: &Upstream{}}
	noRoute.metrics = newRouteMetrics(m, "", "")
	return &Table{router: route.NewTable(rules), routes: routes, upstreams: upstreams, noRoute: noRoute}
}

// Upstreams returns the table's upstreams in configuration order. The slice
// must not be modified.
func (t *Table) Upstreams() []*Upstream { return t.upstreams }

// Routes returns the table's routes in configuration order. The slice must
// not be modified.
func (t *Table) Routes() []*Route { return t.routes }
