package config

import (
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file maps the YAML tree onto the Config types, one method per type.
// Each method starts from the defaults, overwrites what the file sets, and
// reports what is wrong; cross-field checks run once the parts they
// compare have been read. A block's keys, and the reading of every value
// field (its kind, bounds and own check), come from its table in fields.go
// (p.block, p.bind); the code here reads lists and maps, dispatches the
// blocks that have rules across fields, and runs those rules.

// config reads the root mapping. root is nil for an empty file.
func (p *parser) config(root *yaml.Node) *Config {
	c := defaultConfig()
	f, ok := p.block("", root, rootBlock)
	if !ok {
		return c
	}
	// listen, tls, state_dir, server and metrics.
	bad := p.bind(f, root, "", rootBlock, c)
	p.log(&c.Log, f["log"])
	p.admin(c, f["admin"], root, !bad["listen"])
	if v := f["memory"]; v != nil {
		c.Memory = p.memory("memory", v)
	}
	var declared map[string]bool
	upstreamsOK := true
	if v := f["upstreams"]; v != nil || f["data_sources"] == nil {
		declared, upstreamsOK = p.upstreams(c, v, root)
	}
	if v := f["data_sources"]; v != nil {
		p.dataSources(c, v)
	}
	p.routes(c, f["routes"], root, declared, upstreamsOK)
	if v := f["apps"]; v != nil {
		var routeNames []string
		for _, r := range c.Routes {
			if validName(r.Name) {
				routeNames = append(routeNames, r.Name)
			}
		}
		p.apps(c, v, routeNames, len(c.Routes) > 0)
	}
	return c
}

// upstreams reads `upstreams` into c. It returns every name declared,
// valid or not, so that routes are checked against what the file meant;
// and false when `upstreams` is missing or not a mapping, in which case
// routes' upstream names cannot be checked.
func (p *parser) upstreams(c *Config, n, root *yaml.Node) (map[string]bool, bool) {
	const path = "upstreams"
	if isNull(n) {
		p.add(root, path, "required")
		return nil, false
	}
	if n.Kind == yaml.AliasNode {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		p.add(n, path, "must be a mapping of upstream names to upstreams, got %s", describe(n))
		return nil, false
	}
	entries := p.pairs(path, n)
	if len(entries) == 0 {
		p.add(n, path, "at least one upstream is required")
		return nil, false
	}
	declared := make(map[string]bool, len(entries))
	c.Upstreams = make(map[string]*Upstream, len(entries))
	for _, e := range entries {
		up := key(path, e.key)
		declared[e.key] = true
		if !validName(e.key) {
			p.add(e.k, up, "name %s, got %s", nameRule, quote(e.key))
		}
		c.Upstreams[e.key] = p.upstream(up, e.key, e.v)
		c.UpstreamOrder = append(c.UpstreamOrder, e.key)
	}
	return declared, true
}

// upstream reads one `upstreams.<name>`; null reads as an empty mapping.
func (p *parser) upstream(path, name string, n *yaml.Node) *Upstream {
	u := defaultUpstream(name)
	f, ok := p.block(path, n, upstreamBlock)
	if !ok {
		return u
	}
	// balancer, timeouts, max_idle_conns_per_endpoint, panic_threshold
	// and slow_start.
	bad := p.bind(f, n, path, upstreamBlock, u)
	p.balancerOptions(u, path, n, f, !bad["balancer"])
	if v := f["discovery"]; v != nil {
		u.Discovery = p.discovery(key(path, "discovery"), v)
	}
	u.Endpoints = p.endpoints(key(path, "endpoints"), f["endpoints"], n, f["discovery"] != nil)
	if v := f["retry"]; v != nil {
		u.Retry = p.retry(key(path, "retry"), v, false, "")
	}
	if v := f["limits"]; v != nil {
		u.Limits = p.limits(key(path, "limits"), v)
	}
	if v := f["health_check"]; v != nil {
		u.HealthCheck = p.healthCheck(key(path, "health_check"), v)
	}
	if v := f["outlier_detection"]; v != nil {
		u.OutlierDetection = p.outlierDetection(key(path, "outlier_detection"), v)
	}
	if v := f["zones"]; v != nil {
		u.Zones = p.zones(key(path, "zones"), v)
	}
	return u
}

// retry reads a `retry` block: an upstream's, or a route's when forRoute.
// upstream is then the route's upstream as written ("" if not known yet),
// which the error for a misplaced `budget` names.
func (p *parser) retry(path string, n *yaml.Node, forRoute bool, upstream string) *Retry {
	r := defaultRetry(forRoute)
	if forRoute {
		// budget is reported here, even when null, rather than as an
		// unknown field: it is a known field in the wrong place.
		if k := firstKey(n, "budget"); k != nil {
			if !validName(upstream) {
				upstream = "NAME"
			}
			p.add(k, key(path, "budget"), "budget is per upstream; set it under upstreams.%s.retry", upstream)
		}
	}
	f, ok := p.block(path, n, retryBlock)
	if !ok {
		return r
	}
	if forRoute {
		delete(f, "budget") // reported above
	}
	// attempts, per_try_timeout, budget and replay_body_limit.
	p.bind(f, n, path, retryBlock, r)
	if v := f["on"]; v != nil {
		if on, ok := p.retryOn(key(path, "on"), v, forRoute); ok {
			r.On = on
		}
	}
	if v := f["backoff"]; v != nil {
		p.backoff(&r.Backoff, key(path, "backoff"), v)
	}
	return r
}

// firstKey returns the key node of the first entry named name in mapping
// n, or nil.
func firstKey(n *yaml.Node, name string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.ShortTag() == "!!str" && k.Value == name {
			return k
		}
	}
	return nil
}

