package proxy

import (
	"net"
	"net/http"
	"time"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/ratelimit"
	"github.com/levee-gw/levee/internal/retrybudget"
	"github.com/levee-gw/levee/internal/route"
	"github.com/levee-gw/levee/internal/urlpath"
	"github.com/prometheus/client_golang/prometheus"
)

// Upstream is one upstream as a snapshot sees it: its endpoints, the picker
// built over them and the transport that holds its connection pool (a
// *Transport gets the fast path for bodiless idempotent requests; any other
// RoundTripper is used for every request). It is
// immutable once placed in a Table; a change builds a new Upstream (which
// may keep the old Transport so pooled connections survive a reload).
type Upstream struct {
	Name      string
	Endpoints []*endpoint.Endpoint
	Picker    balance.Picker
	Transport http.RoundTripper
	// Budget caps the retries all routes send to this upstream; nil: no
	// cap. Kept across reloads by the gateway, so a reload cannot refill it.
	Budget *retrybudget.Budget
	// HashOn, when set, picks by a key taken from each request: Picker must
	// then be a balance.KeyPicker. A request without the key gets a random
	// pick rather than piling every keyless request onto one endpoint.
	HashOn *HashOn
	// Observe, when set, is told each attempt's time to response headers
	// (the least_request balancer's latency estimate).
	Observe func(ep *endpoint.Endpoint, rtt time.Duration, now time.Time)
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

// TransportOptions are the settings of one upstream's connection pool.
type TransportOptions struct {
	// Connect bounds establishing a TCP connection to an endpoint.
	Connect time.Duration
	// ResponseHeader bounds the wait, after the request is written, for the
	// endpoint's response headers.
	ResponseHeader time.Duration
	// Idle is how long an unused pooled connection is kept; 0 keeps it
	// until the endpoint closes it.
	Idle time.Duration
	// MaxIdlePerEndpoint bounds pooled idle connections per endpoint, in
	// each of the two pools; 0 means 2 (net/http's default).
	MaxIdlePerEndpoint int
}

// Transport is one upstream's connection pools: a fast path of levee's own
// for bodiless idempotent requests (see h1.go) and an http.Transport for
// everything else (bodies, upgrades, other methods). It implements
// http.RoundTripper with the latter. Safe for concurrent use; build it with
// NewTransport.
type Transport struct {
	std *http.Transport
	h1  *h1Pool
}

// NewTransport returns the HTTP/1.1 transport levee uses to reach an
// upstream's endpoints: keep-alive pooling, no environment proxies, no
// transparent compression (bodies pass through untouched). It starts no
// goroutine; call SweepIdle periodically to close expired idle connections
// of the fast path.
func NewTransport(o TransportOptions) *Transport {
	d := &net.Dialer{Timeout: o.Connect, KeepAlive: 30 * time.Second}
	std := &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		MaxIdleConns:           0, // bounded per endpoint below
		MaxIdleConnsPerHost:    o.MaxIdlePerEndpoint,
		IdleConnTimeout:        o.Idle,
		ResponseHeaderTimeout:  o.ResponseHeader,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		ForceAttemptHTTP2:      false,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
	}
	return &Transport{std: std, h1: newH1Pool(o)}
}

// RoundTrip sends r through the standard http.Transport.
func (t *Transport) RoundTrip(r *http.Request) (*http.Response, error) {
	return t.std.RoundTrip(r)
}

// CloseIdleConnections closes the idle connections of both pools.
// Connections in use stay open and are pooled again when their request ends.
func (t *Transport) CloseIdleConnections() {
	t.h1.closeIdle()
	t.std.CloseIdleConnections()
}

// Close closes the idle connections of both pools and retires the fast
// path's: connections that requests in flight give back later are closed
// instead of pooled. Call it when no new request will use t (the upstream
// was removed, its settings changed, or levee is stopping).
func (t *Transport) Close() {
	t.h1.close()
	t.std.CloseIdleConnections()
}

// SweepIdle closes the fast path's connections that have been idle for the
// Idle duration or longer at now, and returns how many it closed. (The
// standard pool expires its own with timers.) It does not block on I/O
// beyond closing sockets.
func (t *Transport) SweepIdle(now time.Time) int { return t.h1.sweep(now) }
