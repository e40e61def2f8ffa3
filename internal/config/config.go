// Package config reads levee's configuration file into typed values.
//
// Parsing is strict: the YAML is decoded into a node tree and walked by hand,
// so every problem is reported with the path of the field it concerns
// ("upstreams.video.endpoints[1].weight") and the value that was found.
// Unknown keys, duplicate keys, aliases, wrong types and out-of-range values
// are errors; nothing is coerced or replaced by a default silently. Parse
// keeps going after a problem and reports all of them at once as *Errors.
//
// A field that is omitted or null ("key: ~", or "key:" with nothing after
// it) takes its default. Every default is declared in defaults.go and named
// in the doc comment of the field it applies to.
//
// Packages below the composition root (internal/gateway) do not import this
// package; the gateway turns a validated *Config into their own options.
package config

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Over 600 lines: these are the configuration's types, one per block,
// each field documented with its YAML name, default and bounds; readers
// look a field up here, so the types stay together in one file.

// Config is a whole, validated levee configuration. Parse returns it only
// when every field is valid, with every default applied; a *Config is not
// modified afterwards and may be shared between goroutines for reading.
type Config struct {
	// Listen is the data-plane address, "host:port" (`listen`, required).
	// An empty host (":8080") listens on all interfaces. Port 0 asks the
	// OS for a free port (for tests and the demo).
	Listen string
	// TLS, when not nil, makes Listen serve HTTPS (`tls`, optional). nil
	// means plain HTTP.
	TLS *TLS
	// Admin is the isolated admin listener (`admin`, required).
	Admin Admin
	// StateDir is where levee keeps state on disk, such as last-known-good
	// snapshots (`state_dir`). Default DefaultStateDir. A relative path is
	// relative to the process's working directory. May not be empty.
	StateDir string
	// Server holds the limits for client-facing connections (`server`).
	Server Server
	// Memory, when not nil, sets the Go runtime's soft memory limit and
	// the heap watermarks above which requests are shed (`memory`,
	// optional). nil, the default (no `memory` block, or `memory: ~`),
	// means no memory limit is set and nothing is shed for memory.
	Memory *Memory
	// Cluster, when not nil, makes this node one of several sharing
	// limits (`cluster`, optional; cluster.go).
	Cluster *Cluster
	// Log configures logging (`log`).
	Log Log
	// Metrics configures what the metrics endpoint reports (`metrics`).
	Metrics Metrics
	// Profiles configures the automatic CPU profiles (`profiles`).
	Profiles Profiles
	// Tracing, when not nil, turns OpenTelemetry tracing on (`tracing`,
	// optional; tracing.go). nil, the default, means off.
	Tracing *Tracing
	// Upstreams maps an upstream's name to the upstream (`upstreams`, at
	// least one required). Every value is non-nil and its Name equals its
	// key.
	Upstreams map[string]*Upstream
	// UpstreamOrder lists the keys of Upstreams in the order they appear in
	// the file. It is filled by the parser, not read from YAML.
	UpstreamOrder []string
	// DataSources maps a data source's name to it (`data_sources`,
	// optional; see data.go). With data sources, `upstreams` may be
	// omitted: a file of data routes only.
	DataSources map[string]*DataSource
	// DataSourceOrder lists the keys of DataSources in file order.
	DataSourceOrder []string
	// Routes are the routing rules in file order (`routes`, at least one
	// required). Every route's Upstream is a key of Upstreams, route names
	// are unique, and no two routes have the same host, path prefix and an
	// overlapping method set.
	Routes []Route
	// Apps are the consumer apps the file defines (`apps`, optional, at
	// most 10000, ids unique). They seed the app store under StateDir;
	// changes made through the admin API take precedence as
	// docs/apps.md describes. nil when omitted.
	Apps []App

	// dataDefs holds each data route's definition as canonical JSON, by
	// route name (DataDefinition); nil without data routes.
	dataDefs map[string][]byte
}

// TLS names the certificate and key that the data-plane listener serves
// (`tls`). Both files must exist and be readable regular files when the
// configuration is parsed; their contents are not checked here.
type TLS struct {
	// CertFile is the PEM certificate chain path (`cert_file`, required).
	// A relative path is relative to the process's working directory.
	CertFile string
	// KeyFile is the PEM private key path (`key_file`, required). A
	// relative path is relative to the process's working directory.
	KeyFile string
}

