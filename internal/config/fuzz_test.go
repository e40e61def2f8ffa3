package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/limits"
)

// FuzzParse feeds Parse arbitrary bytes. Parse must not panic, must return
// exactly one of a Config and an *Errors, and a Config it returns must
// hold the invariants its doc comments promise. Crashers found are kept
// under testdata/fuzz/FuzzParse/ and replayed by plain "go test".
func FuzzParse(f *testing.F) {
	inputs, _ := filepath.Glob("testdata/valid/*.yaml")
	for _, in := range inputs {
		data, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(ExampleYAML))
	for _, s := range []string{
		"",
		"~",
		"[]",
		"listen: 8080",
		"a: [\n",
		"a: 1\n---\nb: 2\n",
		"x: &a [1,2]\ny: [*a,*a]\n",
		"<<: {listen: ':80'}\n",
		"? [a]\n: 1\n",
		head + upstreams + "        weight: \"0\"\n" + routes,
		head + upstreams + routes + "    auth: none\n    anonymous_limits: {rate: 0.5}\napps:\n  - {id: a, grants: [api], api_key_sha256: [" + strings.Repeat("ab", 32) + "], limits: {rate: 2.5, quota: {requests: 1, per: 1h}, max_concurrency: 3}, route_limits: {api: {rate: 1, burst: 2}}}\n  - {id: b, status: suspended, grants: [vidoe, api, api], limits: {burst: 1}}\n",
		head + upstreams + "        weight: 2.5\n" + routes,
		head + upstreams + routes + "    auth: none\n    anonymous_limits: {rate: 0.000001, burst: 1000}\napps:\n  - {id: a, grants: [api], limits: {rate: 0.0000001, burst: 1001, quota: {requests: 1000000000001, per: 999ms}}, route_limits: {api: {rate: 0.5, burst: 500000001}}}\n",
		"listen: \":8080\"\nadmin: {listen: \":9090\", tokens: [{file: /nonexistent, scope: read}, {file: /nonexistent, scope: admin}, {scope: write}, ~, x]}\n" + upstreams + routes,
		head + upstreams + "    timeouts: {connect: 5, idle: -1s, response_header: \"5 seconds\"}\n" + routes,
		head + upstreams + "routes:\n  - {name: a, upstream: video, match: {host: 'a.*.com', methods: [get, GET, 'G T']}}\n  - {name: a, upstream: vidoe}\n",
		head + "tls: {cert_file: /nonexistent, key_file: testdata/tls}\nserver: {max_header_bytes: 10 parsecs}\n" + upstreams + routes,
		"listen: \":80\"\nadmin: {listen: \":80\"}\nupstreams: {v: {endpoints: [{address: \"[::1]:0\", weight: 0}]}}\nroutes: [~, 5, {name: r}]\n",
		head + upstreams + "    retry:\n      attempts: 3\n      on: [connect_failure, refused_stream, reset_before_response, 502, 503, 504]\n      per_try_timeout: 2s\n      backoff: {base: 25ms, max: 250ms}\n      budget: {ratio: 0.2, min_per_second: 5}\n      replay_body_limit: 64KiB\n" + routes + "    timeout: 30s\n    retry: {attempts: 2, on: [connect_failure]}\n",
		head + upstreams + "    retry: {attempts: 0, on: [conect_failure, \"502\", 502, 502, 600, ~], backoff: {base: 1s, max: 1ms}, budget: {ratio: .nan, min_per_second: 1e7}}\n" + routes + "    retry: {on: [], budget: ~}\n    timeout: 0s\n",
		head + "upstreams:\n  video:\n    balancer: least_request\n    least_request: {ewma: true, tau: 10s}\n    discovery:\n      file: /etc/levee/video.json\n      max_drop_fraction: 0.5\n      confirm_after: 30s\n      max_weight: 10000\n" + routes,
		head + "upstreams:\n  video:\n    balancer: consistent_hash\n    consistent_hash: {hash_on: \"header:x-user\"}\n    discovery:\n      etcd: {endpoints: [\"127.0.0.1:2379\", \"https://etcd:2379\"], prefix: /levee/services/video/, dial_timeout: 2s}\n    endpoints: [{address: 10.0.0.1:80, weight: 0}]\n" + routes,
		head + "upstreams:\n  video:\n    balancer: consistent_hash\n    consistent_hash: {hash_on: \"cookie:sid\"}\n    discovery: {push: true, max_drop_fraction: 1}\n" + routes,
		head + "upstreams:\n  video:\n    balancer: consistent_hash\n    consistent_hash: {hash_on: \"query:user\"}\n    discovery: {push: false, file: v.json}\n  a: {balancer: consistent_hash, consistent_hash: {hash_on: client_ip}, endpoints: [{address: 10.0.0.1:80}]}\n  b: {balancer: consistent_hash, consistent_hash: {hash_on: path}, discovery: {push: true}}\n" + routes,
		head + "upstreams:\n  video:\n    least_request: {ewma: 1, tau: 0s}\n    consistent_hash: {hash_on: \"header:\"}\n    discovery: {file: a, etcd: {endpoints: [grpc://x:1, \"127.0.0.1\"], prefix: x}, push: true, max_drop_fraction: 0, confirm_after: 0s, max_weight: 0}\n    endpoints: []\n" + routes,
		head + "upstreams:\n  video:\n    balancer: consistent_hash\n    discovery: {}\n  audio: {discovery: ~}\n" + routes,
		head + "server: {max_connections_per_ip: 8, http2_max_concurrent_streams: 1}\nmemory: {limit: 2GiB, soft_watermark: 0.8, hard_watermark: 0.9}\n" + upstreams + "    limits: {max_concurrency: 64, max_queue: 128, queue_timeout: 50ms, max_per_consumer: 0}\n" + routes + "    priority: sheddable\n",
		head + "memory: {limit: 64MiB, hard_watermark: 0.5}\n" + upstreams + "    limits: {max_concurrency: adaptive, min: 512, max: 4, max_queue: 0}\n" + routes + "    priority: critical\n",
		head + "memory: {soft_watermark: 1, hard_watermark: .nan}\nserver: {http2_max_concurrent_streams: 0, max_connections_per_ip: -1}\n" + upstreams + "    limits: {max_concurrency: lots, min: 1, max: 2, queue_timeout: 0s}\n  a: {endpoints: [{address: 10.0.0.1:80}], limits: {max_concurrency: 3, min: 1}}\n  b: {endpoints: [{address: 10.0.0.1:80}], limits: {}}\n" + routes + "    priority: high\n",
	} {
		f.Add([]byte(s))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			var errs *Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want *Errors: %v", err, err)
			}
			if cfg != nil {
				t.Fatal("Parse returned both a Config and an error")
			}
			if len(*errs) == 0 {
				t.Fatal("empty *Errors")
			}
			for _, fe := range *errs {
				if fe.Message == "" {
					t.Fatalf("FieldError with no message at %q", fe.Path)
				}
			}
			return
		}
		if cfg == nil {
			t.Fatal("Parse returned neither a Config nor an error")
		}
		checkInvariants(t, cfg)
	})
}

