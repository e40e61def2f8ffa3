package config

import (
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// The routes block (`routes`): each route, its `match`, and the checks
// across routes (names, overlaps). A route's `retry` is retry.go's, its
// `data` data_routes.go's, its auth and `anonymous_limits` apps.go's and
// its trailers and upgrades framing.go's.

// The field tables of this file's blocks (fields.go says how a table is read).
var (
	routeBlock = engine.NewBlock(
		engine.Field{Name: "name", Kind: engine.KindString, Required: true, Pattern: namePattern, Doc: "the route's name, unique",
			Check: checkName, Bind: engine.At(func(r *Route) *string { return &r.Name })},
		engine.Field{Name: "match", Kind: engine.KindBlock, Sub: matchBlock, Doc: "the requests the route takes; every request when omitted"},
		engine.Field{Name: "upstream", Kind: engine.KindString, Pattern: namePattern, Doc: "the upstream requests go to; required unless data is set",
			Bind: engine.At(func(r *Route) *string { return &r.Upstream })},
		engine.Field{Name: "data", Kind: engine.KindBlock, Sub: dataBlock, Doc: "answer from a data source (a SQL query or a table) instead of an upstream"},
		engine.Field{Name: "max_body_bytes", Kind: engine.KindSize, Lo: 0, Hi: engine.MaxSize, Def: DefaultMaxBodyBytes, Doc: "largest request body; 0 is no limit",
			Bind: engine.At(func(r *Route) *int64 { return &r.MaxBodyBytes })},
		engine.Field{Name: "timeout", Kind: engine.KindDuration, Doc: "deadline of the whole request; none when omitted",
			Bind: engine.At(func(r *Route) *time.Duration { return &r.Timeout })},
		engine.Field{Name: "send_timeout", Kind: engine.KindDuration, Doc: "longest wait for the client to accept each write of an answer; server.send_timeout (a data route: data.send_timeout) when omitted; 100ms to 1h",
			Check: engine.CheckDurationWithin(minClientTimeout, maxClientTimeout), Bind: engine.At(func(r *Route) *time.Duration { return &r.SendTimeout })},
		engine.Field{Name: "retry", Kind: engine.KindBlock, Sub: retryBlock, Omit: []string{"budget"}, Doc: "overrides the upstream's retry"},
		engine.Field{Name: "priority", Kind: engine.KindEnum, Enum: priorities, Def: DefaultPriority, Doc: "which requests are shed first under pressure",
			Bind: engine.At(func(r *Route) *string { return &r.Priority })},
		engine.Field{Name: "auth", Kind: engine.KindEnum, Enum: authModes, Def: DefaultRouteAuth, Doc: "how callers are identified",
			Bind: engine.At(func(r *Route) *string { return &r.Auth })},
		engine.Field{Name: "jwt", Kind: engine.KindBlock, Sub: routeJWTBlock, Doc: "with auth: jwt, the issuers accepted; all when omitted"},
		engine.Field{Name: "forward_auth", Kind: engine.KindBlock, Sub: forwardAuthBlock, Doc: "with auth: forward, the authorization service asked about each request"},
		engine.Field{Name: "access", Kind: engine.KindBlock, Sub: accessBlock, Doc: "the client addresses allowed and denied (replaces server.access; access.go)",
			Bind: engine.Opt(func(r *Route) **Access { return &r.Access }, func() *Access { return &Access{} })},
		engine.Field{Name: "anonymous_limits", Kind: engine.KindBlock, Sub: anonymousLimitsBlock, Doc: "rate limit per client address, with auth: none"},
		engine.Field{Name: "forward_trailers", Kind: engine.KindList, Item: &engine.Field{Kind: engine.KindString}, Doc: "trailers passed through"},
		engine.Field{Name: "upgrades", Kind: engine.KindList, Item: &engine.Field{Kind: engine.KindString}, Doc: `protocols a request may upgrade to; ["websocket"] when omitted`},
		engine.Field{Name: "rewrite", Kind: engine.KindBlock, Sub: rewriteBlock, Doc: "changes the forwarded path (one of strip_prefix, replace_prefix, path_regex) or Host"},
		engine.Field{Name: "headers", Kind: engine.KindBlock, Sub: routeHeadersBlock, Doc: "header fields set, added or removed on the request forwarded and on the answer"},
		engine.Field{Name: "redirect", Kind: engine.KindBlock, Sub: redirectBlock, Doc: "answer every request with a redirect (a route with neither upstream nor data)"},
		engine.Field{Name: "respond", Kind: engine.KindBlock, Sub: respondBlock, Doc: "answer every request with a fixed answer (a route with neither upstream nor data)"},
		engine.Field{Name: "cors", Kind: engine.KindBlock, Sub: corsBlock, Doc: "answer CORS preflights and add the CORS headers to every answer"},
		engine.Field{Name: "compression", Kind: engine.KindBlock, Sub: compressionBlock, Doc: "compress answers by the client's Accept-Encoding; none when omitted"},
		engine.Field{Name: "split", Kind: engine.KindList, MinItems: 2, MaxItems: MaxSplitSides, Item: &engine.Field{Kind: engine.KindBlock, Sub: splitSideBlock},
			Doc: "share the requests across upstreams by weight (instead of upstream): [{upstream, weight}, ...]"},
		engine.Field{Name: "split_sticky", Kind: engine.KindBlock, Sub: splitStickyBlock, Doc: "with split, keep a client on one side by a consistent hash of a header or cookie"},
		engine.Field{Name: "mirror", Kind: engine.KindBlock, Sub: mirrorBlock, Doc: "send a copy of a share of the requests to a shadow upstream, its answers discarded"},
	)
)

// routeSeen is what the cross-route checks need to know about one route.
type routeSeen struct {
	node    *yaml.Node // the match node, or the route's own if match is unset
	matchOK bool       // host, path_prefix and methods all valid
}

// routes reads `routes` into c, then checks names are unique, upstreams
// are declared (when upstreamsOK) and no two routes match the same
// requests.
func (p *parser) routes(c *Config, n, root *yaml.Node, declared map[string]bool, upstreamsOK bool) {
	const path = "routes"
	if engine.IsNull(n) {
		p.Add(root, path, "required")
		return
	}
	items, ok := p.Sequence(path, n)
	if !ok {
		return
	}
	if len(items) == 0 {
		p.Add(n, path, "at least one route is required")
		return
	}
	var names []string
	if len(declared) <= engine.MaxSuggest {
		for name := range declared {
			names = append(names, name)
		}
		slices.Sort(names)
	}
	byName := make(map[string]int, len(items))
	seen := make([]routeSeen, len(items))
	c.Routes = make([]Route, len(items))
	for i, item := range items {
		rp := engine.Index(path, i)
		r, s, nameNode, upNode := p.route(c, rp, item)
		c.Routes[i], seen[i] = r, s
		if nameNode != nil {
			if j, dup := byName[r.Name]; dup {
				p.Add(nameNode, engine.Key(rp, "name"), "duplicate route name %s (first at routes[%d])", engine.Quote(r.Name), j)
			} else {
				byName[r.Name] = i
			}
		}
		if upNode != nil && upstreamsOK && !declared[r.Upstream] {
			p.Add(upNode, engine.Key(rp, "upstream"), "unknown upstream %s%s", engine.Quote(r.Upstream), engine.Suggest(r.Upstream, names))
		}
		if upstreamsOK {
			p.splitUpstreams(&c.Routes[i], rp, item, declared, names)
		}
	}
	if upstreamsOK {
		p.mirrorUpstreams(c.Routes, items, declared, names) // route_mirror.go
	}
	p.overlaps(c.Routes, seen)
}

// overlaps reports each route that ties with an earlier route on the
// route precedence and can take the same requests (overlapsBy).
func (p *parser) overlaps(routes []Route, seen []routeSeen) {
	overlapsBy(routes, seen, func(i, j int, what string) {
		p.Add(seen[i].node, engine.Key(engine.Index("routes", i), "match"), "duplicates routes[%d] (%s)", j, what)
	})
}

// route reads one item of `routes`. It returns the nodes of the name and
// upstream when they are valid, for the cross-route checks.
func (p *parser) route(c *Config, path string, n *yaml.Node) (r Route, s routeSeen, nameNode, upNode *yaml.Node) {
	r = defaultRoute()
	s.node = n
	if n.Kind == yaml.AliasNode {
		return r, s, nil, nil
	}
	if engine.IsNull(n) || n.Kind != yaml.MappingNode {
		p.Add(n, path, "must be a mapping with name, match and upstream, got %s", engine.Describe(n))
		return r, s, nil, nil
	}
	f, ok := p.Block(path, n, routeBlock)
	if !ok {
		return r, s, nil, nil
	}
	// name, upstream, max_body_bytes, timeout, priority and auth.
	bad := p.Bind(f, n, path, routeBlock, &r)
	if !bad["name"] {
		nameNode = f["name"]
	}
	if !bad["upstream"] {
		upNode = f["upstream"]
	}
	if m := f["match"]; m != nil {
		s.node = m
		s.matchOK = p.match(&r.Match, engine.Key(path, "match"), m)
	} else {
		s.matchOK = true
	}
	if v := f["retry"]; v != nil {
		r.Retry = p.retry(engine.Key(path, "retry"), v, true, r.Upstream)
	}
	if v := f["anonymous_limits"]; v != nil {
		if !bad["auth"] && r.Auth != AuthNone {
			p.Add(v, engine.Key(path, "anonymous_limits"), "only allowed with auth: none (apps are limited by their own limits), got auth %s", engine.Quote(r.Auth))
		} else {
			r.AnonymousLimits = p.anonymousLimits(engine.Key(path, "anonymous_limits"), v)
		}
	}
	if v := f["jwt"]; v != nil {
		r.JWT = p.routeJWT(engine.Key(path, "jwt"), v)
	}
	p.routeForwardAuth(&r, path, n, f, bad["auth"])
	if v := f["forward_trailers"]; v != nil {
		r.ForwardTrailers = p.forwardTrailers(engine.Key(path, "forward_trailers"), v)
	}
	if v := f["upgrades"]; v != nil {
		r.Upgrades = p.upgrades(engine.Key(path, "upgrades"), v)
	}
	if v := f["rewrite"]; v != nil {
		r.Rewrite = p.rewrite(engine.Key(path, "rewrite"), v, &r.Match, f["data"] != nil)
	}
	p.routeSplit(&r, path, f)
	if v := f["mirror"]; v != nil {
		r.Mirror = p.mirror(engine.Key(path, "mirror"), v, &r, f)
	}
	if !p.routeSteps(&r, path, n, f) {
		return r, s, nameNode, upNode
	}
	if v := f["compression"]; v != nil {
		r.Compression = p.compression(engine.Key(path, "compression"), v)
	}
	switch v := f["data"]; {
	case v != nil && f["upstream"] != nil:
		p.Add(v, engine.Key(path, "data"), "a route has upstream or data, not both")
	case v != nil:
		r.Data = p.routeData(c, engine.Key(path, "data"), v)
		p.dataRouteRules(&r, path, f)
		p.dataBindRules(&r, engine.Key(path, "data"), v)
		if m := f["match"]; m != nil && r.Data != nil {
			p.dataRouteMatch(&r, path, m)
		}
		p.keepDefinition(c, path, n, r.Name)
	case f["upstream"] == nil && f["split"] == nil:
		p.Add(n, engine.Key(path, "upstream"), "required unless split, data, redirect or respond is set")
	}
	return r, s, nameNode, upNode
}

// Route sends the requests it matches to an upstream (`routes[i]`).
type Route struct {
	// Name identifies the route in logs, metrics and the admin API
	// (`name`, required, unique): 1 to 64 characters from a-z, 0-9, "_",
	// "." and "-".
	Name string
	// Match selects the requests this route takes (`match`). Omitted, it
	// matches every request.
	Match Match
	// Upstream is the name of the upstream that serves this route
	// (`upstream`, required unless Data is set); it is a key of
	// Config.Upstreams.
	Upstream string
	// Data, when set, makes this a data route (`data`): it answers from a
	// data source instead of an upstream. Exactly one of Upstream and Data.
	// Its methods are GET and HEAD (the default when match.methods is
	// omitted).
	Data *RouteData
	// MaxBodyBytes caps the request body, in bytes (`max_body_bytes`, a
	// size). Default DefaultMaxBodyBytes (0), which means no limit:
	// bodies are streamed.
	MaxBodyBytes int64
	// Timeout is the overall deadline of a request on this route, from
	// its arrival to the upstream's response headers, across every
	// attempt and backoff (`timeout`, a duration greater than 0). Default
	// DefaultRouteTimeout (0), which means none: only the upstream's
	// per-phase Timeouts and Retry.PerTryTimeout apply. No retry starts
	// once it has passed.
	Timeout time.Duration
	// SendTimeout is the longest the client may take to accept each write
	// of this route's answers (`send_timeout`, a duration from 100ms to
	// 1h). Default 0, omitted: server.send_timeout, or on a data route its
	// data.send_timeout.
	SendTimeout time.Duration
	// Retry, when not nil, replaces the upstream's Retry for this route
	// (`retry`, optional). It replaces the whole block: fields it does not
	// set take their defaults, not the upstream's values. Its Budget is
	// always zero, because the budget is per upstream (see
	// Upstream.RetryBudget); `budget` here is an error. nil, the default,
	// means the upstream's Retry applies; `retry: {attempts: 1}` turns
	// retries off for this route only.
	Retry *Retry
	// Priority is how important this route's requests are when levee
	// must refuse some (`priority`): PriorityCritical ("critical"),
	// PriorityNormal ("normal", the default, DefaultPriority) or
	// PrioritySheddable ("sheddable"). Under pressure sheddable requests
	// are refused first and critical ones last. A request whose
	// Levee-Attempt header is above 1 (a client's retry) counts as
	// sheddable whatever the route says.
	Priority string
	// Access, when set, replaces server.access for this route (`access`,
	// access.go): the client addresses allowed and denied.
	Access *Access
	// Auth is how callers of this route are identified (`auth`):
	// AuthNone ("none", the default, DefaultRouteAuth: anyone),
	// AuthAPIKey ("api_key") or AuthHMAC ("hmac"). With api_key or hmac
	// only apps whose grants name this route are admitted.
	Auth string
	// JWT, with auth: jwt, narrows the issuers accepted (`jwt`, optional;
	// identity.go). nil: every identity.jwt_issuers entry.
	JWT *RouteJWT
	// ForwardAuth, with auth: forward, is the authorization service
	// (`forward_auth`, route_forward_auth.go).
	ForwardAuth *RouteForwardAuth
	// AnonymousLimits, when not nil, limits this route's requests per
	// client IP address (`anonymous_limits`, optional, only with auth
	// none: with api_key or hmac every caller is an app and is limited
	// by its own limits). nil, the default, means no per-IP limit.
	AnonymousLimits *AnonymousLimits
	// ForwardTrailers names the request trailer fields forwarded upstream
	// after a chunked body (`forward_trailers`, a list of field names,
	// stored canonical, no duplicates); every other request trailer is
	// dropped. nil or empty, the default, forwards none. Names that frame,
	// route, authenticate or identify a request (ForbiddenTrailer) are
	// errors: RFC 9110 section 6.5.1 lets such fields be sent as trailers,
	// where levee's checks on headers would not see them. Response
	// trailers always pass (gRPC needs them).
	ForwardTrailers []string
	// Upgrades lists the protocols a client may switch this route's
	// connections to with Upgrade (`upgrades`, a list of protocol names,
	// stored lower-case, no duplicates). Default DefaultUpgrades
	// (["websocket"]); an explicit [] allows none. Tokens not listed are
	// removed from the request's Upgrade before it is forwarded (RFC 9110
	// section 7.8 lets a server ignore Upgrade); "h2c" is an error: levee
	// never hands an upstream a connection that would bypass its routing.
	Upgrades []string
	// Rewrite, when not nil, changes the path or Host the route forwards
	// (`rewrite`, route_rewrite.go).
	Rewrite *Rewrite
	// Headers changes the request forwarded and the answer
	// (`headers`, route_headers.go); nil: no changes.
	Headers *RouteHeaders
	// Redirect and Respond make the route answer itself (`redirect`,
	// `respond`, route_redirect.go): exactly one of Upstream, Data,
	// Redirect and Respond. nil: not such a route.
	Redirect *RouteRedirect
	Respond  *RouteRespond
	// CORS answers preflights and adds the CORS headers (`cors`,
	// route_cors.go); nil: no CORS.
	CORS *RouteCORS
	// Compression, when not nil, compresses the route's answers
	// (`compression`, route_compression.go). nil: never.
	Compression *Compression
	// Split, when not empty, shares the route's requests across upstreams
	// by weight (`split`, route_split.go), instead of Upstream; SplitSticky
	// keeps a client on one side (`split_sticky`); nil: weighted picks.
	Split       []SplitSide
	SplitSticky *SplitSticky
	// Mirror, when not nil, copies a share of the route's requests to a
	// shadow upstream (`mirror`, route_mirror.go). nil: none.
	Mirror *RouteMirror
}

// The accepted values of Route.Priority, most important first.
const (
	PriorityCritical  = "critical"
	PriorityNormal    = "normal"
	PrioritySheddable = "sheddable"
)

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultMaxBodyBytes is Route.MaxBodyBytes when omitted: 0, no limit.
	DefaultMaxBodyBytes int64 = 0
	// DefaultRouteTimeout is Route.Timeout when omitted: 0, no deadline.
	DefaultRouteTimeout time.Duration = 0
	// DefaultPriority is Route.Priority when omitted.
	DefaultPriority = PriorityNormal
	// DefaultRouteAuth is Route.Auth when omitted: anyone may call.
	DefaultRouteAuth = AuthNone
)

// priorities are the accepted values of Route.Priority.
var priorities = []string{PriorityCritical, PriorityNormal, PrioritySheddable}

func defaultRoute() Route {
	r := engine.WithDefaults(routeBlock, &Route{Timeout: DefaultRouteTimeout, Upgrades: DefaultUpgrades()})
	engine.WithDefaults(matchBlock, &r.Match)
	return *r
}

// DefaultUpgrades is Route.Upgrades when omitted: WebSocket only. A new
// slice each call.
func DefaultUpgrades() []string { return []string{"websocket"} }
