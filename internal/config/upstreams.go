package config

import (
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/endpoint"
	"gopkg.in/yaml.v3"
)

// The upstreams block (`upstreams`): each upstream, its endpoints and
// connection timeouts. Its balancer options are balancers.go's, its
// discovery discovery.go's, retry retry.go's, limits limits.go's and
// health checks, outlier detection and zones health.go's.

const maxPanicThreshold = 100

// The field tables of this file's blocks (fields.go says how a table is read).
var (
	endpointBlock = engine.NewBlock(
		engine.Field{Name: "address", Kind: engine.KindString, Required: true, Doc: "host:port of the endpoint",
			Check: checkEndpoint, Bind: engine.At(func(e *Endpoint) *string { return &e.Address })},
		engine.Field{Name: "weight", Kind: engine.KindInt, Lo: 0, Hi: maxWeight, Def: DefaultWeight, Doc: "share of requests; 0 drains the endpoint",
			Bind: engine.At(func(e *Endpoint) *uint32 { return &e.Weight })},
		engine.Field{Name: "zone", Kind: engine.KindString, Pattern: namePattern, Doc: "zone the endpoint runs in",
			Check: checkZone, Bind: engine.At(func(e *Endpoint) *string { return &e.Zone })},
	)
	timeoutsBlock = engine.NewBlock(
		engine.Field{Name: "connect", Kind: engine.KindDuration, Def: DefaultConnectTimeout, Doc: "time to open a connection to an endpoint",
			Bind: engine.At(func(t *Timeouts) *time.Duration { return &t.Connect })},
		engine.Field{Name: "response_header", Kind: engine.KindDuration, Def: DefaultResponseHeaderTimeout, Doc: "time from the request sent to the response head",
			Bind: engine.At(func(t *Timeouts) *time.Duration { return &t.ResponseHeader })},
		engine.Field{Name: "idle", Kind: engine.KindDuration, Def: DefaultUpstreamIdleTimeout, Doc: "how long an idle upstream connection is kept",
			Bind: engine.At(func(t *Timeouts) *time.Duration { return &t.Idle })},
	)
	upstreamBlock = engine.NewBlock(
		engine.Field{Name: "balancer", Kind: engine.KindEnum, Enum: balancers, Def: DefaultBalancer, Doc: "how an endpoint is picked",
			Bind: engine.At(func(u *Upstream) *string { return &u.Balancer })},
		engine.Field{Name: "least_request", Kind: engine.KindBlock, Sub: leastRequestBlock, Doc: "options of balancer least_request"},
		engine.Field{Name: "consistent_hash", Kind: engine.KindBlock, Sub: consistentHashBlock, Doc: "options of balancer consistent_hash; required with it"},
		engine.Field{Name: "discovery", Kind: engine.KindBlock, Sub: discoveryBlock, Doc: "where endpoints come from besides the list: exactly one of file, etcd, dns, dns_srv or push"},
		engine.Field{Name: "endpoints", Kind: engine.KindList, MinItems: 1, Item: &engine.Field{Kind: engine.KindBlock, Sub: endpointBlock},
			Doc: "the endpoints; required unless discovery is set"},
		engine.Field{Name: "timeouts", Kind: engine.KindBlock, Sub: timeoutsBlock, Doc: "upstream connection timeouts",
			Bind: engine.At(func(u *Upstream) *Timeouts { return &u.Timeouts })},
		engine.Field{Name: "max_idle_conns_per_endpoint", Kind: engine.KindInt, Lo: 1, Hi: maxIdleConnsPerEndpointCap, Def: DefaultMaxIdleConnsPerEndpoint,
			Doc:  "idle connections kept per endpoint",
			Bind: engine.At(func(u *Upstream) *int { return &u.MaxIdleConnsPerEndpoint })},
		engine.Field{Name: "retry", Kind: engine.KindBlock, Sub: retryBlock, Doc: "retries; none when omitted"},
		engine.Field{Name: "limits", Kind: engine.KindBlock, Sub: limitsBlock, Doc: "concurrency limit and queue; none when omitted"},
		engine.Field{Name: "health_check", Kind: engine.KindBlock, Sub: healthCheckBlock, Doc: "active health checks; none when omitted"},
		engine.Field{Name: "outlier_detection", Kind: engine.KindBlock, Sub: outlierDetectionBlock, Doc: "passive ejection of failing endpoints; off when omitted"},
		engine.Field{Name: "panic_threshold", Kind: engine.KindNumber, Flo: 0, Fhi: maxPanicThreshold, Def: DefaultPanicThreshold,
			Doc:  "percent of healthy endpoints below which all are used",
			Bind: engine.At(func(u *Upstream) *float64 { return &u.PanicThreshold })},
		engine.Field{Name: "slow_start", Kind: engine.KindDuration, Doc: "ramp of a new endpoint's share; none when omitted",
			Bind: engine.At(func(u *Upstream) *time.Duration { return &u.SlowStart })},
		engine.Field{Name: "zones", Kind: engine.KindBlock, Sub: zonesBlock, Doc: "zone-aware routing; off when omitted"},
		engine.Field{Name: "tls", Kind: engine.KindBlock, Sub: upstreamTLSBlock, Doc: "TLS (and mTLS) to the endpoints; clear text when omitted"},
		engine.Field{Name: "protocol", Kind: engine.KindEnum, Enum: upstreamProtocols, Def: DefaultUpstreamProtocol,
			Doc:  "http1, http2 (over tls, ALPN h2), h2c (clear text) or auto (over tls, ALPN chooses)",
			Bind: engine.At(func(u *Upstream) *string { return &u.Protocol })},
		engine.Field{Name: "http2", Kind: engine.KindBlock, Sub: upstreamHTTP2Block, Doc: "HTTP/2 connection and stream limits; defaults when omitted"},
	)
)

