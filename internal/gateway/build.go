package gateway

import (
	"fmt"
	"slices"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/discovery"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/grpcwire"
	"github.com/levee-gw/levee/internal/health"
	"github.com/levee-gw/levee/internal/proxy"
	"github.com/levee-gw/levee/internal/ratelimit"
	"github.com/levee-gw/levee/internal/retrybudget"
	"github.com/levee-gw/levee/internal/upstream"
	"github.com/levee-gw/levee/internal/urlpath"
)

// endpoints lists upstream name's endpoints as configured or as its
// discovery feed last applied, each with the live counters it keeps while
// it exists (created here on first sight).
func (g *Gateway) endpoints(name string, uc *config.Upstream) []*endpoint.Endpoint {
	var list []discovery.Instance
	if f := g.feeds[name]; f != nil {
		list, _ = f.Instances()
	} else {
		for _, ec := range uc.Endpoints {
			list = append(list, discovery.Instance{Address: ec.Address, Weight: ec.Weight * endpoint.WeightScale, Zone: ec.Zone})
		}
	}
	eps := make([]*endpoint.Endpoint, 0, len(list))
	for _, in := range list {
		key := statsKey{name, in.Address}
		st := g.pools.stats[key]
		if st == nil {
			st = &endpoint.Stats{}
			g.pools.stats[key] = st
		}
		eps = append(eps, &endpoint.Endpoint{Address: in.Address, Weight: in.Weight, Zone: in.Zone, Stats: st})
	}
	return eps
}

// balance applies the health manager's plan to eps and returns upstream
// name's Balance over the plan's effective endpoints.
func (g *Gateway) balance(name string, uc *config.Upstream, eps []*endpoint.Endpoint) *proxy.Balance {
	o := healthOptions(uc)
	if o.Check != nil {
		o.Check.Dial = g.healthDial(name)   // a TLS upstream is checked over TLS
		o.Check.HTTPGet = g.healthGet(name) // an HTTP/2 upstream over HTTP/2
		o.Check.GRPCCheck = g.healthGRPC(name)
	}
	plan := g.health.Apply(name, o, eps)
	return g.pools.balance(name, uc, eps, plan, g.metrics.PickerFallback(name))
}