// Admin configures the admin listener, which serves health, metrics and
// the admin API apart from the data plane (`admin`).
type Admin struct {
	// Listen is the admin address, "host:port" (`admin.listen`, required).
	// An empty host listens on all interfaces; port 0 asks the OS for a
	// free port. It must not bind the same non-zero port as Config.Listen
	// on an overlapping host.
	Listen string
	// TokenFile is a file holding the admin API's bearer token
	// (`admin.token_file`, optional): one line of at least 16 printable
	// characters, surrounding white space ignored, at most 4KiB. When set,
	// every admin path but /healthz and /readyz needs
	// "Authorization: Bearer TOKEN". Required when Listen's host is not
	// loopback (127.0.0.0/8, ::1, localhost) and Tokens is empty; an
	// empty host counts as not loopback. The file is read at start and on
	// every reload. Its token has scope write. Empty when omitted: no
	// token.
	TokenFile string
	// Tokens are more bearer tokens, each with a scope (`admin.tokens`,
	// optional, at most MaxAdminTokens): a read token for a metrics
	// scraper or a dashboard cannot change levee. Each file is read as
	// TokenFile is; no two files (TokenFile included) may hold the same
	// token. nil when omitted: only TokenFile, if any.
	Tokens []AdminToken
	// Token says what levee does when neither TokenFile nor Tokens is set
	// (`admin.token`, default AdminTokenGenerate): AdminTokenGenerate
	// makes a random write token once, in StateDir's AdminTokenFileName
	// (mode 0600, reused on later starts), and logs its path; reads (GET,
	// HEAD) stay open, writes need it. AdminTokenNone is the explicit
	// opt-out, an admin API open to every local caller: allowed only with
	// a loopback Listen. Refused when set together with TokenFile or
	// Tokens, which already decide the tokens.
	Token string
	// Hosts are host names (`admin.hosts`, at most MaxAdminHosts, lower
	// case, no port) the admin API accepts in a request's Host header
	// besides an IP literal and "localhost": a DNS name that points at
	// the admin listener. Any other Host is refused 421 (a DNS-rebinding
	// page names its own domain). nil when omitted: IPs and localhost
	// only.
	Hosts []string
}

