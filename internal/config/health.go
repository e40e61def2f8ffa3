package config

import (
	"slices"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// An upstream's health blocks: `health_check` (and its `http`),
// `outlier_detection` and `zones`, and an endpoint's `zone`.

// Bounds of the health fields.
const (
	maxCheckRun         = 100
	maxExpectStatuses   = 16
	maxHealthPathLen    = 1024
	maxFailureRun       = 1000
	maxFailoverZones    = 16
	maxOverprovisioning = 10
)

// healthCheck reads `health_check`: exactly one of http, grpc and tcp: true,
// and a timeout no longer than the interval.
func (p *parser) healthCheck(path string, n *yaml.Node) *HealthCheck {
	hc := defaultHealthCheck()
	f, ok := p.Block(path, n, healthCheckBlock)
	if !ok {
		return hc
	}
	if v := f["http"]; v != nil {
		hc.HTTP = p.httpCheck(engine.Key(path, "http"), v)
	}
	if v := f["grpc"]; v != nil {
		hc.GRPC = p.grpcCheck(engine.Key(path, "grpc"), v)
	}
	// tcp, interval, timeout, healthy_after and unhealthy_after.
	bad := p.Bind(f, n, path, healthCheckBlock, hc)
	switch {
	case bad["tcp"]:
	case hc.HTTP != nil && hc.GRPC != nil:
		p.Add(firstKey(n, "grpc"), engine.Key(path, "grpc"), "http and grpc exclude each other; set one")
	case hc.HTTP != nil && hc.TCP:
		p.Add(firstKey(n, "tcp"), engine.Key(path, "tcp"), "http and tcp: true exclude each other; set one")
	case hc.GRPC != nil && hc.TCP:
		p.Add(firstKey(n, "tcp"), engine.Key(path, "tcp"), "grpc and tcp: true exclude each other; set one")
	case hc.HTTP == nil && hc.GRPC == nil && !hc.TCP:
		p.Add(n, path, "needs exactly one of http (such as {path: /healthz}), grpc (such as {service: \"\"}) or tcp: true")
	}
	if !bad["interval"] && !bad["timeout"] && hc.Timeout > hc.Interval {
		at, where := f["timeout"], engine.Key(path, "timeout")
		if at == nil {
			p.Add(f["interval"], engine.Key(path, "interval"), "must be at least timeout (%s, the default), got %s", hc.Timeout, engine.Describe(f["interval"]))
		} else {
			was := hc.Interval.String()
			if f["interval"] == nil {
				was += ", the default"
			}
			p.Add(at, where, "must be at most interval (%s), got %s", was, engine.Describe(at))
		}
	}
	return hc
}

// httpCheck reads `health_check.http`; null reads as every default.
func (p *parser) httpCheck(path string, n *yaml.Node) *HTTPCheck {
	hc := defaultHTTPCheck()
	f, ok := p.Block(path, n, httpCheckBlock)
	if !ok {
		return hc
	}
	p.Bind(f, n, path, httpCheckBlock, hc) // path
	if v := f["expect"]; v != nil {
		hc.Expect = p.expect(engine.Key(path, "expect"), v)
	}
	return hc
}

// checkHealthPath returns the problem with a health check's path, or "".
func checkHealthPath(s string) string {
	problem := checkPathPrefix(s)
	if problem == "" && len(s) > maxHealthPathLen {
		problem = "must be at most 1024 bytes"
	}
	return problem
}

// expect reads a list of 1 to 16 distinct statuses, 100 to 599, sorted.
func (p *parser) expect(path string, n *yaml.Node) []int {
	items, ok := p.Sequence(path, n)
	if !ok {
		return DefaultHealthCheckExpect()
	}
	if len(items) == 0 || len(items) > maxExpectStatuses {
		p.Add(n, path, "must list 1 to %d statuses, got %d", maxExpectStatuses, len(items))
		return DefaultHealthCheckExpect()
	}
	var out []int
	for i, item := range items {
		s, ok := p.Integer(engine.Index(path, i), item, minHealthCheckStatus, maxHealthCheckStatus)
		if !ok {
			continue
		}
		if slices.Contains(out, int(s)) {
			p.Add(item, engine.Index(path, i), "duplicate status %d", s)
			continue
		}
		out = append(out, int(s))
	}
	slices.Sort(out)
	return out
}

// outlierDetection reads `outlier_detection`; null or {} reads as every
// default.
func (p *parser) outlierDetection(path string, n *yaml.Node) *OutlierDetection {
	od := defaultOutlierDetection()
	f, ok := p.Block(path, n, outlierDetectionBlock)
	if !ok {
		return od
	}
	bad := p.Bind(f, n, path, outlierDetectionBlock, od)
	if !bad["base_ejection_time"] && !bad["max_ejection_time"] && od.MaxEjectionTime < od.BaseEjectionTime {
		if v := f["max_ejection_time"]; v != nil {
			was := od.BaseEjectionTime.String()
			if f["base_ejection_time"] == nil {
				was += ", the default"
			}
			p.Add(v, engine.Key(path, "max_ejection_time"), "must be at least base_ejection_time (%s), got %s", was, engine.Describe(v))
		} else {
			v := f["base_ejection_time"]
			p.Add(v, engine.Key(path, "base_ejection_time"), "must be at most max_ejection_time (%s, the default), got %s", od.MaxEjectionTime, engine.Describe(v))
		}
	}
	return od
}

// zones reads `zones`: local is required; failover zones are distinct and
// not the local one.
func (p *parser) zones(path string, n *yaml.Node) *Zones {
	z := defaultZones()
	f, ok := p.Block(path, n, zonesBlock)
	if !ok {
		return z
	}
	p.Bind(f, n, path, zonesBlock, z) // local and overprovisioning
	if v := f["failover"]; v != nil && !engine.IsNull(v) {
		items, ok := p.Sequence(engine.Key(path, "failover"), v)
		if ok && len(items) > maxFailoverZones {
			p.Add(v, engine.Key(path, "failover"), "must list at most %d zones, got %d", maxFailoverZones, len(items))
			items = nil
		}
		for i, item := range items {
			ip := engine.Index(engine.Key(path, "failover"), i)
			name, ok := p.zoneName(ip, item)
			switch {
			case !ok:
			case name == z.Local:
				p.Add(item, ip, "%s is the local zone; list only other zones", engine.Quote(name))
			case slices.Contains(z.Failover, name):
				p.Add(item, ip, "duplicate zone %s", engine.Quote(name))
			default:
				z.Failover = append(z.Failover, name)
			}
		}
	}
	return z
}

// zoneName reads a zone name: 1 to 64 of a-z, 0-9, "_", "." and "-" (the
// discovery firewall's rule for an instance's zone).
func (p *parser) zoneName(path string, n *yaml.Node) (string, bool) {
	s, ok := p.Str(path, n)
	if !ok || !p.zone(path, n, s) {
		return "", false
	}
	return s, true
}

// zone reports whether s is a valid zone name, reporting it if not.
func (p *parser) zone(path string, n *yaml.Node, s string) bool {
	if !validName(s) {
		p.Add(n, path, "%s", zoneProblem(s))
		return false
	}
	return true
}

// zoneProblem is the message of an invalid zone name s.
func zoneProblem(s string) string {
	return "zone " + nameRule + ", got " + engine.QuoteMax(s, 64)
}

// Bounds of this file's fields, used by their table entries and readers.
const (
	maxEjectionPercent   = 100
	minHealthCheckStatus = 100
	maxHealthCheckStatus = 599
)

// The field tables of this file's blocks (fields.go says how a table is read).
var (
	httpCheckBlock = engine.NewBlock(
		engine.Field{Name: "path", Kind: engine.KindString, Def: DefaultHealthCheckPath, Doc: "path probed; at most 1024 bytes",
			Check: engine.ProblemOf(checkHealthPath), Bind: engine.At(func(h *HTTPCheck) *string { return &h.Path })},
		engine.Field{Name: "expect", Kind: engine.KindList, MinItems: 1, MaxItems: maxExpectStatuses,
			Item: &engine.Field{Kind: engine.KindInt, Lo: minHealthCheckStatus, Hi: maxHealthCheckStatus}, Doc: "statuses that count as healthy (1 to 16)"},
	)
	healthCheckBlock = engine.NewBlock(
		engine.Field{Name: "http", Kind: engine.KindBlock, Sub: httpCheckBlock, Doc: "probe with an HTTP GET"},
		engine.Field{Name: "grpc", Kind: engine.KindBlock, Sub: grpcCheckBlock, Doc: "probe with a grpc.health.v1 Check call (protocol h2c, http2 or auto)"},
		engine.Field{Name: "tcp", Kind: engine.KindBool, Doc: "probe by opening a connection",
			Bind: engine.At(func(h *HealthCheck) *bool { return &h.TCP })},
		engine.Field{Name: "interval", Kind: engine.KindDuration, Def: DefaultHealthCheckInterval, Doc: "time between probes; at least timeout",
			Bind: engine.At(func(h *HealthCheck) *time.Duration { return &h.Interval })},
		engine.Field{Name: "timeout", Kind: engine.KindDuration, Def: DefaultHealthCheckTimeout, Doc: "deadline of a probe",
			Bind: engine.At(func(h *HealthCheck) *time.Duration { return &h.Timeout })},
		engine.Field{Name: "healthy_after", Kind: engine.KindInt, Lo: 1, Hi: maxCheckRun, Def: DefaultHealthyAfter, Doc: "passing probes in a row that make an endpoint healthy",
			Bind: engine.At(func(h *HealthCheck) *int { return &h.HealthyAfter })},
		engine.Field{Name: "unhealthy_after", Kind: engine.KindInt, Lo: 1, Hi: maxCheckRun, Def: DefaultUnhealthyAfter, Doc: "failing probes in a row that make it unhealthy",
			Bind: engine.At(func(h *HealthCheck) *int { return &h.UnhealthyAfter })},
	)
	outlierDetectionBlock = engine.NewBlock(
		engine.Field{Name: "consecutive_gateway_failures", Kind: engine.KindInt, Lo: 0, Hi: maxFailureRun, Def: DefaultConsecutiveGatewayFailures,
			Doc:  "gateway failures in a row that eject an endpoint; 0 is off",
			Bind: engine.At(func(o *OutlierDetection) *int { return &o.ConsecutiveGatewayFailures })},
		engine.Field{Name: "consecutive_5xx", Kind: engine.KindInt, Lo: 0, Hi: maxFailureRun, Def: DefaultConsecutive5xx,
			Doc:  "5xx responses in a row that eject an endpoint; 0 is off",
			Bind: engine.At(func(o *OutlierDetection) *int { return &o.Consecutive5xx })},
		engine.Field{Name: "base_ejection_time", Kind: engine.KindDuration, Def: DefaultBaseEjectionTime, Doc: "first ejection's length",
			Bind: engine.At(func(o *OutlierDetection) *time.Duration { return &o.BaseEjectionTime })},
		engine.Field{Name: "max_ejection_time", Kind: engine.KindDuration, Def: DefaultMaxEjectionTime, Doc: "longest ejection; at least base_ejection_time",
			Bind: engine.At(func(o *OutlierDetection) *time.Duration { return &o.MaxEjectionTime })},
		engine.Field{Name: "max_ejection_percent", Kind: engine.KindInt, Lo: 0, Hi: maxEjectionPercent, Def: DefaultMaxEjectionPercent,
			Doc:  "most of the endpoints ejected at once, in percent",
			Bind: engine.At(func(o *OutlierDetection) *int { return &o.MaxEjectionPercent })},
	)
	zonesBlock = engine.NewBlock(
		engine.Field{Name: "local", Kind: engine.KindString, Required: true, Pattern: namePattern, Doc: "the zone this levee runs in",
			Missing: "required, the zone this levee runs in", Empty: zoneProblem(""),
			Check: checkZone, Bind: engine.At(func(z *Zones) *string { return &z.Local })},
		engine.Field{Name: "failover", Kind: engine.KindList, MaxItems: maxFailoverZones, Item: &engine.Field{Kind: engine.KindString, Pattern: namePattern}, Doc: "other zones to fail over to, nearest first (at most 16)"},
		engine.Field{Name: "overprovisioning", Kind: engine.KindNumber, Flo: 1, Fhi: maxOverprovisioning, Def: DefaultOverprovisioning,
			Doc:  "factor on a zone's healthy share before traffic spills over",
			Bind: engine.At(func(z *Zones) *float64 { return &z.Overprovisioning })},
	)
)

// HealthCheck is an upstream's active health check (`health_check`):
// exactly one of HTTP, GRPC or TCP.
type HealthCheck struct {
	// HTTP, when not nil, makes each check an HTTP GET (`http`).
	HTTP *HTTPCheck
	// GRPC, when not nil, makes each check a grpc.health.v1 Check call
	// (`grpc`, health_grpc.go).
	GRPC *GRPCCheck
	// TCP, when true, makes each check a TCP connect (`tcp`, true or
	// false). Exactly one of http, grpc and tcp: true is required.
	TCP bool
	// Interval is the time between two checks of one endpoint
	// (`interval`, a duration greater than 0), shortened by up to 10 %
	// of random jitter. Default DefaultHealthCheckInterval (5s).
	Interval time.Duration
	// Timeout bounds one check (`timeout`, a duration greater than 0 and
	// at most interval). Default DefaultHealthCheckTimeout (1s).
	Timeout time.Duration
	// HealthyAfter is the passes in a row that return an unhealthy (or
	// ejected) endpoint to service (`healthy_after`, 1 to 100). Default
	// DefaultHealthyAfter (2).
	HealthyAfter int
	// UnhealthyAfter is the failures in a row that take a healthy
	// endpoint out (`unhealthy_after`, 1 to 100). Default
	// DefaultUnhealthyAfter (3).
	UnhealthyAfter int
}

// HTTPCheck is an HTTP health check (`health_check.http`).
type HTTPCheck struct {
	// Path is requested with GET (`path`, starts with "/", at most 1024
	// bytes, no "?", "#", spaces or control characters). Default
	// DefaultHealthCheckPath ("/healthz").
	Path string
	// Expect lists the statuses that pass (`expect`, 1 to 16 distinct
	// whole numbers from 100 to 599), sorted. Default [200].
	Expect []int
}

// OutlierDetection is passive ejection of failing endpoints
// (`outlier_detection`), with Envoy's names and meaning. See
// docs/health.md.
type OutlierDetection struct {
	// ConsecutiveGatewayFailures ejects an endpoint after this many
	// gateway failures in a row: connect errors, resets, timeouts and
	// answers 502, 503 and 504 (`consecutive_gateway_failures`, 0 to
	// 1000). Default DefaultConsecutiveGatewayFailures (5); 0 turns this
	// rule off.
	ConsecutiveGatewayFailures int
	// Consecutive5xx ejects after this many 5xx answers (or gateway
	// failures) in a row (`consecutive_5xx`, 0 to 1000). Default
	// DefaultConsecutive5xx (0), off.
	Consecutive5xx int
	// BaseEjectionTime is how long a first ejection lasts; the n-th
	// lasts n times as long (`base_ejection_time`, a duration greater
	// than 0). Default DefaultBaseEjectionTime (30s).
	BaseEjectionTime time.Duration
	// MaxEjectionTime caps an ejection (`max_ejection_time`, a duration
	// at least base_ejection_time). Default DefaultMaxEjectionTime (300s).
	MaxEjectionTime time.Duration
	// MaxEjectionPercent caps the share of the upstream's non-drained
	// endpoints ejected at once (`max_ejection_percent`, 0 to 100): an
	// ejection happens only if afterwards at most ⌊percent × n / 100⌋ are
	// ejected. Default DefaultMaxEjectionPercent (50).
	MaxEjectionPercent int
}

// Zones is zone-aware routing (`zones`). Tiers are Local, then each of
// Failover in order, then every zone not listed (and endpoints without a
// zone) as one last tier. See docs/health.md for the shares.
type Zones struct {
	// Local is the zone this levee runs in (`local`, required; 1 to 64 of
	// a-z, 0-9, "_", "." and "-").
	Local string
	// Failover lists the zones to spill to, in order (`failover`, at most
	// 16 distinct zone names, not Local). Default none.
	Failover []string
	// Overprovisioning is the factor by which a zone's healthy share is
	// multiplied before it counts as short of capacity
	// (`overprovisioning`, a number from 1 to 10). Default
	// DefaultOverprovisioning (1.4): a zone keeps all its traffic while at
	// least 1/1.4 ≈ 71 % of its weight is healthy.
	Overprovisioning float64
}

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultHealthCheckInterval is HealthCheck.Interval when omitted.
	DefaultHealthCheckInterval = 5 * time.Second
	// DefaultHealthCheckTimeout is HealthCheck.Timeout when omitted.
	DefaultHealthCheckTimeout = 1 * time.Second
	// DefaultHealthyAfter is HealthCheck.HealthyAfter when omitted.
	DefaultHealthyAfter = 2
	// DefaultUnhealthyAfter is HealthCheck.UnhealthyAfter when omitted.
	DefaultUnhealthyAfter = 3
	// DefaultHealthCheckPath is HTTPCheck.Path when omitted.
	DefaultHealthCheckPath = "/healthz"
	// DefaultConsecutiveGatewayFailures is
	// OutlierDetection.ConsecutiveGatewayFailures when omitted.
	DefaultConsecutiveGatewayFailures = 5
	// DefaultConsecutive5xx is OutlierDetection.Consecutive5xx when
	// omitted: 0, off.
	DefaultConsecutive5xx = 0
	// DefaultBaseEjectionTime is OutlierDetection.BaseEjectionTime when
	// omitted.
	DefaultBaseEjectionTime = 30 * time.Second
	// DefaultMaxEjectionTime is OutlierDetection.MaxEjectionTime when
	// omitted.
	DefaultMaxEjectionTime = 300 * time.Second
	// DefaultMaxEjectionPercent is OutlierDetection.MaxEjectionPercent
	// when omitted.
	DefaultMaxEjectionPercent = 50
	// DefaultOverprovisioning is Zones.Overprovisioning when omitted.
	DefaultOverprovisioning = 1.4
)

// DefaultHealthCheckExpect returns HTTPCheck.Expect when omitted: [200].
func DefaultHealthCheckExpect() []int { return []int{200} }

func defaultHealthCheck() *HealthCheck { return engine.WithDefaults(healthCheckBlock, &HealthCheck{}) }

func defaultHTTPCheck() *HTTPCheck {
	return engine.WithDefaults(httpCheckBlock, &HTTPCheck{Expect: DefaultHealthCheckExpect()})
}

func defaultOutlierDetection() *OutlierDetection {
	return engine.WithDefaults(outlierDetectionBlock, &OutlierDetection{})
}

func defaultZones() *Zones { return engine.WithDefaults(zonesBlock, &Zones{}) }
