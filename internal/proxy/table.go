package proxy

import (
	"net"
	"net/http"
	"time"

	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/route"
	"github.com/prometheus/client_golang/prometheus"
)

// Upstream is one upstream as a snapshot sees it: its endpoints, the picker
// built over them and the transport that holds its connection pool. It is
// immutable once placed in a Table; a change builds a new Upstream (which
// may keep the old Transport so pooled connections survive a reload).
type Upstream struct {
	Name      string
	Endpoints []*endpoint.Endpoint
	Picker    balance.Picker
	Transport http.RoundTripper

	duration prometheus.Observer // set by NewTable
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
	// Idle is how long an unused pooled connection is kept.
	Idle time.Duration
	// MaxIdlePerEndpoint bounds pooled idle connections per endpoint.
	MaxIdlePerEndpoint int
}

// NewTransport returns the HTTP/1.1 transport levee uses to reach an
// upstream's endpoints: keep-alive pooling, no environment proxies, no
// transparent compression (bodies pass through untouched).
func NewTransport(o TransportOptions) *http.Transport {
	d := &net.Dialer{Timeout: o.Connect, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		MaxIdleConns:           0, // bounded per endpoint below
		MaxIdleConnsPerHost:    o.MaxIdlePerEndpoint,
		IdleConnTimeout:        o.Idle,
		ResponseHeaderTimeout:  o.ResponseHeader,
		ExpectContinueTimeout:  time.Second,
		DisableCompression:     true,
		ForceAttemptHTTP2:      false,
		MaxResponseHeaderBytes: 1 << 20,
		WriteBufferSize:        32 << 10,
		ReadBufferSize:         32 << 10,
	}
}