// checkInvariants fails t if cfg breaks a promise of the Config docs.
func checkInvariants(t *testing.T, cfg *Config) {
	t.Helper()
	if (cfg.Listen == "") == (len(cfg.Listeners) == 0) || cfg.Admin.Listen == "" || cfg.StateDir == "" {
		t.Fatalf("empty required address or state_dir, or both listen and listeners: %+v", cfg)
	}
	for _, l := range cfg.ListenerSet() {
		if checkAddress(l.Listen, true) != "" {
			t.Fatalf("invalid listen address accepted: %q", l.Listen)
		}
	}
	if checkAddress(cfg.Admin.Listen, true) != "" {
		t.Fatalf("invalid admin.listen address accepted: %q", cfg.Admin.Listen)
	}
	if len(cfg.Upstreams) == 0 || len(cfg.UpstreamOrder) != len(cfg.Upstreams) || len(cfg.Routes) == 0 {
		t.Fatalf("%d upstreams, %d in order, %d routes", len(cfg.Upstreams), len(cfg.UpstreamOrder), len(cfg.Routes))
	}
	for _, name := range cfg.UpstreamOrder {
		u := cfg.Upstreams[name]
		if u == nil || u.Name != name || !validName(name) || len(u.Endpoints) == 0 && (u.Discovery == nil || u.Endpoints != nil) {
			t.Fatalf("bad upstream %q: %+v", name, u)
		}
		checkBalancer(t, u)
		if u.Discovery != nil {
			checkDiscovery(t, name, u.Discovery)
		}
		if u.Limits != nil {
			checkLimits(t, name, u.Limits)
		}
		checkHealth(t, u)
		if u.Timeouts.Connect <= 0 || u.Timeouts.ResponseHeader <= 0 || u.Timeouts.Idle <= 0 {
			t.Fatalf("upstream %q has a non-positive timeout: %+v", name, u.Timeouts)
		}
		for _, e := range u.Endpoints {
			if e.Weight > maxWeight || checkAddress(e.Address, false) != "" || e.Zone != "" && !validName(e.Zone) {
				t.Fatalf("upstream %q has a bad endpoint %+v", name, e)
			}
		}
	}
	names := map[string]bool{}
	for _, r := range cfg.Routes {
		direct := r.Redirect != nil || r.Respond != nil
		if names[r.Name] || !validName(r.Name) || (cfg.Upstreams[r.Upstream] == nil) != direct {
			t.Fatalf("bad route %+v", r)
		}
		checkSteps(t, r)
		names[r.Name] = true
		if r.Match.PathPrefix == "" || r.Match.PathPrefix[0] != '/' || r.MaxBodyBytes < 0 {
			t.Fatalf("bad route %+v", r)
		}
		if h, problem := normalizeMatchHost(r.Match.Host); problem != "" || h != r.Match.Host {
			t.Fatalf("route %q has host %q not normalised", r.Name, r.Match.Host)
		}
	}
	for _, name := range cfg.UpstreamOrder {
		if r := cfg.Upstreams[name].Retry; r != nil {
			checkRetry(t, "upstreams."+name, r, false)
		}
		if b := cfg.Upstreams[name].RetryBudget(); !(b.Ratio >= 0 && b.Ratio <= 1 && b.MinPerSecond >= 0 && b.MinPerSecond <= maxRetryMinPerSecond) {
			t.Fatalf("upstream %q has a bad retry budget %+v", name, b)
		}
	}
	checkApps(t, cfg)
	for _, r := range cfg.Routes {
		if r.Priority != PriorityCritical && r.Priority != PriorityNormal && r.Priority != PrioritySheddable {
			t.Fatalf("route %q has priority %q", r.Name, r.Priority)
		}
		if r.Timeout < 0 {
			t.Fatalf("route %q has timeout %v", r.Name, r.Timeout)
		}
		if r.Retry != nil {
			checkRetry(t, "route "+r.Name, r.Retry, true)
		}
	}
	s := cfg.Server
	if s.MaxHeaderBytes < minMaxHeaderBytes || s.MaxHeaderBytes > maxMaxHeaderBytes || s.ReadHeaderTimeout <= 0 ||
		s.IdleTimeout <= 0 || s.ShutdownTimeout <= 0 || s.MaxConnections < 0 || s.MaxConnectionsPerIP < 0 ||
		s.HTTP2MaxConcurrentStreams < 1 || s.HTTP2MaxConcurrentStreams > maxHTTP2Streams {
		t.Fatalf("bad server limits %+v", s)
	}
	if m := cfg.Memory; m != nil && (m.Limit < minMemoryLimit || m.Limit > maxMemoryLimit ||
		!(m.SoftWatermark > 0 && m.SoftWatermark < m.HardWatermark && m.HardWatermark <= 1)) {
		t.Fatalf("bad memory guard %+v", m)
	}
}