// upstreams reads `upstreams` into c. It returns every name declared,
// valid or not, so that routes are checked against what the file meant;
// and false when `upstreams` is missing or not a mapping, in which case
// routes' upstream names cannot be checked.
func (p *parser) upstreams(c *Config, n, root *yaml.Node) (map[string]bool, bool) {
	const path = "upstreams"
	if engine.IsNull(n) {
		p.Add(root, path, "required")
		return nil, false
	}
	if n.Kind == yaml.AliasNode {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		p.Add(n, path, "must be a mapping of upstream names to upstreams, got %s", engine.Describe(n))
		return nil, false
	}
	entries := p.Pairs(path, n)
	if len(entries) == 0 {
		p.Add(n, path, "at least one upstream is required")
		return nil, false
	}
	declared := make(map[string]bool, len(entries))
	c.Upstreams = make(map[string]*Upstream, len(entries))
	for _, e := range entries {
		up := engine.Key(path, e.Key)
		declared[e.Key] = true
		if !validName(e.Key) {
			p.Add(e.K, up, "name %s, got %s", nameRule, engine.Quote(e.Key))
		}
		c.Upstreams[e.Key] = p.upstream(up, e.Key, e.V)
		c.UpstreamOrder = append(c.UpstreamOrder, e.Key)
	}
	return declared, true
}

// upstream reads one `upstreams.<name>`; null reads as an empty mapping.
func (p *parser) upstream(path, name string, n *yaml.Node) *Upstream {
	u := defaultUpstream(name)
	f, ok := p.Block(path, n, upstreamBlock)
	if !ok {
		return u
	}
	// balancer, timeouts, max_idle_conns_per_endpoint, panic_threshold
	// and slow_start.
	bad := p.Bind(f, n, path, upstreamBlock, u)
	p.balancerOptions(u, path, n, f, !bad["balancer"])
	if v := f["discovery"]; v != nil {
		u.Discovery = p.discovery(engine.Key(path, "discovery"), v)
	}
	u.Endpoints = p.endpoints(engine.Key(path, "endpoints"), f["endpoints"], n, f["discovery"] != nil)
	if v := f["retry"]; v != nil {
		u.Retry = p.retry(engine.Key(path, "retry"), v, false, "")
	}
	if v := f["limits"]; v != nil {
		u.Limits = p.limits(engine.Key(path, "limits"), v)
	}
	if v := f["health_check"]; v != nil {
		u.HealthCheck = p.healthCheck(engine.Key(path, "health_check"), v)
	}
	if v := f["outlier_detection"]; v != nil {
		u.OutlierDetection = p.outlierDetection(engine.Key(path, "outlier_detection"), v)
	}
	if v := f["zones"]; v != nil {
		u.Zones = p.zones(engine.Key(path, "zones"), v)
	}
	if v := f["tls"]; v != nil {
		u.TLS = p.upstreamTLS(engine.Key(path, "tls"), v)
	}
	if v := f["http2"]; v != nil {
		u.HTTP2 = p.upstreamHTTP2(engine.Key(path, "http2"), v)
	}
	p.upstreamProtocol(path, n, f, u)
	p.grpcCheckProtocol(path, f, u)
	return u
}