// Server holds limits for downstream (client-facing) connections
// (`server`). Every field is optional.
type Server struct {
	// MaxHeaderBytes caps the size of a request's header block, in bytes
	// (`max_header_bytes`, a size). Default DefaultMaxHeaderBytes (64KiB);
	// allowed 1KiB to 16MiB. Zero is not allowed.
	MaxHeaderBytes int64
	// ReadHeaderTimeout is how long a client may take to send the request
	// headers (`read_header_timeout`, a duration). Default
	// DefaultReadHeaderTimeout (10s); must be greater than 0.
	ReadHeaderTimeout time.Duration
	// IdleTimeout is how long a keep-alive client connection may sit idle
	// between requests (`idle_timeout`, a duration). Default
	// DefaultIdleTimeout (60s); must be greater than 0.
	IdleTimeout time.Duration
	// ShutdownTimeout is how long a SIGTERM waits for in-flight requests
	// to finish before connections are closed (`shutdown_timeout`, a
	// duration). Default DefaultShutdownTimeout (15s); must be greater
	// than 0.
	ShutdownTimeout time.Duration
	// MaxConnections caps concurrent client connections
	// (`max_connections`, a whole number). Default 0, which means
	// unlimited; must be 0 or more. A connection over the cap is answered
	// 503 with reason connection_limit and closed.
	MaxConnections int
	// MaxConnectionsPerIP caps the open data-plane connections from one
	// client IP address (`max_connections_per_ip`, a whole number).
	// Default DefaultMaxConnectionsPerIP (0), which means unlimited; must
	// be 0 or more. A connection over the cap is answered 503 with reason
	// connection_limit and closed. IPv6 addresses are compared whole.
	MaxConnectionsPerIP int
	// HTTP2MaxConcurrentStreams caps the concurrent streams (requests)
	// one HTTP/2 client connection may open (`http2_max_concurrent_streams`,
	// a whole number 1 to 10000). Default DefaultHTTP2MaxConcurrentStreams
	// (250). Zero is not allowed.
	HTTP2MaxConcurrentStreams int
	// Paths is how request-target paths are normalised before routing
	// (`paths`).
	Paths ServerPaths
	// UnderscoresInHeaders is what becomes of a request header whose name
	// holds "_" (`underscores_in_headers`): UnderscoresDrop ("drop", the
	// default, DefaultUnderscoresInHeaders: removed before routing, auth
	// and forwarding, as NGINX does), UnderscoresAllow ("allow": kept) or
	// UnderscoresReject ("reject": 400 bad_header_name). Some backends
	// (CGI, PHP, Django) read X-Api_Key and X-Api-Key as one name, so a
	// header levee does not look at could stand in for one it does.
	UnderscoresInHeaders string
	// BodyTimeout is the longest a request body may go without a byte
	// arriving, between two reads of it (`body_timeout`, a duration from
	// 100ms to 1h; NGINX's client_body_timeout), over HTTP/1.1, TLS and
	// HTTP/2 alike. Default DefaultBodyTimeout (30s); it cannot be turned
	// off. Past it the client gets 408 body_timeout (when nothing of the
	// answer was sent yet), the upstream request, if one was under way,
	// is cancelled, and the endpoint is not blamed. A body of known length
	// up to the route's buffer limit is read whole before admission (see
	// docs/admission.md), so a stalled one never holds a slot.
	BodyTimeout time.Duration
	// SendTimeout is the longest the client may take to accept each write
	// of an answer (`send_timeout`, a duration from 100ms to 1h; NGINX's
	// send_timeout), HTTP/2 streams stalled by flow control included: past
	// it the connection (HTTP/2: the stream) is aborted. Default
	// DefaultSendTimeout (60s). A route's own send_timeout replaces it; a
	// data route's data.send_timeout (10s by default) applies when the
	// route sets none.
	SendTimeout time.Duration
	// AnswerBuffer is the largest upstream answer of known length that is
	// read whole before any of it is written to the client
	// (`answer_buffer`, a size from 0 to 64MiB; NGINX's proxy_buffering):
	// the attempt then ends and the admission slot is released at once,
	// so a client that reads slowly, or never, holds its own connection
	// and the buffer (reserved from the memory budget; without room the
	// answer streams), never the upstream's capacity. Answers up to the
	// 32 KiB copy buffer are always read whole; larger ones, and answers
	// of unknown length, stream with the slot held. Default
	// DefaultAnswerBuffer (1MiB); 0: only the copy buffer.
	AnswerBuffer int64
}

// ServerPaths is the request-path normalisation policy (`server.paths`).
// Every path is normalised (dot segments removed, slashes merged, escapes
// made canonical) before it is routed, authorized and forwarded; see
// "Request paths" in docs/configuration.md.
type ServerPaths struct {
	// EscapedSlashes is what a path's %2F or %5C (any case) gets
	// (`escaped_slashes`): EscapedSlashesReject ("reject", the default,
	// DefaultEscapedSlashes: 400 bad_path, except on raw_path routes),
	// EscapedSlashesKeep ("keep": left encoded, an ordinary byte of its
	// segment) or EscapedSlashesDecode ("decode": read as '/' before
	// normalising). Never empty after parsing.
	EscapedSlashes string
}

// The accepted values of ServerPaths.EscapedSlashes.
const (
	EscapedSlashesReject = "reject"
	EscapedSlashesKeep   = "keep"
	EscapedSlashesDecode = "decode"
)

// The accepted values of Server.UnderscoresInHeaders.
const (
	UnderscoresDrop   = "drop"
	UnderscoresAllow  = "allow"
	UnderscoresReject = "reject"
)

// Memory guards the process against running out of memory (`memory`).
// The watermarks are fractions of Limit compared with the live heap as
// runtime/metrics reports it (/gc/heap/live:bytes) plus the bytes that
// admitted requests have reserved to buffer bodies; SoftWatermark <
// HardWatermark <= 1.
type Memory struct {
	// Limit is the Go runtime's soft memory limit, in bytes, as
	// debug.SetMemoryLimit takes it (`limit`, a size, required when the
	// block is present): 64MiB to 1TiB. There is no default.
	Limit int64
	// SoftWatermark is the share of Limit above which sheddable requests
	// are refused, 503 memory_pressure (`soft_watermark`, a number greater
	// than 0 and at most 1, less than HardWatermark). Default
	// DefaultMemorySoftWatermark (0.8).
	SoftWatermark float64
	// HardWatermark is the share of Limit above which every request but
	// a critical one is refused, 503 memory_pressure (`hard_watermark`, a
	// number greater than 0 and at most 1, greater than SoftWatermark).
	// Default DefaultMemoryHardWatermark (0.9).
	HardWatermark float64
}

