package config

import (
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// This file maps the YAML tree onto the Config types, one method per type.
// Each method starts from the defaults, overwrites what the file sets, and
// reports what is wrong; cross-field checks run once the parts they
// compare have been read.

// config reads the root mapping. root is nil for an empty file.
func (p *parser) config(root *yaml.Node) *Config {
	c := defaultConfig()
	f, ok := p.fields("", root, "listen", "tls", "admin", "state_dir", "server", "memory", "log", "metrics", "upstreams", "routes", "apps")
	if !ok {
		return c
	}

	listen, listenNode, listenOK := p.required(f, root, "", "listen")
	if listenOK {
		listenOK = p.address("listen", listenNode, listen, true)
		c.Listen = listen
	}
	if v := f["tls"]; v != nil {
		c.TLS = p.tls("tls", v)
	}
	p.admin(c, f["admin"], root, listenOK)
	if v := f["state_dir"]; v != nil {
		if s, ok := p.str("state_dir", v); ok {
			if s == "" {
				p.add(v, "state_dir", "must not be empty (omit it for the default %q)", DefaultStateDir)
			}
			c.StateDir = s
		}
	}
	if v := f["server"]; v != nil {
		p.server(&c.Server, "server", v)
	}
	if v := f["memory"]; v != nil {
		c.Memory = p.memory("memory", v)
	}
	if v := f["log"]; v != nil {
		p.log(&c.Log, "log", v)
	}
	if v := f["metrics"]; v != nil {
		if mf, ok := p.fields("metrics", v, "app_labels"); ok {
			if n := mf["app_labels"]; n != nil {
				if x, ok := p.integer("metrics.app_labels", n, 0, 1000); ok {
					c.Metrics.AppLabels = int(x)
				}
			}
		}
	}
	declared, upstreamsOK := p.upstreams(c, f["upstreams"], root)
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

// tls reads `tls`; both files are required and must be readable.
func (p *parser) tls(path string, n *yaml.Node) *TLS {
	t := &TLS{}
	f, ok := p.fields(path, n, "cert_file", "key_file")
	if !ok {
		return t
	}
	for _, file := range []struct {
		name string
		dst  *string
	}{{"cert_file", &t.CertFile}, {"key_file", &t.KeyFile}} {
		s, v, ok := p.required(f, n, path, file.name)
		if !ok {
			continue
		}
		if problem := checkReadableFile(s); problem != "" {
			p.add(v, key(path, file.name), "%s", problem)
		}
		*file.dst = s
	}
	return t
}

// admin reads `admin`, whose listen address is required and must not
// collide with the data-plane listener (checked when listenOK).
func (p *parser) admin(c *Config, n, root *yaml.Node, listenOK bool) {
	parent := n
	if parent == nil {
		parent = root
	}
	f, ok := p.fields("admin", n, "listen", "token_file", "tokens")
	if !ok {
		return
	}
	tokenOK := true
	if v := f["token_file"]; v != nil {
		if tf, ok := p.str("admin.token_file", v); ok {
			if _, err := ReadTokenFile(tf); err != nil {
				p.add(v, "admin.token_file", "%v", err)
			}
			c.Admin.TokenFile = tf
		} else {
			tokenOK = false
		}
	}
	if v := f["tokens"]; v != nil {
		tokenOK = p.adminTokens(&c.Admin, v) && tokenOK
	}
	s, v, ok := p.required(f, parent, "admin", "listen")
	if !ok || !p.address("admin.listen", v, s, true) {
		return
	}
	c.Admin.Listen = s
	if c.Admin.TokenFile == "" && len(c.Admin.Tokens) == 0 && tokenOK && !isLoopbackListen(s) {
		p.add(v, "admin.token_file", "required when admin.listen is not a loopback address (127.0.0.0/8, ::1, localhost), got admin.listen %s", quote(s))
	}
	if listenOK && sameBinding(s, c.Listen) {
		p.add(v, "admin.listen", "must not bind the same port as listen (%q), got %q", c.Listen, s)
	}
}

// server reads `server`.
func (p *parser) server(s *Server, path string, n *yaml.Node) {
	f, ok := p.fields(path, n, "max_header_bytes", "read_header_timeout", "idle_timeout", "shutdown_timeout", "max_connections",
		"max_connections_per_ip", "http2_max_concurrent_streams", "paths", "underscores_in_headers")
	if !ok {
		return
	}
	if v := f["paths"]; v != nil {
		p.serverPaths(&s.Paths, key(path, "paths"), v)
	}
	if v := f["max_header_bytes"]; v != nil {
		if b, ok := p.size(key(path, "max_header_bytes"), v, minMaxHeaderBytes, maxMaxHeaderBytes); ok {
			s.MaxHeaderBytes = b
		}
	}
	p.durationField(f, path, "read_header_timeout", &s.ReadHeaderTimeout)
	p.durationField(f, path, "idle_timeout", &s.IdleTimeout)
	p.durationField(f, path, "shutdown_timeout", &s.ShutdownTimeout)
	if v := f["max_connections"]; v != nil {
		if i, ok := p.integer(key(path, "max_connections"), v, 0, maxMaxConnections); ok {
			s.MaxConnections = int(i)
		}
	}
	if v := f["max_connections_per_ip"]; v != nil {
		if i, ok := p.integer(key(path, "max_connections_per_ip"), v, 0, maxMaxConnections); ok {
			s.MaxConnectionsPerIP = int(i)
		}
	}
	if v := f["http2_max_concurrent_streams"]; v != nil {
		if i, ok := p.integer(key(path, "http2_max_concurrent_streams"), v, minHTTP2Streams, maxHTTP2Streams); ok {
			s.HTTP2MaxConcurrentStreams = int(i)
		}
	}
	if v := f["underscores_in_headers"]; v != nil {
		if u, ok := p.oneOf(key(path, "underscores_in_headers"), v, underscoreModes); ok {
			s.UnderscoresInHeaders = u
		}
	}
}

// serverPaths reads `server.paths`.
func (p *parser) serverPaths(sp *ServerPaths, path string, n *yaml.Node) {
	f, ok := p.fields(path, n, "escaped_slashes")
	if !ok {
		return
	}
	if v := f["escaped_slashes"]; v != nil {
		if s, ok := p.oneOf(key(path, "escaped_slashes"), v, escapedSlashesModes); ok {
			sp.EscapedSlashes = s
		}
	}
}

// durationField sets *dst from f[name] when the file sets it.
func (p *parser) durationField(f map[string]*yaml.Node, path, name string, dst *time.Duration) bool {
	if v := f[name]; v != nil {
		d, ok := p.duration(key(path, name), v)
		if ok {
			*dst = d
		}
		return ok
	}
	return true
}

// log reads `log`.
func (p *parser) log(l *Log, path string, n *yaml.Node) {
	f, ok := p.fields(path, n, "level", "access")
	if !ok {
		return
	}
	if v := f["level"]; v != nil {
		if s, ok := p.oneOf(key(path, "level"), v, logLevels); ok {
			l.Level = s
		}
	}
	if v := f["access"]; v != nil {
		if b, ok := p.boolean(key(path, "access"), v); ok {
			l.Access = b
		}
	}
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
	f, ok := p.fields(path, n, "balancer", "least_request", "consistent_hash", "discovery", "endpoints",
		"timeouts", "max_idle_conns_per_endpoint", "retry", "limits", "health_check", "outlier_detection", "panic_threshold",
		"slow_start", "zones")
	if !ok {
		return u
	}
	balancerOK := true
	if v := f["balancer"]; v != nil {
		var s string
		if s, balancerOK = p.oneOf(key(path, "balancer"), v, balancers); balancerOK {
			u.Balancer = s
		}
	}
	p.balancerOptions(u, path, n, f, balancerOK)
	if v := f["discovery"]; v != nil {
		u.Discovery = p.discovery(key(path, "discovery"), v)
	}
	u.Endpoints = p.endpoints(key(path, "endpoints"), f["endpoints"], n, f["discovery"] != nil)
	if v := f["timeouts"]; v != nil {
		p.timeouts(&u.Timeouts, key(path, "timeouts"), v)
	}
	if v := f["max_idle_conns_per_endpoint"]; v != nil {
		if i, ok := p.integer(key(path, "max_idle_conns_per_endpoint"), v, 1, maxIdleConnsPerEndpointCap); ok {
			u.MaxIdleConnsPerEndpoint = int(i)
		}
	}
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
	if v := f["panic_threshold"]; v != nil {
		if t, ok := p.number(key(path, "panic_threshold"), v, 0, 100); ok {
			u.PanicThreshold = t
		}
	}
	p.durationField(f, path, "slow_start", &u.SlowStart)
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
	f, ok := p.fields(path, n, "attempts", "on", "per_try_timeout", "backoff", "budget", "replay_body_limit")
	if !ok {
		return r
	}
	if v := f["attempts"]; v != nil {
		if i, ok := p.integer(key(path, "attempts"), v, minRetryAttempts, maxRetryAttempts); ok {
			r.Attempts = int(i)
		}
	}
	if v := f["on"]; v != nil {
		if on, ok := p.retryOn(key(path, "on"), v, forRoute); ok {
			r.On = on
		}
	}
	p.durationField(f, path, "per_try_timeout", &r.PerTryTimeout)
	if v := f["backoff"]; v != nil {
		p.backoff(&r.Backoff, key(path, "backoff"), v)
	}
	if v := f["budget"]; v != nil && !forRoute {
		p.retryBudget(&r.Budget, key(path, "budget"), v)
	}
	if v := f["replay_body_limit"]; v != nil {
		if b, ok := p.size(key(path, "replay_body_limit"), v, 0, maxReplayBodyLimit); ok {
			r.ReplayBodyLimit = b
		}
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
	f, ok := p.fields(path, n, "base", "max")
	if !ok {
		return
	}
	baseOK, maxOK := true, true
	if v := f["base"]; v != nil {
		b.Base, baseOK = p.duration(key(path, "base"), v)
	}
	if v := f["max"]; v != nil {
		b.Max, maxOK = p.duration(key(path, "max"), v)
	}
	if !baseOK || !maxOK || b.Max >= b.Base {
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

// retryBudget reads an upstream's `retry.budget`.
func (p *parser) retryBudget(b *RetryBudget, path string, n *yaml.Node) {
	f, ok := p.fields(path, n, "ratio", "min_per_second")
	if !ok {
		return
	}
	if v := f["ratio"]; v != nil {
		if r, ok := p.number(key(path, "ratio"), v, 0, maxRetryBudgetRatio); ok {
			b.Ratio = r
		}
	}
	if v := f["min_per_second"]; v != nil {
		if m, ok := p.number(key(path, "min_per_second"), v, 0, maxRetryMinPerSecond); ok {
			b.MinPerSecond = m
		}
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
	f, ok := p.fields(path, n, "address", "weight", "zone")
	if !ok {
		return e, nil, false
	}
	zoneOK := true
	if z := f["zone"]; z != nil {
		e.Zone, zoneOK = p.zoneName(key(path, "zone"), z)
	}
	s, v, ok := p.required(f, n, path, "address")
	if ok {
		ok = p.address(key(path, "address"), v, s, false)
		e.Address = s
	}
	if w := f["weight"]; w != nil {
		weight, wok := p.integer(key(path, "weight"), w, 0, maxWeight)
		ok = ok && wok
		e.Weight = uint32(weight)
	}
	return e, v, ok && zoneOK
}

// timeouts reads an upstream's `timeouts`.
func (p *parser) timeouts(t *Timeouts, path string, n *yaml.Node) {
	f, ok := p.fields(path, n, "connect", "response_header", "idle")
	if !ok {
		return
	}
	p.durationField(f, path, "connect", &t.Connect)
	p.durationField(f, path, "response_header", &t.ResponseHeader)
	p.durationField(f, path, "idle", &t.Idle)
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
		r, s, nameNode, upNode := p.route(rp, item)
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
		path := key(index("routes", i), "match")
		if len(r.Match.Methods) == 0 {
			if g.any >= 0 {
				p.add(seen[i].node, path, "duplicates routes[%d] (same host and path_prefix)", g.any)
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
			p.add(seen[i].node, path, "duplicates routes[%d] (same host, path_prefix and method %s)", dup, quote(dupMethod))
			continue
		}
		for _, m := range r.Match.Methods {
			g.byMethod[m] = i
		}
	}
}

// route reads one item of `routes`. It returns the nodes of the name and
// upstream when they are valid, for the cross-route checks.
func (p *parser) route(path string, n *yaml.Node) (r Route, s routeSeen, nameNode, upNode *yaml.Node) {
	r = defaultRoute()
	s.node = n
	if n.Kind == yaml.AliasNode {
		return r, s, nil, nil
	}
	if isNull(n) || n.Kind != yaml.MappingNode {
		p.add(n, path, "must be a mapping with name, match and upstream, got %s", describe(n))
		return r, s, nil, nil
	}
	f, ok := p.fields(path, n, "name", "match", "upstream", "max_body_bytes", "timeout", "retry", "priority",
		"auth", "anonymous_limits", "forward_trailers", "upgrades")
	if !ok {
		return r, s, nil, nil
	}
	if name, v, ok := p.required(f, n, path, "name"); ok {
		r.Name = name
		if validName(name) {
			nameNode = v
		} else {
			p.add(v, key(path, "name"), "%s, got %s", nameRule, quote(name))
		}
	}
	if m := f["match"]; m != nil {
		s.node = m
		s.matchOK = p.match(&r.Match, key(path, "match"), m)
	} else {
		s.matchOK = true
	}
	if up, v, ok := p.required(f, n, path, "upstream"); ok {
		r.Upstream = up
		upNode = v
	}
	if v := f["max_body_bytes"]; v != nil {
		if b, ok := p.size(key(path, "max_body_bytes"), v, 0, maxSize); ok {
			r.MaxBodyBytes = b
		}
	}
	p.durationField(f, path, "timeout", &r.Timeout)
	if v := f["retry"]; v != nil {
		r.Retry = p.retry(key(path, "retry"), v, true, r.Upstream)
	}
	if v := f["priority"]; v != nil {
		if pr, ok := p.oneOf(key(path, "priority"), v, priorities); ok {
			r.Priority = pr
		}
	}
	authOK := true
	if v := f["auth"]; v != nil {
		var a string
		if a, authOK = p.oneOf(key(path, "auth"), v, authModes); authOK {
			r.Auth = a
		}
	}
	if v := f["anonymous_limits"]; v != nil {
		if authOK && r.Auth != AuthNone {
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
	return r, s, nameNode, upNode
}

// match reads a route's `match` and reports whether it was all valid.
func (p *parser) match(m *Match, path string, n *yaml.Node) bool {
	f, ok := p.fields(path, n, "host", "path_prefix", "methods", "raw_path")
	if !ok {
		return false
	}
	if v := f["raw_path"]; v != nil {
		b, bok := p.boolean(key(path, "raw_path"), v)
		m.RawPath = b
		ok = ok && bok
	}
	if v := f["host"]; v != nil {
		hp := key(path, "host")
		s, sok := p.str(hp, v)
		if sok {
			host, problem := normalizeMatchHost(s)
			if problem != "" {
				p.add(v, hp, "%s, got %s", problem, quote(s))
				sok = false
			}
			m.Host = host
		}
		ok = ok && sok
	}
	if v := f["path_prefix"]; v != nil {
		pp := key(path, "path_prefix")
		s, sok := p.str(pp, v)
		if sok {
			if problem := checkPathPrefix(s); problem != "" {
				p.add(v, pp, "%s, got %s", problem, quote(s))
				sok = false
			}
			m.PathPrefix = s
		}
		ok = ok && sok
	}
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

// address reports whether s is a valid host:port for a listener or an
// endpoint (see checkAddress), reporting it if not.
func (p *parser) address(path string, n *yaml.Node, s string, listener bool) bool {
	if problem := checkAddress(s, listener); problem != "" {
		p.add(n, path, "invalid address %s: %s", quote(s), problem)
		return false
	}
	return true
}