// endpoints reads an upstream's `endpoints`: at least one, addresses
// unique (compared case-insensitively). All of them may be drained
// (weight 0): the upstream then refuses requests, which is how an
// operator takes a whole upstream out of service. With discovery
// (withDiscovery) the list may be omitted, but an empty one is still an
// error.
func (p *parser) endpoints(path string, n, parent *yaml.Node, withDiscovery bool) []Endpoint {
	if engine.IsNull(n) {
		if !withDiscovery {
			p.Add(parent, path, "required unless discovery is set")
		}
		return nil
	}
	items, ok := p.Sequence(path, n)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		if withDiscovery {
			p.Add(n, path, "at least one endpoint is required; omit endpoints to start from discovery alone")
		} else {
			p.Add(n, path, "at least one endpoint is required")
		}
		return nil
	}
	out := make([]Endpoint, 0, len(items))
	first := make(map[string]int, len(items))
	for i, item := range items {
		ip := engine.Index(path, i)
		e, addrNode, ok := p.endpoint(ip, item)
		if !ok {
			continue
		}
		norm := strings.ToLower(e.Address)
		if j, dup := first[norm]; dup {
			p.Add(addrNode, engine.Key(ip, "address"), "duplicate endpoint %s (first at endpoints[%d])", engine.Quote(e.Address), j)
			continue
		}
		first[norm] = i
		out = append(out, e)
	}
	return out
}

// endpoint reads one `{address, weight}` item. It returns the address
// node for later reports, and false if anything was wrong.
func (p *parser) endpoint(path string, n *yaml.Node) (Endpoint, *yaml.Node, bool) {
	e := defaultEndpoint()
	if n.Kind == yaml.AliasNode {
		return e, nil, false
	}
	if engine.IsNull(n) || n.Kind != yaml.MappingNode {
		p.Add(n, path, "must be a mapping such as {address: \"10.0.0.1:8080\", weight: 1}, got %s", engine.Describe(n))
		return e, nil, false
	}
	f, ok := p.Block(path, n, endpointBlock)
	if !ok {
		return e, nil, false
	}
	ok = p.Bind(f, n, path, endpointBlock, &e) == nil // address, weight and zone
	return e, f["address"], ok
}

// Upstream is a named group of endpoints that routes send requests to
// (`upstreams.<name>`).
type Upstream struct {
	// Name is the upstream's key in `upstreams`: 1 to 64 characters from
	// a-z, 0-9, "_", "." and "-".
	Name string
	// Balancer is the endpoint-picking algorithm (`balancer`): one of
	// BalancerWeightedRoundRobin ("weighted_round_robin", the default,
	// DefaultBalancer), BalancerLeastRequest ("least_request") or
	// BalancerConsistentHash ("consistent_hash").
	Balancer string
	// LeastRequest tunes the least_request balancer (`least_request`,
	// allowed only with balancer least_request; an error with any other).
	// It is non-nil exactly when Balancer is BalancerLeastRequest; an
	// omitted or null block gives every default.
	LeastRequest *LeastRequest
	// ConsistentHash configures the consistent_hash balancer
	// (`consistent_hash`, required with balancer consistent_hash and an
	// error with any other). It is non-nil exactly when Balancer is
	// BalancerConsistentHash.
	ConsistentHash *ConsistentHash
	// Discovery, when not nil, takes this upstream's endpoints from a
	// registry (`discovery`, optional). nil, the default, means the
	// static Endpoints are the only ones.
	Discovery *Discovery
	// Limits, when not nil, is this upstream's admission control: a
	// concurrency limit with a fair, bounded queue (`limits`, optional).
	// nil, the default (no `limits` block, or `limits: ~`), means no
	// concurrency limit.
	Limits *Limits
	// Endpoints are the static servers of this upstream in file order
	// (`endpoints`). Required, with at least one item, unless Discovery
	// is set; with Discovery it is optional and, when given, is the
	// initial set used until the source's first good update and whenever
	// no snapshot under Config.StateDir exists to fall back on. nil only
	// when omitted with Discovery. An explicit empty list is an error.
	// Addresses are unique within the upstream (compared
	// case-insensitively). Every endpoint may have weight 0: the upstream
	// is then drained and its routes are refused.
	Endpoints []Endpoint
	// Timeouts bound each phase of a request to an endpoint (`timeouts`).
	Timeouts Timeouts
	// MaxIdleConnsPerEndpoint caps the idle keep-alive connections pooled
	// per endpoint (`max_idle_conns_per_endpoint`, a whole number).
	// Default DefaultMaxIdleConnsPerEndpoint (256); allowed 1 to 100000.
	MaxIdleConnsPerEndpoint int
	// Retry is the retry policy of this upstream's routes (`retry`,
	// optional). nil, the default (no `retry` block, or `retry: ~`),
	// means no retries; `retry: {}` turns retries on with every default.
	// A route may replace it with its own Route.Retry. Its Budget caps
	// the retries of every route sending to this upstream.
	Retry *Retry
	// HealthCheck, when not nil, probes every endpoint on an interval and
	// takes failing ones out of service (`health_check`, optional). nil,
	// the default, means no active checks. See docs/health.md.
	HealthCheck *HealthCheck
	// OutlierDetection, when not nil, ejects endpoints that fail live
	// traffic (`outlier_detection`, optional). nil, the default, means no
	// passive ejection; `outlier_detection: {}` turns it on with every
	// default.
	OutlierDetection *OutlierDetection
	// PanicThreshold is a percentage of the non-drained weight
	// (`panic_threshold`, a number from 0 to 100). When the healthy share
	// falls below it, requests are balanced over every non-drained
	// endpoint, healthy or not. Default DefaultPanicThreshold (50); 0
	// disables panic mode.
	PanicThreshold float64
	// SlowStart is the window over which a joining or returning
	// endpoint's weight ramps from 10 % to 100 % (`slow_start`, a
	// duration greater than 0). Default 0, which means none (omit the
	// field).
	SlowStart time.Duration
	// Zones, when not nil, keeps traffic in the local zone while it has
	// enough healthy capacity and spills to the failover zones in order
	// (`zones`, optional). nil, the default, ignores zones.
	Zones *Zones
	// TLS, when not nil, makes connections to the endpoints TLS
	// (`tls`, optional; upstream_tls.go). nil, the default, is clear text.
	TLS *UpstreamTLS
	// Protocol is what is spoken to the endpoints (`protocol`;
	// upstream_protocol.go). Default "http1".
	Protocol string
	// HTTP2, when not nil, are the HTTP/2 limits (`http2`, optional) of
	// protocols other than http1; nil: every default (see H2).
	HTTP2 *UpstreamHTTP2
}