// Limits is the admission control of one upstream (`limits`): how many
// requests may be in flight to it at once, and how the rest wait in a
// bounded queue that is fair between consumers. See "Admission control"
// in docs/configuration.md.
type Limits struct {
	// MaxConcurrency is the static limit on requests in flight to the
	// upstream (`max_concurrency`, required: a whole number 1 to 100000,
	// or the string "adaptive"). There is no default. It is 0 exactly
	// when Adaptive is true.
	MaxConcurrency int
	// Adaptive is true when `max_concurrency: adaptive`: the limit is
	// found from measured latency and kept from Min to Max.
	Adaptive bool
	// Min is the lowest limit the adaptive algorithm may set (`min`, a
	// whole number from 1 to Max). Default DefaultLimitsAdaptiveMin (4)
	// when Adaptive; 0 with a static limit, where `min` is an error.
	Min int
	// Max is the highest limit the adaptive algorithm may set (`max`, a
	// whole number from Min to 100000). Default DefaultLimitsAdaptiveMax (1000) when Adaptive; 0
	// with a static limit, where `max` is an error.
	Max int
	// MaxQueue caps the requests waiting for a slot (`max_queue`, a whole
	// number 0 to 1000000). Default twice MaxConcurrency for a static
	// limit, DefaultLimitsAdaptiveMaxQueue (256) for an adaptive one. 0
	// means no queue: a request over the limit is refused at once, 503
	// concurrency_limit. A request arriving to a full queue gets 503
	// queue_full.
	MaxQueue int
	// QueueTimeout is the longest a request waits in the queue before it
	// is refused, 503 queue_timeout (`queue_timeout`, a duration greater
	// than 0). Default DefaultLimitsQueueTimeout (50ms).
	QueueTimeout time.Duration
	// MaxPerConsumer caps the requests one consumer (the authenticated
	// app when there is one, else the client IP) may have in flight to
	// the upstream at once; a request over it is refused, 429
	// consumer_limit (`max_per_consumer`, a whole number 0 or more).
	// Default DefaultLimitsMaxPerConsumer (0), which means automatic: the
	// current limit plus half of max_queue (one consumer may use every slot
	// nobody else wants, but never more than half the queue).
	MaxPerConsumer int
}

// Log configures logging (`log`).
type Log struct {
	// Level is the lowest level logged: "debug", "info", "warn" or "error"
	// (`level`). Default DefaultLogLevel ("info").
	Level string
	// Access turns the per-request access log on (`access`: true, false,
	// or a block of settings, which turns it on). Default
	// DefaultLogAccess (true).
	Access bool
	// AccessLog is the access log's settings (`access` as a block); their
	// defaults with `access: true` or omitted (accesslog.go).
	AccessLog AccessLog
}

// Metrics configures the metrics levee reports (`metrics`).
type Metrics struct {
	// AppLabels is the most apps with an app label of their own in
	// levee_app_requests_total; the others are summed under
	// app="other" (`app_labels`, a whole number 0 to 1000). Default
	// DefaultMetricsAppLabels (50). It bounds the series an operator's
	// Prometheus receives however many apps exist.
	AppLabels int
	// EndpointLabels is the most endpoints of one upstream with an
	// endpoint label of their own in the levee_endpoint_* series; the
	// others are summed under endpoint="other" (`endpoint_labels`, a whole
	// number 0 to 1000; 0: all summed). Default
	// DefaultMetricsEndpointLabels (50). It bounds the series a large
	// discovered upstream sends to Prometheus.
	EndpointLabels int
}