// retryOn reads `on`: a non-empty list of distinct condition names and
// status codes (YAML integers 400 to 599).
func (p *parser) retryOn(path string, n *yaml.Node, forRoute bool) (RetryOn, bool) {
	var on RetryOn
	items, ok := p.sequence(path, n)
	if !ok {
		return on, false
	}
	if len(items) == 0 {
		if forRoute {
			p.add(n, path, "must list at least one condition; set attempts: 1 to disable retries on this route")
		} else {
			p.add(n, path, "must list at least one condition; omit retry to disable retries")
		}
		return on, false
	}
	firstCond := make(map[string]int, len(items))
	firstStatus := make(map[int]int, len(items))
	for i, item := range items {
		ip := index(path, i)
		if item.Kind == yaml.AliasNode {
			ok = false
			continue
		}
		tag := item.ShortTag()
		switch {
		case item.Kind == yaml.ScalarNode && tag == "!!int":
			var v int64
			if item.Decode(&v) != nil || v < minRetryStatus || v > maxRetryStatus {
				p.add(item, ip, "must be a status code from %d to %d, got %s", minRetryStatus, maxRetryStatus, describe(item))
				ok = false
				continue
			}
			if j, dup := firstStatus[int(v)]; dup {
				p.add(item, ip, "duplicate status %d (first at on[%d])", v, j)
				ok = false
				continue
			}
			firstStatus[int(v)] = i
			on.Statuses = append(on.Statuses, int(v))
		case item.Kind == yaml.ScalarNode && tag == "!!str":
			s := item.Value
			if !slices.Contains(retryConditions, s) {
				switch {
				case s != "" && strings.Trim(s, "0123456789") == "":
					p.add(item, ip, "status codes must be unquoted numbers, got %s", quote(s))
				case suggest(s, retryConditions) != "":
					p.add(item, ip, "unknown condition %s%s", quote(s), suggest(s, retryConditions))
				default:
					p.add(item, ip, "unknown condition %s; must be one of %s or a status code from %d to %d",
						quote(s), quotedList(retryConditions), minRetryStatus, maxRetryStatus)
				}
				ok = false
				continue
			}
			if j, dup := firstCond[s]; dup {
				p.add(item, ip, "duplicate condition %s (first at on[%d])", quote(s), j)
				ok = false
				continue
			}
			firstCond[s] = i
			switch s {
			case condConnectFailure:
				on.ConnectFailure = true
			case condRefusedStream:
				on.RefusedStream = true
			case condResetBeforeResponse:
				on.ResetBeforeResponse = true
			}
		default:
			p.add(item, ip, "must be a condition such as %q or a status code from %d to %d, got %s",
				condConnectFailure, minRetryStatus, maxRetryStatus, describe(item))
			ok = false
		}
	}
	slices.Sort(on.Statuses)
	return on, ok
}

// backoff reads `backoff`; max may not be less than base, whichever of
// them the file sets.
func (p *parser) backoff(b *Backoff, path string, n *yaml.Node) {
	f, ok := p.block(path, n, backoffBlock)
	if !ok {
		return
	}
	if p.bind(f, n, path, backoffBlock, b) != nil || b.Max >= b.Base {
		return
	}
	switch {
	case f["max"] == nil:
		p.add(f["base"], key(path, "base"), "must be at most max (%s, the default), got %s", b.Max, describe(f["base"]))
	case f["base"] == nil:
		p.add(f["max"], key(path, "max"), "must be at least base (%s, the default), got %s", b.Base, describe(f["max"]))
	default:
		p.add(f["max"], key(path, "max"), "must be at least base (%s), got %s", b.Base, describe(f["max"]))
	}
}