// RetryBudget returns the budget that caps retries to this upstream: its
// Retry.Budget, or the default budget (DefaultRetryBudgetRatio,
// DefaultRetryBudgetMinPerSecond) when Retry is nil and only routes turn
// retries on with their own Route.Retry.
func (u *Upstream) RetryBudget() RetryBudget {
	if u.Retry != nil {
		return u.Retry.Budget
	}
	return defaultRetryBudget()
}

// Endpoint is one server of an upstream (`{address: host:port, weight: N}`).
type Endpoint struct {
	// Address is "host:port" (`address`, required). The host is an IP
	// address (IPv6 in brackets: "[::1]:80") or a DNS name; it may not be
	// empty. The port is 1 to 65535.
	Address string
	// Weight is the endpoint's relative share of requests (`weight`, a
	// whole number 0 to 10000, endpoint.MaxWeight). Default
	// DefaultWeight (1). 0 means drained: the endpoint gets no new
	// requests.
	Weight uint32
	// Zone is the failure domain the endpoint lives in (`zone`, 1 to 64
	// of a-z, 0-9, "_", "." and "-"). Default "", no zone. Used by an
	// upstream's Zones.
	Zone string
}

// Timeouts bound the phases of a request to an upstream endpoint
// (`timeouts`). Every field is a duration, optional, and greater than 0.
type Timeouts struct {
	// Connect bounds establishing a connection to an endpoint
	// (`connect`). Default DefaultConnectTimeout (1s).
	Connect time.Duration
	// ResponseHeader bounds the wait for the response headers after the
	// request has been written (`response_header`). Default
	// DefaultResponseHeaderTimeout (10s).
	ResponseHeader time.Duration
	// Idle is how long an idle pooled connection to an endpoint is kept
	// (`idle`). Default DefaultUpstreamIdleTimeout (90s).
	Idle time.Duration
}

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultMaxIdleConnsPerEndpoint is Upstream.MaxIdleConnsPerEndpoint
	// when omitted.
	DefaultMaxIdleConnsPerEndpoint = 256
	// DefaultWeight is Endpoint.Weight when omitted.
	DefaultWeight uint32 = 1
	// DefaultConnectTimeout is Timeouts.Connect when omitted.
	DefaultConnectTimeout = 1 * time.Second
	// DefaultResponseHeaderTimeout is Timeouts.ResponseHeader when omitted.
	DefaultResponseHeaderTimeout = 10 * time.Second
	// DefaultUpstreamIdleTimeout is Timeouts.Idle when omitted.
	DefaultUpstreamIdleTimeout = 90 * time.Second
	// DefaultPanicThreshold is Upstream.PanicThreshold when omitted, in
	// percent.
	DefaultPanicThreshold = 50.0
)

// Bounds of this file's fields, used by their table entries and readers.
const (
	maxWeight                  = endpoint.MaxWeight
	maxIdleConnsPerEndpointCap = 100000
)

func defaultUpstream(name string) *Upstream {
	u := engine.WithDefaults(upstreamBlock, &Upstream{Name: name})
	engine.WithDefaults(timeoutsBlock, &u.Timeouts)
	return u
}

func defaultEndpoint() Endpoint { return *engine.WithDefaults(endpointBlock, &Endpoint{}) }