// checkLimits fails t if l breaks a promise of the Limits docs.
func checkLimits(t *testing.T, name string, l *Limits) {
	t.Helper()
	if l.Adaptive {
		if l.MaxConcurrency != 0 || l.Min < 1 || l.Min > l.Max || l.Max > maxConcurrencyCap {
			t.Fatalf("upstream %q: bad adaptive limit %+v", name, l)
		}
	} else if l.MaxConcurrency < 1 || l.MaxConcurrency > maxConcurrencyCap || l.Min != 0 || l.Max != 0 {
		t.Fatalf("upstream %q: bad static limit %+v", name, l)
	}
	if l.MaxQueue < 0 || l.MaxQueue > maxQueueCap || l.QueueTimeout <= 0 || l.MaxPerConsumer < 0 {
		t.Fatalf("upstream %q: bad limits %+v", name, l)
	}
}

// checkRetry fails t if r breaks a promise of the Retry docs.
func checkRetry(t *testing.T, where string, r *Retry, route bool) {
	t.Helper()
	on := r.On
	if r.Attempts < 1 || r.Attempts > 10 || r.PerTryTimeout < 0 || r.ReplayBodyLimit < 0 || r.ReplayBodyLimit > 16<<20 {
		t.Fatalf("%s: bad retry %+v", where, r)
	}
	if r.Backoff.Base <= 0 || r.Backoff.Max < r.Backoff.Base {
		t.Fatalf("%s: bad backoff %+v", where, r.Backoff)
	}
	if !on.ConnectFailure && !on.RefusedStream && !on.ResetBeforeResponse && len(on.Statuses) == 0 {
		t.Fatalf("%s: retry on nothing", where)
	}
	for i, s := range on.Statuses {
		if s < 400 || s > 599 || i > 0 && s <= on.Statuses[i-1] {
			t.Fatalf("%s: statuses not sorted, unique, 400..599: %v", where, on.Statuses)
		}
	}
	b := r.Budget
	if route && b != (RetryBudget{}) {
		t.Fatalf("%s: route retry has a budget %+v", where, b)
	}
	if !(b.Ratio >= 0 && b.Ratio <= 1 && b.MinPerSecond >= 0 && b.MinPerSecond <= maxRetryMinPerSecond) {
		t.Fatalf("%s: bad budget %+v", where, b)
	}
}

