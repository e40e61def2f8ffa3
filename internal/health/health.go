// Package health decides which of an upstream's endpoints serve: active
// checks (HTTP or TCP probes on a jittered interval, from a bounded worker
// pool), passive outlier detection (ejection after a run of gateway
// failures or 5xx answers seen on live traffic), slow start (a returning or
// new endpoint's weight ramps up over a window) and panic mode (when too
// little of the pool is healthy, balance over all of it).
//
// The request path never waits for this package: it counts failure runs in
// endpoint.Stats with atomics and, when a run reaches a threshold, signals
// the Manager with a non-blocking send. The Manager's one goroutine turns
// checks, signals and timers into transitions and asks its owner (the
// gateway) to rebuild the upstream's picker through Options.OnChange; the
// gateway then calls Apply to get the effective endpoint set. Decisions
// take the current time as a parameter; the Manager reads it, and waits,
// on one Clock (Options.Clock), which tests replace with one they step.
package health

import (
	"context"
	"net"
	"time"
)

// State is an endpoint's health as the admin API and metrics show it.
type State string

// The states, in the order they take precedence when several apply.
const (
	// Drained: weight 0 in configuration or registry; never picked.
	Drained State = "drained"
	// Ejected: passive outlier detection took it out until its ejection
	// time passes (or, with active checks, until it passes healthy_after
	// checks in a row).
	Ejected State = "ejected"
	// Unhealthy: active checks failed unhealthy_after times in a row.
	Unhealthy State = "unhealthy"
	// SlowStart: serving, with its weight ramping up after joining or
	// returning.
	SlowStart State = "slow_start"
	// Healthy: serving at its full weight.
	Healthy State = "healthy"
)

// States lists every State, for metrics that report each one.
var States = []State{Healthy, SlowStart, Unhealthy, Ejected, Drained}

// CheckOptions configure an upstream's active health checks. Exactly one of
// HTTPPath (an HTTP check) or TCP is set.
type CheckOptions struct {
	// HTTPPath is the path of an HTTP GET check, starting with "/".
	HTTPPath string
	// Expect lists the statuses that pass an HTTP check; empty means 200.
	Expect []int
	// TCP makes the check a TCP connect.
	TCP bool
	// Interval is the time between checks of one endpoint, before jitter
	// (each wait is uniform in (0.9, 1] × Interval). > 0.
	Interval time.Duration
	// Timeout bounds one check: connect, request and response headers.
	// 0 < Timeout <= Interval.
	Timeout time.Duration
	// HealthyAfter is the number of passes in a row that make an unhealthy
	// endpoint healthy (and return an ejected one early). >= 1.
	HealthyAfter int
	// UnhealthyAfter is the number of failures in a row that make a
	// healthy endpoint unhealthy. >= 1.
	UnhealthyAfter int
	// Dial, when set, opens the check's connection instead of a plain TCP
	// connect: an upstream with TLS dials as its requests do, handshake
	// included (a TCP check then passes when the handshake does).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// HTTPGet, when set, runs an HTTP check instead of the HTTP/1.1
	// request Probe writes itself: a GET of path to addr in the upstream's
	// own protocol (HTTP/2 upstreams: upstream.Transport.HealthGet),
	// returning the status. Its dial errors are Dial's.
	HTTPGet func(ctx context.Context, addr, path string) (int, error)
	// GRPC makes the check a grpc.health.v1 Check call for GRPCService
	// ("" is the whole server) through GRPCCheck (grpcprobe.go).
	GRPC        bool
	GRPCService string
	// GRPCCheck runs one Check call (upstream.Transport.HealthGRPC):
	// the call's grpc-status and, when it is 0, the serving status. Its
	// errors are HTTPGet's. nil with GRPC: every check fails.
	GRPCCheck func(ctx context.Context, addr, service string) (code int, serving int32, err error)
}

// OutlierOptions configure passive outlier detection.
type OutlierOptions struct {
	// ConsecutiveGatewayFailures ejects an endpoint after this many
	// gateway failures in a row (connect error, reset, timeout, 502, 503,
	// 504); 0 turns this rule off.
	ConsecutiveGatewayFailures uint32
	// Consecutive5xx ejects after this many 5xx answers (or gateway
	// failures) in a row; 0 turns this rule off.
	Consecutive5xx uint32
	// BaseEjectionTime is the first ejection's length; the n-th in a row
	// lasts n × BaseEjectionTime, at most MaxEjectionTime. > 0.
	BaseEjectionTime time.Duration
	// MaxEjectionTime caps an ejection's length. >= BaseEjectionTime.
	MaxEjectionTime time.Duration
	// MaxEjectionPercent caps the ejected share of the upstream's
	// non-drained endpoints: an ejection happens only if, after it,
	// ejected ≤ ⌊MaxEjectionPercent × n / 100⌋. 0 to 100.
	MaxEjectionPercent int
}

// UpstreamOptions are one upstream's health settings. The zero value means
// no checks, no outlier detection, no slow start and no panic mode.
type UpstreamOptions struct {
	// Check turns active checks on; nil: none.
	Check *CheckOptions
	// Outlier turns passive outlier detection on; nil: none.
	Outlier *OutlierOptions
	// Refused, when set, ejects an endpoint that refused a connection at
	// once (NGINX's max_fails=1 fail_timeout): nothing listens there, so
	// waiting for a run of failures or for active checks only sends more
	// requests to a closed port. The ejection lasts BaseEjectionTime
	// (growing as an outlier ejection does, up to MaxEjectionTime) and
	// happens only within MaxEjectionPercent; the consecutive-failure
	// fields are not used. The gateway sets it from outlier_detection, or
	// from its defaults when the upstream has none. nil: a refused
	// connection only counts in the failure runs.
	Refused *OutlierOptions
	// PanicThreshold is the healthy share of the non-drained weight (0 to
	// 1) below which the upstream balances over every non-drained
	// endpoint, healthy or not. 0 disables panic mode.
	PanicThreshold float64
	// SlowStart is the ramp window of a joining or returning endpoint; 0:
	// none.
	SlowStart time.Duration
}

// EndpointView is one endpoint's health as Manager.View reports it.
type EndpointView struct {
	Address string
	// Weight is the configured weight (hundredths); Effective the weight
	// the picker uses now.
	Weight, Effective uint32
	State             State
	// Ejections counts this endpoint's ejections that still weigh on the
	// next ejection's length (it decays, see OutlierOptions).
	Ejections int
	// LastReason says why the endpoint last changed state, such as
	// "consecutive_gateway_failures" or "check_failed: ...".
	LastReason string
	// Since is when the endpoint entered State.
	Since time.Time
}

// UpstreamView is one upstream's health as Manager.View reports it.
type UpstreamView struct {
	Panic bool
	// PanicTotal counts the times the upstream entered panic mode.
	PanicTotal uint64
	// EjectionsTotal counts ejections by reason.
	EjectionsTotal map[string]uint64
	Endpoints      []EndpointView
}