// buildTable turns a validated configuration into the proxy's routing
// snapshot. Called with g.mu held (or before Start).
func (g *Gateway) buildTable(cfg *config.Config) (*proxy.Table, error) {
	liveUpstreams := map[string]bool{}
	liveStats := map[statsKey]bool{}
	upstreams := make(map[string]*proxy.Upstream, len(cfg.Upstreams))
	ordered := make([]*proxy.Upstream, 0, len(cfg.Upstreams))
	for _, name := range cfg.UpstreamOrder {
		uc := cfg.Upstreams[name]
		eps := g.endpoints(name, uc)
		for _, ep := range eps {
			liveStats[statsKey{name, ep.Address}] = true
		}
		tr := g.pools.transport(name, upstream.Options{
			Connect:            uc.Timeouts.Connect,
			ResponseHeader:     uc.Timeouts.ResponseHeader,
			Idle:               uc.Timeouts.Idle,
			MaxIdlePerEndpoint: uc.MaxIdleConnsPerEndpoint,
			TLS:                g.upTLS[name],
			Protocol:           upstreamProtocol(uc.Protocol),
			HTTP2:              h2Options(uc),
		})
		tr.OnH2Error(g.h2Metrics.Hook(name))
		up := &proxy.Upstream{Name: name, Transport: tr, GRPCWeb: uc.Protocol != config.UpstreamProtocolHTTP1} // gRPC-Web needs HTTP/2 upstream
		up.SetBalance(g.balance(name, uc, eps))
		rb := uc.RetryBudget()
		budget, err := g.pools.budget(name, retrybudget.Options{Ratio: rb.Ratio, MinPerSecond: rb.MinPerSecond, Window: retryBudgetWindow})
		if err != nil {
			return nil, err
		}
		up.Budget = budget
		if up.Admission, err = g.pools.limiter(name, uc.Limits, limiterTuning{}); err != nil {
			return nil, err
		}
		liveUpstreams[name] = true
		upstreams[name] = up
		ordered = append(ordered, up)
	}
	dataUps, dataOrdered, err := g.dataUpstreams(cfg, liveStats)
	if err != nil {
		return nil, err
	}
	for name := range dataUps {
		liveUpstreams[name] = true
	}
	ordered = append(ordered, dataOrdered...)
	routes := make([]*proxy.Route, 0, len(cfg.Routes))
	for i := range cfg.Routes {
		rc := &cfg.Routes[i]
		retry, up := rc.Retry, upstreams[rc.Upstream]
		if rc.Data != nil {
			up = dataUps[rc.Data.Source] // a data query is retried only when its route says so
		} else if uc := cfg.Upstreams[rc.Upstream]; retry == nil && uc != nil { // nil: a route that answers itself
			retry = uc.Retry
		}
		anon, err := anonymousPolicy(rc.AnonymousLimits)
		if err != nil {
			return nil, fmt.Errorf("routes[%s].anonymous_limits: %w", rc.Name, err)
		}
		auth, err := authMode(rc.Auth)
		if err != nil {
			return nil, fmt.Errorf("routes[%s].auth: %w", rc.Name, err)
		}
		rt := &proxy.Route{
			Auth:           auth,
			AnonymousLimit: anon,
			Name:           rc.Name,
			Host:           rc.Match.Host,
			Path:           rc.Match.Path,
			PathTemplate:   rc.Match.PathTemplate,
			PathRegex:      rc.Match.PathRegex,
			PathPrefix:     rc.Match.Prefix(),
			Methods:        rc.Match.Methods,
			Upstream:       up,
			MaxBodyBytes:   rc.MaxBodyBytes,
			Timeout:        rc.Timeout,
			Retry:          retryPolicy(retry),
			Priority:       priority(rc.Priority),
			RawPath:        rc.Match.RawPath,

			Upgrades:        rc.Upgrades,
			ForwardTrailers: rc.ForwardTrailers,
			Compression:     proxyCompression(rc.Compression),
		}
		if ac := cfg.RouteAccess(rc); ac != nil && (len(ac.Allow) > 0 || len(ac.Deny) > 0) {
			rt.Access = proxy.NewAccess(ac.AllowPrefixes(), ac.DenyPrefixes())
		}
		if rt.JWT, err = g.jwtIssuers(cfg, rc); err != nil {
			return nil, fmt.Errorf("routes[%s].jwt: %w", rc.Name, err)
		}
		if rt.ForwardAuth, err = g.forwardAuth(cfg, rc); err != nil {
			return nil, err
		}
		if rt.JWTSubjectLimits, err = jwtSubjectLimits(cfg, rc); err != nil {
			return nil, fmt.Errorf("routes[%s].jwt: %w", rc.Name, err)
		}
		rt.HeaderConds, rt.QueryConds = rc.Match.Conds()
		if rc.DataPath() { // a data route answers only its own path
			rt.Path, rt.PathPrefix = rt.PathPrefix, ""
		}
		if rt.Rewrite, err = proxyRewrite(rc); err != nil {
			return nil, fmt.Errorf("routes[%s].rewrite: %w", rc.Name, err)
		}
		rt.BodyTimeout, rt.SendTimeout, rt.BufferBodyBytes = cfg.Server.BodyTimeout, cfg.Server.SendTimeout, bufferBodyBytes(retry)
		rt.BufferAnswerBytes = cfg.Server.AnswerBuffer
		if rc.Data != nil {
			if rt.Forwarder, err = g.dataRoute(cfg, rc); err != nil {
				return nil, fmt.Errorf("routes[%s].data: %w", rc.Name, err)
			}
			rt.SendTimeout = rc.Data.SendTimeout
		}
		if rc.SendTimeout > 0 {
			rt.SendTimeout = rc.SendTimeout
		}
		if err := routeSteps(rc, rt); err != nil { // headers, redirect, respond, cors (steps.go)
			return nil, fmt.Errorf("routes[%s]: %w", rc.Name, err)
		}
		rt.Mirror = g.proxyMirror(rc, upstreams) // mirror.go
		if len(rc.Split) > 0 {                   // last: each side copies the finished route (split.go)
			if err := g.splitRoute(cfg, rc, rt, upstreams); err != nil {
				return nil, fmt.Errorf("routes[%s].split: %w", rc.Name, err)
			}
		}
		routes = append(routes, rt)
	}
	g.pools.retain(liveUpstreams, liveStats)
	g.health.Retain(liveUpstreams)
	t := proxy.NewTable(routes, ordered, g.metrics).WithEscapedSlashes(escapedSlashes(cfg.Server.Paths.EscapedSlashes))
	t.SetDrainTimeout(cfg.Server.DrainTimeout)
	return t, nil
}