// Profiles configures the CPU profiles and goroutine dumps levee captures
// by itself under state_dir/profiles (`profiles`; see docs/operations.md).
type Profiles struct {
	// Enabled turns the captures on (`enabled`). Default
	// DefaultProfilesEnabled (true).
	Enabled bool
	// CPUThreshold is the share of GOMAXPROCS's CPU time above which the
	// process counts as busy (`cpu_threshold`, greater than 0 and at most
	// 1). Default DefaultProfilesCPUThreshold (0.9).
	CPUThreshold float64
	// Sustain is how long CPU use must stay above the threshold before a
	// capture (`sustain`, 1s to 1h). Default DefaultProfilesSustain (10s).
	Sustain time.Duration
	// OnShedding also captures when admission control starts refusing
	// requests (`on_shedding`). Default DefaultProfilesOnShedding (true).
	OnShedding bool
	// Interval is the least time between two captures (`interval`, 1s to
	// 24h). Default DefaultProfilesInterval (10m).
	Interval time.Duration
	// Duration is how long each CPU profile records (`duration`, 100ms to
	// 5m). Default DefaultProfilesDuration (10s).
	Duration time.Duration
	// Keep is how many captures are kept, the newest (`keep`, 1 to 1000).
	// Default DefaultProfilesKeep (10).
	Keep int
	// MaxBytes bounds the captures' files together, the oldest removed
	// first (`max_bytes`, 1MiB to 16GiB). Default DefaultProfilesMaxBytes
	// (64MiB).
	MaxBytes int64
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
}