// checkBalancer fails t if u's balancer and its options break a promise
// of the Upstream docs.
func checkBalancer(t *testing.T, u *Upstream) {
	t.Helper()
	lr, ch := u.LeastRequest, u.ConsistentHash
	switch u.Balancer {
	case BalancerWeightedRoundRobin:
		if lr != nil || ch != nil {
			t.Fatalf("upstream %q: weighted_round_robin with options %+v %+v", u.Name, lr, ch)
		}
	case BalancerLeastRequest:
		if lr == nil || lr.Tau <= 0 || ch != nil {
			t.Fatalf("upstream %q: least_request with options %+v %+v", u.Name, lr, ch)
		}
	case BalancerConsistentHash:
		if ch == nil || lr != nil {
			t.Fatalf("upstream %q: consistent_hash with options %+v %+v", u.Name, lr, ch)
		}
		if norm, problem := normalizeHashOn(ch.HashOn); problem != "" || norm != ch.HashOn {
			t.Fatalf("upstream %q: hash_on %q not normalised (%q, %q)", u.Name, ch.HashOn, norm, problem)
		}
		kind, name := ch.Key()
		if (kind == HashOnClientIP || kind == HashOnPath) != (name == "") || len(name) > maxHashOnNameLen {
			t.Fatalf("upstream %q: hash_on %q splits into %q, %q", u.Name, ch.HashOn, kind, name)
		}
	default:
		t.Fatalf("upstream %q: unknown balancer %q", u.Name, u.Balancer)
	}
}

// checkDiscovery fails t if d breaks a promise of the Discovery docs.
func checkDiscovery(t *testing.T, name string, d *Discovery) {
	t.Helper()
	sources := 0
	if d.File != "" {
		sources++
	}
	if d.Etcd != nil {
		sources++
		e := d.Etcd
		if len(e.Endpoints) < 1 || len(e.Endpoints) > maxEtcdEndpoints || e.DialTimeout <= 0 ||
			len(e.Prefix) == 0 || e.Prefix[0] != '/' || e.Prefix[len(e.Prefix)-1] != '/' {
			t.Fatalf("upstream %q: bad etcd source %+v", name, e)
		}
		for _, ep := range e.Endpoints {
			if checkEtcdEndpoint(ep) != "" {
				t.Fatalf("upstream %q: bad etcd endpoint %q", name, ep)
			}
		}
	}
	if d.Push {
		sources++
	}
	if d.DNS != nil {
		sources++
		if checkDNSName(d.DNS.Name) != "" || d.DNS.Weight == 0 || d.DNS.Timeout <= 0 {
			t.Fatalf("upstream %q: bad dns source %+v", name, d.DNS)
		}
	}
	if d.DNSSRV != nil {
		sources++
		if checkSRVName(d.DNSSRV.Name) != "" || d.DNSSRV.Timeout <= 0 {
			t.Fatalf("upstream %q: bad dns_srv source %+v", name, d.DNSSRV)
		}
	}
	if sources != 1 {
		t.Fatalf("upstream %q: %d discovery sources: %+v", name, sources, d)
	}
	if !(d.MaxDropFraction > 0 && d.MaxDropFraction <= 1) || d.ConfirmAfter <= 0 || d.MaxWeight < 1 || d.MaxWeight > maxDiscoveryMaxWeight {
		t.Fatalf("upstream %q: bad discovery settings %+v", name, d)
	}
	if d.Source() == "" {
		t.Fatalf("upstream %q: no source name", name)
	}
}