// escapedSlashes maps server.paths.escaped_slashes to the request path's
// mode.
func escapedSlashes(s string) urlpath.EscapedSlashes {
	switch s {
	case config.EscapedSlashesKeep:
		return urlpath.Keep
	case config.EscapedSlashesDecode:
		return urlpath.Decode
	}
	return urlpath.Reject
}

// underscoreMode maps server.underscores_in_headers to the handler's mode.
func underscoreMode(s string) proxy.UnderscoreMode {
	switch s {
	case config.UnderscoresAllow:
		return proxy.UnderscoresAllow
	case config.UnderscoresReject:
		return proxy.UnderscoresReject
	}
	return proxy.UnderscoresDrop
}

// authMode maps a route's configured auth to the request path's. It fails
// closed: a mode config accepts but this map does not know (a scheme added
// to config alone) refuses the build instead of becoming "none", which
// would admit anyone.
func authMode(a string) (proxy.AuthMode, error) {
	switch a {
	case config.AuthNone:
		return proxy.AuthNone, nil
	case config.AuthAPIKey:
		return proxy.AuthAPIKey, nil
	case config.AuthHMAC:
		return proxy.AuthHMAC, nil
	case config.AuthJWT:
		return proxy.AuthJWT, nil
	case config.AuthForward:
		return proxy.AuthForward, nil
	case config.AuthBasic:
		return proxy.AuthBasic, nil
	case config.AuthClientCert:
		return proxy.AuthClientCert, nil
	}
	return proxy.AuthNone, fmt.Errorf("auth mode %q has no request-path mode", a)
}

// anonymousPolicy turns a route's anonymous_limits into a rate policy; nil
// is no limit.
func anonymousPolicy(l *config.AnonymousLimits) (ratelimit.Policy, error) {
	if l == nil {
		return ratelimit.Policy{}, nil
	}
	r, err := ratelimit.NewRate(l.Rate, int64(l.Burst))
	return ratelimit.Policy{Rate: r}, err
}

// priority maps a route's configured priority to admission's.
func priority(p string) admission.Priority {
	switch p {
	case config.PriorityCritical:
		return admission.Critical
	case config.PrioritySheddable:
		return admission.Sheddable
	}
	return admission.Normal
}

// bufferBodyBytes is the largest request body of known length a route
// reads whole before admission (proxy.Route.BufferBodyBytes): its retry's
// replay_body_limit when it has a retry block (the same buffer then serves
// every attempt; 0 there turns buffering off for the route), else the
// default replay limit (64KiB).
func bufferBodyBytes(r *config.Retry) int64 {
	if r == nil {
		return config.DefaultRetryReplayBodyLimit
	}
	return r.ReplayBodyLimit
}

// retryPolicy turns a validated retry block into the proxy's policy (nil:
// no retries).
func retryPolicy(r *config.Retry) *proxy.RetryPolicy {
	if r == nil || r.Attempts < 2 {
		return nil
	}
	return &proxy.RetryPolicy{
		Attempts:              r.Attempts,
		OnConnectFailure:      r.On.ConnectFailure,
		OnResetBeforeResponse: r.On.ResetBeforeResponse,
		OnRefusedStream:       r.On.RefusedStream,
		OnStatus:              r.On.Statuses,
		OnGRPC:                grpcMask(r.On.GRPC),
		PerTryTimeout:         r.PerTryTimeout,
		BackoffBase:           r.Backoff.Base,
		BackoffMax:            r.Backoff.Max,
		ReplayBodyLimit:       r.ReplayBodyLimit,
	}
}