// endpoints reads an upstream's `endpoints`: at least one, addresses
// unique (compared case-insensitively). All of them may be drained
// (weight 0): the upstream then refuses requests, which is how an
// operator takes a whole upstream out of service. With discovery
// (withDiscovery) the list may be omitted, but an empty one is still an
// error.
func (p *parser) endpoints(path string, n, parent *yaml.Node, withDiscovery bool) []Endpoint {
	if isNull(n) {
		if !withDiscovery {
			p.add(parent, path, "required unless discovery is set")
		}
		return nil
	}
	items, ok := p.sequence(path, n)
	if !ok {
		return nil
	}
	if len(items) == 0 {
		if withDiscovery {
			p.add(n, path, "at least one endpoint is required; omit endpoints to start from discovery alone")
		} else {
			p.add(n, path, "at least one endpoint is required")
		}
		return nil
	}
	out := make([]Endpoint, 0, len(items))
	first := make(map[string]int, len(items))
	for i, item := range items {
		ip := index(path, i)
		e, addrNode, ok := p.endpoint(ip, item)
		if !ok {
			continue
		}
		norm := strings.ToLower(e.Address)
		if j, dup := first[norm]; dup {
			p.add(addrNode, key(ip, "address"), "duplicate endpoint %s (first at endpoints[%d])", quote(e.Address), j)
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
	if isNull(n) || n.Kind != yaml.MappingNode {
		p.add(n, path, "must be a mapping such as {address: \"10.0.0.1:8080\", weight: 1}, got %s", describe(n))
		return e, nil, false
	}
	f, ok := p.block(path, n, endpointBlock)
	if !ok {
		return e, nil, false
	}
	ok = p.bind(f, n, path, endpointBlock, &e) == nil // address, weight and zone
	return e, f["address"], ok
}

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
	if isNull(n) {
		p.add(root, path, "required")
		return
	}
	items, ok := p.sequence(path, n)
	if !ok {
		return
	}
	if len(items) == 0 {
		p.add(n, path, "at least one route is required")
		return
	}
	var names []string
	if len(declared) <= maxSuggest {
		for name := range declared {
			names = append(names, name)
		}
		slices.Sort(names)
	}
	byName := make(map[string]int, len(items))
	seen := make([]routeSeen, len(items))
	c.Routes = make([]Route, len(items))
	for i, item := range items {
		rp := index(path, i)
		r, s, nameNode, upNode := p.route(c, rp, item)
		c.Routes[i], seen[i] = r, s
		if nameNode != nil {
			if j, dup := byName[r.Name]; dup {
				p.add(nameNode, key(rp, "name"), "duplicate route name %s (first at routes[%d])", quote(r.Name), j)
			} else {
				byName[r.Name] = i
			}
		}
		if upNode != nil && upstreamsOK && !declared[r.Upstream] {
			p.add(upNode, key(rp, "upstream"), "unknown upstream %s%s", quote(r.Upstream), suggest(r.Upstream, names))
		}
	}
	p.overlaps(c.Routes, seen)
}

// overlaps reports each route whose host and path prefix equal an earlier
// route's while the method sets overlap (or both are empty, meaning any
// method). A route with methods does not overlap one without: the more
// specific route is a deliberate exception. Linear in the total number of
// methods.
func (p *parser) overlaps(routes []Route, seen []routeSeen) {
	overlapsBy(routes, seen, func(i, j int, method string) {
		path := key(index("routes", i), "match")
		if method == "" {
			p.add(seen[i].node, path, "duplicates routes[%d] (same host and path_prefix)", j)
		} else {
			p.add(seen[i].node, path, "duplicates routes[%d] (same host, path_prefix and method %s)", j, quote(method))
		}
	})
}

// overlapsBy finds the overlaps that overlaps reports and calls report
// with route i, the earlier route j it duplicates, and the method they
// share ("" when neither lists methods).
func overlapsBy(routes []Route, seen []routeSeen, report func(i, j int, method string)) {
	type target struct{ host, prefix string }
	type group struct {
		any      int            // index of the first route without methods, or -1
		byMethod map[string]int // method -> first route listing it
	}
	groups := make(map[target]*group)
	for i, r := range routes {
		if !seen[i].matchOK {
			continue
		}
		t := target{r.Match.Host, r.Match.PathPrefix}
		g := groups[t]
		if g == nil {
			g = &group{any: -1, byMethod: map[string]int{}}
			groups[t] = g
		}
		if len(r.Match.Methods) == 0 {
			if g.any >= 0 {
				report(i, g.any, "")
			} else {
				g.any = i
			}
			continue
		}
		dup, dupMethod := -1, ""
		for _, m := range r.Match.Methods {
			if j, ok := g.byMethod[m]; ok && (dup < 0 || j < dup) {
				dup, dupMethod = j, m
			}
		}
		if dup >= 0 {
			report(i, dup, dupMethod)
			continue
		}
		for _, m := range r.Match.Methods {
			g.byMethod[m] = i
		}
	}
}

// route reads one item of `routes`. It returns the nodes of the name and
// upstream when they are valid, for the cross-route checks.
func (p *parser) route(c *Config, path string, n *yaml.Node) (r Route, s routeSeen, nameNode, upNode *yaml.Node) {
	r = defaultRoute()
	s.node = n
	if n.Kind == yaml.AliasNode {
		return r, s, nil, nil
	}
	if isNull(n) || n.Kind != yaml.MappingNode {
		p.add(n, path, "must be a mapping with name, match and upstream, got %s", describe(n))
		return r, s, nil, nil
	}
	f, ok := p.block(path, n, routeBlock)
	if !ok {
		return r, s, nil, nil
	}
	// name, upstream, max_body_bytes, timeout, priority and auth.
	bad := p.bind(f, n, path, routeBlock, &r)
	if !bad["name"] {
		nameNode = f["name"]
	}
	if !bad["upstream"] {
		upNode = f["upstream"]
	}
	if m := f["match"]; m != nil {
		s.node = m
		s.matchOK = p.match(&r.Match, key(path, "match"), m)
	} else {
		s.matchOK = true
	}
	if v := f["retry"]; v != nil {
		r.Retry = p.retry(key(path, "retry"), v, true, r.Upstream)
	}
	if v := f["anonymous_limits"]; v != nil {
		if !bad["auth"] && r.Auth != AuthNone {
			p.add(v, key(path, "anonymous_limits"), "only allowed with auth: none (apps are limited by their own limits), got auth %s", quote(r.Auth))
		} else {
			r.AnonymousLimits = p.anonymousLimits(key(path, "anonymous_limits"), v)
		}
	}
	if v := f["forward_trailers"]; v != nil {
		r.ForwardTrailers = p.forwardTrailers(key(path, "forward_trailers"), v)
	}
	if v := f["upgrades"]; v != nil {
		r.Upgrades = p.upgrades(key(path, "upgrades"), v)
	}
	switch v := f["data"]; {
	case v != nil && f["upstream"] != nil:
		p.add(v, key(path, "data"), "a route has upstream or data, not both")
	case v != nil:
		r.Data = p.routeData(c, key(path, "data"), v)
		p.dataRouteRules(&r, path, f)
		p.keepDefinition(c, path, n, r.Name)
	case f["upstream"] == nil:
		p.add(n, key(path, "upstream"), "required")
	}
	return r, s, nameNode, upNode
}

// match reads a route's `match` and reports whether it was all valid.
func (p *parser) match(m *Match, path string, n *yaml.Node) bool {
	f, ok := p.block(path, n, matchBlock)
	if !ok {
		return false
	}
	ok = p.bind(f, n, path, matchBlock, m) == nil // host, path_prefix and raw_path
	if v := f["methods"]; v != nil {
		ok = p.methods(m, key(path, "methods"), v) && ok
	}
	return ok
}

// methods reads `methods`: a non-empty list of distinct method tokens.
func (p *parser) methods(m *Match, path string, n *yaml.Node) bool {
	items, ok := p.sequence(path, n)
	if !ok {
		return false
	}
	if len(items) == 0 {
		p.add(n, path, "must list at least one method; omit it to match any method")
		return false
	}
	first := make(map[string]int, len(items))
	for i, item := range items {
		ip := index(path, i)
		s, sok := p.str(ip, item)
		if !sok {
			ok = false
			continue
		}
		if !validToken(s) {
			p.add(item, ip, "must be an HTTP method such as \"GET\", got %s", quote(s))
			ok = false
			continue
		}
		up := strings.ToUpper(s)
		if j, dup := first[up]; dup {
			p.add(item, ip, "duplicate method %s (first at methods[%d])", quote(up), j)
			ok = false
			continue
		}
		first[up] = i
		m.Methods = append(m.Methods, up)
	}
	return ok
}

// checkMatchHost normalises a route's `match.host` (normalizeMatchHost).
var checkMatchHost = checkStr(func(p *parser, path string, n *yaml.Node, s *string) bool {
	host, problem := normalizeMatchHost(*s)
	if problem != "" {
		p.add(n, path, "%s, got %s", problem, quote(*s))
	}
	*s = host
	return problem == ""
})

// address reports whether s is a valid host:port for a listener or an
// endpoint (see checkAddress), reporting it if not.
func (p *parser) address(path string, n *yaml.Node, s string, listener bool) bool {
	if problem := checkAddress(s, listener); problem != "" {
		p.add(n, path, "invalid address %s: %s", quote(s), problem)
		return false
	}
	return true
}