// HealthCheck is an upstream's active health check (`health_check`):
// exactly one of HTTP or TCP.
type HealthCheck struct {
	// HTTP, when not nil, makes each check an HTTP GET (`http`).
	HTTP *HTTPCheck
	// TCP, when true, makes each check a TCP connect (`tcp`, true or
	// false). Exactly one of http and tcp: true is required.
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

// LeastRequest tunes the least_request balancer (`least_request`): power
// of two choices over the endpoints' in-flight requests, scaled by weight.
type LeastRequest struct {
	// EWMA, when true, also weighs each endpoint's decayed latency
	// estimate (an exponentially weighted moving average) into the choice
	// (`ewma`, true or false). Default DefaultLeastRequestEWMA (false):
	// in-flight requests only.
	EWMA bool
	// Tau is the decay time of the latency estimate: a sample's influence
	// falls to 1/e after Tau (`tau`, a duration greater than 0). Default
	// DefaultLeastRequestTau (10s). Used only when EWMA is true, but
	// validated either way.
	Tau time.Duration
}

// ConsistentHash configures the consistent_hash balancer
// (`consistent_hash`): requests with the same key go to the same endpoint
// while the endpoint set is stable.
type ConsistentHash struct {
	// HashOn names the request property hashed (`hash_on`, required), in
	// normalised form: "header:NAME" with NAME canonicalised as
	// textproto.CanonicalMIMEHeaderKey does ("header:X-User"),
	// "cookie:NAME" and "query:NAME" with NAME as written (case matters),
	// "client_ip" or "path". NAME is 1 to 128 bytes: an RFC 7230 token
	// for a header or a cookie name; for a query key any bytes except
	// control characters, compared with the decoded key. Use Key to split
	// it.
	HashOn string
}

// Kinds of ConsistentHash.HashOn, as Key returns them.
const (
	HashOnHeader   = "header"
	HashOnCookie   = "cookie"
	HashOnQuery    = "query"
	HashOnClientIP = "client_ip"
	HashOnPath     = "path"
)

// Key splits HashOn into its kind (HashOnHeader, HashOnCookie,
// HashOnQuery, HashOnClientIP or HashOnPath) and the name it carries,
// which is empty for client_ip and path.
func (c ConsistentHash) Key() (kind, name string) {
	kind, name, _ = strings.Cut(c.HashOn, ":")
	return kind, name
}

// Discovery takes an upstream's endpoints from a registry (`discovery`).
// Exactly one source is set: File, Etcd or Push. Instances from any source
// are normalised and checked before use; see "Discovery" in
// docs/configuration.md.
type Discovery struct {
	// File is the path of a JSON file holding an array of instances
	// (`file`, a non-empty string). It need not exist when the
	// configuration is parsed: the source waits for it. A relative path
	// is relative to the process's working directory. Empty when another
	// source is set.
	File string
	// Etcd reads instances from an etcd v3 cluster, one key per instance
	// under a prefix (`etcd`). nil when another source is set.
	Etcd *EtcdDiscovery
	// Push, when true, takes instances only from the admin API,
	// PUT /api/v1/upstreams/{name}/endpoints (`push`, true or false).
	// `push: false` counts as no source. false when another source is set.
	Push bool
	// MaxDropFraction is the delta guard: an update that would drain or
	// remove more than this share of the upstream's active weight at once
	// is held until it has persisted for ConfirmAfter or an operator
	// confirms it (`max_drop_fraction`, a number greater than 0 and at
	// most 1). Default DefaultDiscoveryMaxDropFraction (0.5). 1 turns the
	// guard off.
	MaxDropFraction float64
	// ConfirmAfter is how long a held update must persist before it is
	// applied without an operator's confirmation (`confirm_after`, a
	// duration greater than 0). Default DefaultDiscoveryConfirmAfter
	// (30s).
	ConfirmAfter time.Duration
	// MaxWeight is the largest weight, in whole units, that a registry
	// may send for one instance; a larger one is rejected as too_large
	// (`max_weight`, a whole number 1 to 1000000). Default
	// DefaultDiscoveryMaxWeight (10000). Registry weights may carry two
	// decimals; this bound applies to the value as sent.
	MaxWeight uint32
}

// Source returns the name of d's source as written in YAML: "file",
// "etcd" or "push".
func (d *Discovery) Source() string {
	switch {
	case d.File != "":
		return "file"
	case d.Etcd != nil:
		return "etcd"
	default:
		return "push"
	}
}

// EtcdDiscovery reads instances from etcd v3 (`discovery.etcd`): the value
// of every key under Prefix is one instance.
type EtcdDiscovery struct {
	// Endpoints are the etcd cluster members to dial (`endpoints`, 1 to 16
	// distinct items), each "host:port", "http://host:port" or
	// "https://host:port", kept as written. host:port follows the rules
	// of Endpoint.Address.
	Endpoints []string
	// Prefix is the key prefix whose keys are this upstream's instances
	// (`prefix`, required): it starts and ends with "/", as in
	// "/levee/services/video/".
	Prefix string
	// DialTimeout bounds establishing a connection to etcd
	// (`dial_timeout`, a duration greater than 0). Default
	// DefaultEtcdDialTimeout (2s).
	DialTimeout time.Duration
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
	// Auth is how callers of this route are identified (`auth`):
	// AuthNone ("none", the default, DefaultRouteAuth: anyone),
	// AuthAPIKey ("api_key") or AuthHMAC ("hmac"). With api_key or hmac
	// only apps whose grants name this route are admitted.
	Auth string
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
}

// The accepted values of Route.Priority, most important first.
const (
	PriorityCritical  = "critical"
	PriorityNormal    = "normal"
	PrioritySheddable = "sheddable"
)

// Retry is a retry policy (`retry`), set per upstream and optionally
// replaced per route. Which requests may be retried at all (idempotent
// ones, bodies up to ReplayBodyLimit, within the budget and the route's
// Timeout) is the proxy's rule, described in docs/configuration.md.
type Retry struct {
	// Attempts is the total number of tries, the first included
	// (`attempts`, a whole number 1 to 10). Default DefaultRetryAttempts
	// (3). 1 means no retries.
	Attempts int
	// On is the set of outcomes that are retried (`on`, a non-empty list
	// of condition names and status codes). Default: connect_failure,
	// refused_stream, reset_before_response, 502, 503 and 504.
	On RetryOn
	// PerTryTimeout bounds one attempt, from the start of its connect to
	// the response headers (`per_try_timeout`, a duration greater than
	// 0). Default DefaultRetryPerTryTimeout (0), which means none: only
	// the upstream's Timeouts and the route's Timeout apply. An attempt
	// that hits it counts as status 504 for On.
	PerTryTimeout time.Duration
	// Backoff is the wait between attempts (`backoff`).
	Backoff Backoff
	// Budget caps the retries to the upstream (`budget`). Set only in an
	// upstream's Retry; always zero in a route's.
	Budget RetryBudget
	// ReplayBodyLimit is the largest request body, in bytes, that is
	// buffered so that it can be sent again (`replay_body_limit`, a size
	// from 0 to 16MiB). Default DefaultRetryReplayBodyLimit (64KiB). A
	// request with a larger body is not retried once any of it was sent;
	// 0 means only requests without a body are.
	ReplayBodyLimit int64
}

// RetryOn is the set of outcomes a Retry retries (`on`). In YAML it is one
// list mixing condition names and status codes, each at most once:
// [connect_failure, 503].
type RetryOn struct {
	// ConnectFailure retries when a connection to the endpoint could not
	// be established, so nothing of the request was sent
	// (`connect_failure`).
	ConnectFailure bool
	// RefusedStream retries an HTTP/2 stream the upstream refused
	// (REFUSED_STREAM) (`refused_stream`). levee does not speak HTTP/2 to
	// upstreams yet, so for now it never applies.
	RefusedStream bool
	// ResetBeforeResponse retries when the connection was reset or closed
	// after the request was sent but before any response header arrived
	// (`reset_before_response`).
	ResetBeforeResponse bool
	// Statuses are the response status codes retried, sorted ascending,
	// without duplicates, each 400 to 599 (written as YAML integers, not
	// strings). nil when the list names none. A timeout levee itself
	// hits counts as 504.
	Statuses []int
}

// Backoff is the wait before each retry (`backoff`): it starts from Base,
// grows with each retry and never exceeds Max. Both are durations greater
// than 0, and Max is at least Base.
type Backoff struct {
	// Base is the starting wait (`base`). Default
	// DefaultRetryBackoffBase (25ms).
	Base time.Duration
	// Max caps the wait (`max`). Default DefaultRetryBackoffMax (250ms).
	Max time.Duration
}

// RetryBudget caps an upstream's retries (`budget`): over a sliding
// 10-second window, retries may not exceed Ratio × first attempts +
// MinPerSecond × 10. Both zero means no retries are ever allowed.
type RetryBudget struct {
	// Ratio is the share of requests that may be retried (`ratio`, a
	// number from 0 to 1). Default DefaultRetryBudgetRatio (0.2).
	Ratio float64
	// MinPerSecond is the retry allowance per second that holds however
	// little traffic there is (`min_per_second`, a number from 0 to
	// 1000000, fractions allowed). Default DefaultRetryBudgetMinPerSecond
	// (5).
	MinPerSecond float64
}

// Match is the condition under which a route takes a request (`match`).
// All given conditions must hold.
type Match struct {
	// Host is the request host to match, without a port (`host`): an
	// exact name ("api.example.com") or a name whose whole leftmost label
	// is the wildcard ("*.example.com"); "*" appears nowhere else. Stored
	// lower-case. Empty, the default, matches any host.
	Host string
	// PathPrefix is the prefix the request path must start with
	// (`path_prefix`). It starts with "/". Default DefaultPathPrefix ("/"),
	// which matches every path.
	PathPrefix string
	// Methods lists the HTTP methods matched (`methods`), each an RFC 7230
	// token stored upper-case, no duplicates. nil, the default, matches any
	// method but CONNECT, which is refused (405) unless the route lists it
	// here. An explicit empty list is an error.
	Methods []string
	// RawPath forwards the request target's path bytes as received
	// instead of their normal form (`raw_path`, a boolean). Default
	// false. The route is still matched (so its auth is decided) on the
	// normal form; the backend gets the bytes as sent, so it must resolve
	// them as levee does: a risk, see "Request paths" in
	// docs/configuration.md.
	RawPath bool
}

// Load reads the file at path and parses it with Parse. Files larger than
// 4 MiB are refused without being read whole. Every error, including a
// failure to read the file, is an *Errors.
func Load(path string) (*Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fileError(fmt.Sprintf("reading config: %v", err))
	}
	defer f.Close()
	return Read(f)
}