// checkApps fails t if an app or a route's auth breaks its documented
// promises.
func checkApps(t *testing.T, cfg *Config) {
	t.Helper()
	routes := map[string]Route{}
	for _, r := range cfg.Routes {
		routes[r.Name] = r
		if !slices.Contains(authModes, r.Auth) || (r.Auth == AuthForward) != (r.ForwardAuth != nil) || r.AnonymousLimits != nil && (r.Auth != AuthNone || r.AnonymousLimits.Rate <= 0 || r.AnonymousLimits.Burst < 1) {
			t.Fatalf("route %q: auth %q, anonymous limits %+v", r.Name, r.Auth, r.AnonymousLimits)
		}
	}
	if !isLoopbackListen(cfg.Admin.Listen) && cfg.Admin.TokenFile == "" && len(cfg.Admin.Tokens) == 0 {
		t.Fatalf("admin.listen %q without a token file accepted", cfg.Admin.Listen)
	}
	if len(cfg.Admin.Tokens) > MaxAdminTokens {
		t.Fatalf("%d admin tokens accepted", len(cfg.Admin.Tokens))
	}
	for _, tk := range cfg.Admin.Tokens {
		if tk.File == "" || tk.Scope != AdminScopeRead && tk.Scope != AdminScopeWrite {
			t.Fatalf("bad admin token %+v", tk)
		}
	}
	// What validate accepts the rate limiter accepts (run builds its
	// policies with the same checks): never a limit that drops an app.
	checkLimit := func(what string, rate float64, burst int, q *Quota) {
		if rate != 0 && (limits.CheckRate(rate) != "" || limits.CheckBurst(rate, int64(burst)) != "") {
			t.Fatalf("%s: rate %v burst %d accepted; the rate limiter refuses it", what, rate, burst)
		}
		if q != nil && (limits.CheckQuotaRequests(q.Requests) != "" || limits.CheckQuotaPer(q.Per) != "") {
			t.Fatalf("%s: quota %+v accepted; the rate limiter refuses it", what, *q)
		}
	}
	for _, r := range cfg.Routes {
		if r.AnonymousLimits != nil {
			checkLimit("route "+r.Name, r.AnonymousLimits.Rate, r.AnonymousLimits.Burst, nil)
		}
	}
	for _, a := range cfg.Apps {
		checkLimit("app "+a.ID, a.Limits.Rate, a.Limits.Burst, a.Limits.Quota)
		for rn, rl := range a.RouteLimits {
			checkLimit("app "+a.ID+" route "+rn, rl.Rate, rl.Burst, rl.Quota)
		}
		if len(a.Grants) > limits.MaxGrants || len(a.APIKeySHA256) > limits.MaxKeys || limits.CheckAppName(a.Name) != "" {
			t.Fatalf("app %q: %d grants, %d keys, name %q accepted; the store refuses it", a.ID, len(a.Grants), len(a.APIKeySHA256), a.Name)
		}
	}
	ids, keys := map[string]bool{}, map[string]bool{}
	for _, a := range cfg.Apps {
		if ids[a.ID] || !validName(a.ID) || a.Name == "" || a.Status != AppStatusActive && a.Status != AppStatusSuspended {
			t.Fatalf("bad app %+v", a)
		}
		ids[a.ID] = true
		for _, k := range a.APIKeySHA256 {
			if keys[k] || !isHexSHA256(k) {
				t.Fatalf("app %q: bad or shared key hash %q", a.ID, k)
			}
			keys[k] = true
		}
		for _, g := range a.Grants {
			if _, ok := routes[g]; !ok {
				t.Fatalf("app %q granted unknown route %q", a.ID, g)
			}
		}
		if a.Limits.Rate < 0 || a.Limits.Rate > 0 && a.Limits.Burst < 1 || a.Limits.Rate == 0 && a.Limits.Burst != 0 {
			t.Fatalf("app %q limits %+v", a.ID, a.Limits)
		}
		for r := range a.RouteLimits {
			if !slices.Contains(a.Grants, r) {
				t.Fatalf("app %q route limit for %q outside grants", a.ID, r)
			}
		}
	}
}