// adminView adapts the gateway to the admin package's Gateway interface.
type adminView struct{ g *Gateway }

func (v adminView) Ready() (bool, string) { return v.g.Ready() }
func (v adminView) Reload() error         { return v.g.Reload() }

func (v adminView) feed(name string) *feed {
	v.g.mu.Lock()
	defer v.g.mu.Unlock()
	return v.g.feeds[name]
}

// Notes lists upstreams served from their on-disk snapshot, or from
// nothing, because their registry has not delivered since start.
func (v adminView) Notes() []string {
	v.g.mu.Lock()
	feeds := make([]*feed, 0, len(v.g.feeds))
	for _, name := range v.g.cfg.UpstreamOrder {
		if f := v.g.feeds[name]; f != nil {
			feeds = append(feeds, f)
		}
	}
	v.g.mu.Unlock()
	notes := []string{}
	for _, f := range feeds {
		notes = f.AppendReadyNotes(notes)
	}
	if dn := v.g.dataAPIs.notes.Load(); dn != nil {
		notes = append(notes, *dn...)
	}
	if rn := v.g.rollbackNote(); rn != "" {
		notes = append(notes, rn)
	}
	return append(notes, v.g.clusterNotes()...)
}

// balance returns upstream name's Balance: its picker for the configured
// balancer over the health plan's effective endpoints (base are the
// configured ones, parallel), with zone tiers when the upstream has zones
// and is not in panic mode, guarded so that a picker failure falls back to
// a uniform pick over the same set (counted by onFallback). The previous
// Balance is returned as is while its inputs are unchanged.
func (p *pools) balance(name string, uc *config.Upstream, base []*endpoint.Endpoint, plan health.Plan, onFallback func()) *proxy.Balance {
	in := newPickerInputs(uc, base, plan)
	prev, had := p.pickers[name]
	if had && prev.inputs.equal(in) {
		return prev.bal
	}
	b := &proxy.Balance{Endpoints: plan.Endpoints, Down: !slices.Contains(plan.Healthy, true)} // Down: a split's side gives its share away
	if ch := uc.ConsistentHash; ch != nil {
		kind, key := ch.Key()
		b.HashOn = &proxy.HashOn{Kind: kind, Name: key}
	}
	built := balance.Build(balanceSpec(uc, plan.Panic), base, plan.Endpoints, plan.Healthy, balance.Built{Picker: prev.raw, Tiers: prev.tiers})
	b.Tiers = built.Members
	if uc.LeastRequest != nil && uc.LeastRequest.EWMA && len(built.Observers) > 0 {
		b.Observer = balance.LeastRequestSet(built.Observers)
	}
	b.Picker = balance.Guarded(built.Picker, b.Endpoints, onFallback)
	p.pickers[name] = pooledPicker{inputs: in, raw: built.Picker, tiers: built.Tiers, bal: b}
	return b
}

// balanceSpec is the picker spec of uc: its balancer, least_request
// options, and zones unless in panic mode.
func balanceSpec(uc *config.Upstream, panic bool) balance.Spec {
	s := balance.Spec{}
	switch uc.Balancer {
	case config.BalancerLeastRequest:
		s.Kind = balance.KindLeastRequest
	case config.BalancerConsistentHash:
		s.Kind = balance.KindConsistentHash
	}
	if lr := uc.LeastRequest; lr != nil {
		s.LeastRequest.EWMA, s.LeastRequest.Tau = lr.EWMA, lr.Tau
	}
	if z := uc.Zones; z != nil && !panic {
		s.Zones = &balance.ZoneSpec{Local: z.Local, Failover: z.Failover, Overprovisioning: z.Overprovisioning}
	}
	return s
}

// grpcMask is the bit set of the gRPC statuses named (config checked the
// names: grpcwire.CodeByName knows each).
func grpcMask(names []string) uint32 {
	var m uint32
	for _, n := range names {
		if c, ok := grpcwire.CodeByName(n); ok {
			m |= 1 << c
		}
	}
	return m
}