// Read parses the configuration read from r (at most 4 MiB are read) as
// Load does a file's: `levee validate -config -` reads standard input
// with it. Relative paths in it resolve against the working directory,
// as they do in a file.
func Read(r io.Reader) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxFileBytes+1))
	if err != nil {
		return nil, fileError(fmt.Sprintf("reading config: %v", err))
	}
	return Parse(data)
}

// Parse decodes one YAML document, applies defaults and validates the
// result. It returns either a complete *Config and a nil error, or a nil
// *Config and an *Errors listing every problem found, in file order where
// the problem has a position.
//
// Input over 4 MiB, nesting deeper than 64 levels, aliases (*name), merge
// keys (<<) and more than one document are refused. Parse reads the file
// system only to check that TLS files exist and are readable; relative
// paths are resolved against the working directory. It is safe to call
// concurrently.
func Parse(data []byte) (*Config, error) {
	if len(data) > maxFileBytes {
		return nil, fileError(fmt.Sprintf("file is larger than the %s limit", formatSize(maxFileBytes)))
	}
	root, err := decode(data)
	if err != nil {
		return nil, err
	}
	p := &parser{}
	if !p.scan(root, "", 0) {
		return nil, p.result() // scan only fails after adding an error
	}
	cfg := p.config(root)
	if errs := p.result(); errs != nil {
		return nil, errs
	}
	return cfg, nil
}