// checkHealth: the health blocks are within their documented bounds.
func checkHealth(t *testing.T, u *Upstream) {
	t.Helper()
	if hc := u.HealthCheck; hc != nil {
		kinds := 0
		for _, set := range []bool{hc.HTTP != nil, hc.GRPC != nil, hc.TCP} {
			if set {
				kinds++
			}
		}
		if kinds != 1 || hc.Interval <= 0 || hc.Timeout <= 0 || hc.Timeout > hc.Interval ||
			hc.HealthyAfter < 1 || hc.HealthyAfter > 100 || hc.UnhealthyAfter < 1 || hc.UnhealthyAfter > 100 {
			t.Fatalf("upstream %q: bad health_check %+v", u.Name, hc)
		}
		if g := hc.GRPC; g != nil && (checkGRPCService(g.Service) != "" || u.Protocol == UpstreamProtocolHTTP1) {
			t.Fatalf("upstream %q: bad health_check.grpc %+v on %s", u.Name, g, u.Protocol)
		}
		if h := hc.HTTP; h != nil && (checkPathPrefix(h.Path) != "" || len(h.Expect) == 0 || len(h.Expect) > 16) {
			t.Fatalf("upstream %q: bad health_check.http %+v", u.Name, h)
		}
	}
	if od := u.OutlierDetection; od != nil && (od.BaseEjectionTime <= 0 || od.MaxEjectionTime < od.BaseEjectionTime ||
		od.MaxEjectionPercent < 0 || od.MaxEjectionPercent > 100 || od.ConsecutiveGatewayFailures < 0 || od.Consecutive5xx < 0) {
		t.Fatalf("upstream %q: bad outlier_detection %+v", u.Name, od)
	}
	if u.PanicThreshold < 0 || u.PanicThreshold > 100 || u.SlowStart < 0 {
		t.Fatalf("upstream %q: panic_threshold %v, slow_start %v", u.Name, u.PanicThreshold, u.SlowStart)
	}
	if z := u.Zones; z != nil && (!validName(z.Local) || z.Overprovisioning < 1 || z.Overprovisioning > 10 || len(z.Failover) > 16) {
		t.Fatalf("upstream %q: bad zones %+v", u.Name, z)
	}
}

// checkSteps holds a route's headers, redirect, respond and cors to what
// the reader promises.
func checkSteps(t *testing.T, r Route) {
	if h := r.Headers; h != nil {
		for _, c := range []*HeaderChanges{h.Request, h.Response} {
			if c == nil {
				continue
			}
			for _, m := range []map[string]string{c.Set, c.Add} {
				for k, v := range m {
					if ForbiddenHeaderChange(k, "request", "set") != "" || checkHeaderValue(v) != "" {
						t.Fatalf("route %q: header change %q: %q passed", r.Name, k, v)
					}
				}
			}
		}
	}
	if rd := r.Redirect; rd != nil && (checkRedirectTo(rd.To, rd.HTTPS) != "" || (rd.To == "" && !rd.HTTPS)) {
		t.Fatalf("route %q: redirect %+v passed", r.Name, rd)
	}
	if rs := r.Respond; rs != nil && (len(rs.Body) > MaxRespondBody || rs.Status < 200 || rs.Status > 599) {
		t.Fatalf("route %q: respond %+v passed", r.Name, rs)
	}
	if c := r.CORS; c != nil && c.AllowCredentials && slices.Contains(c.AllowOrigins, "*") {
		t.Fatalf("route %q: cors * with credentials passed", r.Name)
	}
}
