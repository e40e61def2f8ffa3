package config

import (
	"reflect"
	"strconv"
	"time"

	"gopkg.in/yaml.v3"
)

// This file is the one description of the config file's fields: for each
// block, its fields in the walker's order (of two names equally close to a
// misspelt key, "did you mean" offers the earlier), each with its
// name, kind, bounds, default and a doc line. The walker takes a block's
// allowed keys (and so its "did you mean" candidates) from here, reads
// every field that has a bind generically (bind.go: kind, bounds, whether
// it is required or may be empty and the messages then, and its own
// check), and the JSON Schema in deploy/levee.schema.json is generated
// from the same tables (schema.go). A field's default is its entry's def
// (the exported Default* constant it names): the default* constructors
// that the reader starts from take it from the table (withDefaults), so
// that the two cannot drift (TestFieldDefaults, and
// TestFieldTableDrivesDefaultsReloadAndDocs against Parse). So does
// whether a reload applies a change to the field (reload, reload.go) and
// docs/configuration.md's field reference (reference.go).
// Cross-field rules run in the block's reader once p.bind has read it,
// consulting the set of fields p.bind found missing or invalid.
//
// Every field that is a value has a bind. A field without one is read by
// hand in walk.go or its topic file, for the reason given (its entry
// still gives the schema its kind and bounds):
//   - lists whose items are checked against each other (duplicates) or
//     against other parts of the file: admin.tokens, discovery.etcd.endpoints,
//     upstreams.*.endpoints (required unless discovery is set), retry.on
//     (conditions or statuses), health_check.http.expect, zones.failover
//     (not the local zone), routes, match.methods, forward_trailers,
//     upgrades, apps, api_key_sha256 (unique across apps) and grants
//     (routes of the file);
//   - maps of named blocks: upstreams, apps[].route_limits (keys are grants);
//   - limits.max_concurrency, of two forms whose kind decides min, max
//     and max_queue's default;
//   - blocks with a rule across their fields or with a field above, whose
//     reader runs p.bind and then the rule: admin (omitted, it reports
//     admin.listen), memory (soft below hard watermark), least_request and
//     consistent_hash (only with their balancer), discovery (exactly one
//     source), etcd, retry (an upstream's or a route's, which refuses
//     budget), backoff (max at least base), limits, health_check (http or
//     tcp; timeout at most interval), http, outlier_detection (ejection
//     times), zones, match (its methods feed the overlap check),
//     anonymous_limits (only with auth none) and apps[].limits (burst
//     needs rate; burst/rate bounded).

// fieldKind is how a field's value is written.
type fieldKind uint8

const (
	kindString   fieldKind = iota + 1 // a string
	kindEnum                          // a string, one of field.enum
	kindInt                           // a YAML integer from lo to hi
	kindNumber                        // a YAML integer or float from flo to fhi
	kindFraction                      // a number greater than 0 and at most 1
	kindBool                          // true or false
	kindDuration                      // a Go duration string, greater than 0
	kindSize                          // a byte count: an integer or "64KiB", from lo to hi
	kindBlock                         // a mapping described by sub (null: every default)
	kindMap                           // a mapping of names to blocks described by sub
	kindList                          // a sequence of items described by item
	kindEither                        // any one of the forms in field.either
)

// field describes one key of a block.
type field struct {
	name string
	kind fieldKind
	doc  string
	// lo and hi bound kindInt and kindSize; flo and fhi kindNumber.
	lo, hi   int64
	flo, fhi float64
	enum     []string
	// def is the value an omitted field takes, as the Go value of the
	// typed field (a time.Duration for a duration); nil when there is no
	// fixed default (required, or it depends on other fields).
	def any
	// required fields must be set (and non-empty for strings). The
	// walker reports an omitted bound one with missing ("required" when
	// empty), at the enclosing mapping.
	required bool
	missing  string
	// nonEmpty strings may be omitted but not set to "". The walker
	// reports a bound string or enum that is required or nonEmpty and set
	// to "" with empty ("required" for a required field, "must not be
	// empty" otherwise).
	nonEmpty bool
	empty    string
	// check is a bound field's own rule (a readable file, an address, a
	// name), run after its value was read and stored: it gets the pointer
	// bind returned, may rewrite the value (normalise it), reports what
	// is wrong and says whether the value is valid. See the check*
	// helpers below.
	check func(p *parser, path string, n *yaml.Node, ptr any) bool
	// sub describes a kindBlock's or kindMap's values.
	sub *block
	// item describes a kindList's items.
	item *field
	// either lists the forms of a kindEither value.
	either []field
	// minItems and maxItems bound the items of a kindList, or the entries
	// of a kindMap (maxItems 0: no bound).
	minItems, maxItems int
	// pattern is a regular expression a kindString must match (the schema
	// only: the walker checks the same rule by hand).
	pattern string
	// omit names fields of sub that this use of the block refuses (a
	// route's retry has no budget); they stay keys, for a better message.
	omit []string
	// bind returns where the value is stored in the struct that the block
	// is read into; nil when the field is read by hand.
	bind func(dst any) any
	// secret fields hold a credential (or what stands for one, such as a
	// key's digest): GET /api/v1/config shows config.Redacted instead
	// (effective.go). notSecret says why a field whose name sounds like a
	// secret is not one (TestSecretFieldsMarked wants one or the other).
	secret    bool
	notSecret string
	// reload is what a reload does with a change to the field: apply it
	// (reloadApplied, the zero value) or refuse it, a restart needed
	// (reload.go). ReloadRefusals and docs/configuration.md read it.
	reload reloadRule
}

// block is the description of one mapping of the file.
type block struct {
	fields []field
	keys   []string // the field names in order: the walker's allowed keys
}

// newBlock returns a block of fields, its keys in the order given.
func newBlock(fields ...field) *block {
	b := &block{fields: fields, keys: make([]string, len(fields))}
	for i, f := range fields {
		b.keys[i] = f.name
	}
	return b
}

// at returns a bind that takes a *T and returns the address of one of
// its fields.
func at[T, V any](f func(*T) *V) func(any) any {
	return func(dst any) any { return f(dst.(*T)) }
}

// opt returns a bind of an optional block held by pointer (nil when
// omitted): it allocates the block with mk, which gives its defaults,
// when the field is set.
func opt[T, V any](f func(*T) **V, mk func() *V) func(any) any {
	return func(dst any) any {
		pp := f(dst.(*T))
		if *pp == nil {
			*pp = mk()
		}
		return *pp
	}
}

// Bounds that only the field tables use.
const (
	maxMetricsAppLabels  = 1000
	maxPanicThreshold    = 100
	maxEjectionPercent   = 100
	minHealthCheckStatus = 100
	maxHealthCheckStatus = 599
	// maxAnswerBuffer bounds server.answer_buffer: every answer read whole
	// is reserved from the memory budget, and one this large per slow
	// client is already a lot.
	maxAnswerBuffer = 64 << 20
	// The bounds of server.body_timeout and the send timeouts.
	minClientTimeout = 100 * time.Millisecond
	maxClientTimeout = time.Hour
)

// The blocks of the file, from the leaves up (a block names its sub-blocks).
var (
	tlsBlock = newBlock(
		field{name: "cert_file", kind: kindString, required: true, doc: "PEM certificate chain the listener serves; must be readable",
			check: checkReadable, bind: at(func(t *TLS) *string { return &t.CertFile })},
		field{name: "key_file", kind: kindString, required: true, doc: "PEM private key of cert_file; must be readable", notSecret: "a path; the key is read from the file",
			check: checkReadable, bind: at(func(t *TLS) *string { return &t.KeyFile })},
	)

	adminTokenBlock = newBlock(
		field{name: "file", kind: kindString, required: true, doc: "file holding the token; distinct across tokens",
			bind: at(func(t *AdminToken) *string { return &t.File })},
		field{name: "scope", kind: kindEnum, enum: adminScopes, required: true, doc: "what the token may do",
			bind: at(func(t *AdminToken) *string { return &t.Scope })},
	)

	adminBlock = newBlock(
		field{name: "listen", kind: kindString, required: true, doc: "host:port of the admin API; not the data-plane port", reload: restart,
			check: checkListen, bind: at(func(a *Admin) *string { return &a.Listen })},
		field{name: "token_file", kind: kindString, doc: "file holding the full-scope admin token; required off loopback unless tokens are set",
			check: checkTokenFile, bind: at(func(a *Admin) *string { return &a.TokenFile }), notSecret: "a path; the token is read from the file"},
		field{name: "tokens", kind: kindList, maxItems: MaxAdminTokens, item: &field{kind: kindBlock, sub: adminTokenBlock},
			doc: "admin tokens with a scope, each in its own file", notSecret: "paths and scopes; each token is read from its file"},
		field{name: "token", kind: kindEnum, enum: adminTokenModes, def: DefaultAdminToken,
			doc:       "without token_file and tokens: generate a write token under state_dir, or none (loopback only)",
			notSecret: "generate or none; never a token", bind: at(func(a *Admin) *string { return &a.Token })},
		field{name: "hosts", kind: kindList, maxItems: MaxAdminHosts, item: &field{kind: kindString, pattern: hostNamePattern},
			doc: "host names the admin API accepts in Host besides IPs and localhost", check: checkAdminHosts,
			bind: at(func(a *Admin) *[]string { return &a.Hosts })},
	)

	serverPathsBlock = newBlock(
		field{name: "escaped_slashes", kind: kindEnum, enum: escapedSlashesModes, def: DefaultEscapedSlashes,
			doc:  "what a %2F in a request path does: refuse it, keep it encoded, or decode it",
			bind: at(func(s *ServerPaths) *string { return &s.EscapedSlashes })},
	)

	serverBlock = newBlock(
		field{name: "max_header_bytes", kind: kindSize, lo: minMaxHeaderBytes, hi: maxMaxHeaderBytes, def: DefaultMaxHeaderBytes,
			doc:  "largest request head accepted",
			bind: at(func(s *Server) *int64 { return &s.MaxHeaderBytes })},
		field{name: "read_header_timeout", kind: kindDuration, def: DefaultReadHeaderTimeout,
			doc:  "time a client has to send the request head",
			bind: at(func(s *Server) *time.Duration { return &s.ReadHeaderTimeout })},
		field{name: "idle_timeout", kind: kindDuration, def: DefaultIdleTimeout,
			doc:  "how long an idle client connection stays open",
			bind: at(func(s *Server) *time.Duration { return &s.IdleTimeout })},
		field{name: "shutdown_timeout", kind: kindDuration, def: DefaultShutdownTimeout,
			doc:  "how long a shutdown waits for requests in flight",
			bind: at(func(s *Server) *time.Duration { return &s.ShutdownTimeout })},
		field{name: "max_connections", kind: kindInt, lo: 0, hi: maxMaxConnections, def: DefaultMaxConnections,
			doc:  "client connections open at once; 0 is unlimited",
			bind: at(func(s *Server) *int { return &s.MaxConnections })},
		field{name: "max_connections_per_ip", kind: kindInt, lo: 0, hi: maxMaxConnections, def: DefaultMaxConnectionsPerIP,
			doc:  "client connections open at once from one address; 0 is unlimited",
			bind: at(func(s *Server) *int { return &s.MaxConnectionsPerIP })},
		field{name: "http2_max_concurrent_streams", kind: kindInt, lo: minHTTP2Streams, hi: maxHTTP2Streams, def: DefaultHTTP2MaxConcurrentStreams,
			doc:  "streams one HTTP/2 client connection may have open",
			bind: at(func(s *Server) *int { return &s.HTTP2MaxConcurrentStreams })},
		field{name: "paths", kind: kindBlock, sub: serverPathsBlock, doc: "how request paths are normalised",
			bind: at(func(s *Server) *ServerPaths { return &s.Paths })},
		field{name: "underscores_in_headers", kind: kindEnum, enum: underscoreModes, def: DefaultUnderscoresInHeaders, reload: restart,
			doc:  "what a request header name with an underscore does: dropped, allowed or refused",
			bind: at(func(s *Server) *string { return &s.UnderscoresInHeaders })},
		field{name: "body_timeout", kind: kindDuration, def: DefaultBodyTimeout,
			doc:   "longest wait for the next bytes of a request body; 408 past it; 100ms to 1h",
			check: checkDurationWithin(minClientTimeout, maxClientTimeout), bind: at(func(s *Server) *time.Duration { return &s.BodyTimeout })},
		field{name: "send_timeout", kind: kindDuration, def: DefaultSendTimeout,
			doc:   "longest wait for the client to accept each write of an answer; the connection or stream is aborted past it; 100ms to 1h",
			check: checkDurationWithin(minClientTimeout, maxClientTimeout), bind: at(func(s *Server) *time.Duration { return &s.SendTimeout })},
		field{name: "answer_buffer", kind: kindSize, lo: 0, hi: maxAnswerBuffer, def: int64(DefaultAnswerBuffer),
			doc:  "largest upstream answer of known length read whole before it is written to the client, so its admission slot is released at once; 0: 32 KiB",
			bind: at(func(s *Server) *int64 { return &s.AnswerBuffer })},
	)

	memoryBlock = newBlock(
		field{name: "limit", kind: kindSize, lo: minMemoryLimit, hi: maxMemoryLimit, required: true,
			missing: `required when memory is set, a size such as "2GiB"`,
			doc:     "the process's memory budget",
			bind:    at(func(m *Memory) *int64 { return &m.Limit })},
		field{name: "soft_watermark", kind: kindFraction, def: DefaultMemorySoftWatermark,
			doc:  "share of limit above which sheddable requests are refused; below hard_watermark",
			bind: at(func(m *Memory) *float64 { return &m.SoftWatermark })},
		field{name: "hard_watermark", kind: kindFraction, def: DefaultMemoryHardWatermark,
			doc:  "share of limit above which all but critical requests are refused",
			bind: at(func(m *Memory) *float64 { return &m.HardWatermark })},
	)

	logBlock = newBlock(
		field{name: "level", kind: kindEnum, enum: logLevels, def: DefaultLogLevel, doc: "lowest level logged",
			bind: at(func(l *Log) *string { return &l.Level })},
		field{name: "access", kind: kindEither, def: DefaultLogAccess, doc: "whether each request is logged: true, false, or the access log's settings (which turn it on)",
			either: []field{{kind: kindBool}, {kind: kindBlock, sub: accessLogBlock}}},
	)

	profilesBlock = newBlock(
		field{name: "enabled", kind: kindBool, def: DefaultProfilesEnabled, doc: "whether levee captures CPU profiles by itself",
			bind: at(func(p *Profiles) *bool { return &p.Enabled })},
		field{name: "cpu_threshold", kind: kindFraction, def: DefaultProfilesCPUThreshold, doc: "share of GOMAXPROCS's CPU above which the process is busy",
			bind: at(func(p *Profiles) *float64 { return &p.CPUThreshold })},
		field{name: "sustain", kind: kindDuration, def: DefaultProfilesSustain, doc: "how long CPU use stays above the threshold before a capture; 1s to 1h",
			check: checkDurationWithin(time.Second, time.Hour), bind: at(func(p *Profiles) *time.Duration { return &p.Sustain })},
		field{name: "on_shedding", kind: kindBool, def: DefaultProfilesOnShedding, doc: "also capture when admission starts refusing requests",
			bind: at(func(p *Profiles) *bool { return &p.OnShedding })},
		field{name: "interval", kind: kindDuration, def: DefaultProfilesInterval, doc: "least time between two captures; 1s to 24h",
			check: checkDurationWithin(time.Second, 24*time.Hour), bind: at(func(p *Profiles) *time.Duration { return &p.Interval })},
		field{name: "duration", kind: kindDuration, def: DefaultProfilesDuration, doc: "how long each CPU profile records; 100ms to 5m",
			check: checkDurationWithin(100*time.Millisecond, 5*time.Minute), bind: at(func(p *Profiles) *time.Duration { return &p.Duration })},
		field{name: "keep", kind: kindInt, lo: 1, hi: 1000, def: DefaultProfilesKeep, doc: "captures kept, the newest",
			bind: at(func(p *Profiles) *int { return &p.Keep })},
		field{name: "max_bytes", kind: kindSize, lo: 1 << 20, hi: 16 << 30, def: int64(DefaultProfilesMaxBytes), doc: "the captures' files together; the oldest go first",
			bind: at(func(p *Profiles) *int64 { return &p.MaxBytes })},
	)

	metricsBlock = newBlock(
		field{name: "app_labels", kind: kindInt, lo: 0, hi: maxMetricsAppLabels, def: DefaultMetricsAppLabels,
			doc:  "apps given their own metric label; the rest share one",
			bind: at(func(m *Metrics) *int { return &m.AppLabels })},
		field{name: "endpoint_labels", kind: kindInt, lo: 0, hi: maxMetricsAppLabels, def: DefaultMetricsEndpointLabels,
			doc:  "endpoints of one upstream given their own metric label; the rest share one",
			bind: at(func(m *Metrics) *int { return &m.EndpointLabels })},
	)

	leastRequestBlock = newBlock(
		field{name: "ewma", kind: kindBool, def: DefaultLeastRequestEWMA, doc: "weigh in-flight requests by a moving average of latency",
			bind: at(func(l *LeastRequest) *bool { return &l.EWMA })},
		field{name: "tau", kind: kindDuration, def: DefaultLeastRequestTau, doc: "time constant of the latency average",
			bind: at(func(l *LeastRequest) *time.Duration { return &l.Tau })},
	)

	consistentHashBlock = newBlock(
		field{name: "hash_on", kind: kindString, required: true, doc: hashOnForms,
			check: checkHashOn, bind: at(func(c *ConsistentHash) *string { return &c.HashOn })},
	)

	etcdBlock = newBlock(
		field{name: "endpoints", kind: kindList, required: true, minItems: 1, maxItems: maxEtcdEndpoints, item: &field{kind: kindString},
			doc: "etcd members: host:port or http(s)://host:port, distinct"},
		field{name: "prefix", kind: kindString, required: true, pattern: "^/(.*/)?$", doc: `key prefix of the upstream's instances, starting and ending with "/"`,
			check: checkEtcdPrefix, bind: at(func(e *EtcdDiscovery) *string { return &e.Prefix })},
		field{name: "dial_timeout", kind: kindDuration, def: DefaultEtcdDialTimeout, doc: "time to connect to etcd",
			bind: at(func(e *EtcdDiscovery) *time.Duration { return &e.DialTimeout })},
	)

	discoveryBlock = newBlock(
		field{name: "file", kind: kindString, nonEmpty: true, doc: "JSON file of instances, watched for changes",
			check: checkNoNUL, bind: at(func(d *Discovery) *string { return &d.File })},
		field{name: "etcd", kind: kindBlock, sub: etcdBlock, doc: "instances under a prefix of an etcd cluster"},
		field{name: "push", kind: kindBool, doc: "instances pushed through the admin API",
			bind: at(func(d *Discovery) *bool { return &d.Push })},
		field{name: "max_drop_fraction", kind: kindFraction, def: DefaultDiscoveryMaxDropFraction,
			doc:  "largest share of endpoints one update may remove before it is held for confirmation",
			bind: at(func(d *Discovery) *float64 { return &d.MaxDropFraction })},
		field{name: "confirm_after", kind: kindDuration, def: DefaultDiscoveryConfirmAfter, doc: "how long a held update must persist to apply",
			bind: at(func(d *Discovery) *time.Duration { return &d.ConfirmAfter })},
		field{name: "max_weight", kind: kindInt, lo: minDiscoveryMaxWeight, hi: maxDiscoveryMaxWeight, def: DefaultDiscoveryMaxWeight,
			doc:  "cap on a discovered instance's weight",
			bind: at(func(d *Discovery) *uint32 { return &d.MaxWeight })},
	)

	endpointBlock = newBlock(
		field{name: "address", kind: kindString, required: true, doc: "host:port of the endpoint",
			check: checkEndpoint, bind: at(func(e *Endpoint) *string { return &e.Address })},
		field{name: "weight", kind: kindInt, lo: 0, hi: maxWeight, def: DefaultWeight, doc: "share of requests; 0 drains the endpoint",
			bind: at(func(e *Endpoint) *uint32 { return &e.Weight })},
		field{name: "zone", kind: kindString, pattern: namePattern, doc: "zone the endpoint runs in",
			check: checkZone, bind: at(func(e *Endpoint) *string { return &e.Zone })},
	)

	timeoutsBlock = newBlock(
		field{name: "connect", kind: kindDuration, def: DefaultConnectTimeout, doc: "time to open a connection to an endpoint",
			bind: at(func(t *Timeouts) *time.Duration { return &t.Connect })},
		field{name: "response_header", kind: kindDuration, def: DefaultResponseHeaderTimeout, doc: "time from the request sent to the response head",
			bind: at(func(t *Timeouts) *time.Duration { return &t.ResponseHeader })},
		field{name: "idle", kind: kindDuration, def: DefaultUpstreamIdleTimeout, doc: "how long an idle upstream connection is kept",
			bind: at(func(t *Timeouts) *time.Duration { return &t.Idle })},
	)

	backoffBlock = newBlock(
		field{name: "base", kind: kindDuration, def: DefaultRetryBackoffBase, doc: "backoff before the first retry; at most max",
			bind: at(func(b *Backoff) *time.Duration { return &b.Base })},
		field{name: "max", kind: kindDuration, def: DefaultRetryBackoffMax, doc: "longest backoff",
			bind: at(func(b *Backoff) *time.Duration { return &b.Max })},
	)

	retryBudgetBlock = newBlock(
		field{name: "ratio", kind: kindNumber, flo: 0, fhi: maxRetryBudgetRatio, def: DefaultRetryBudgetRatio,
			doc:  "retries allowed per request, on average",
			bind: at(func(b *RetryBudget) *float64 { return &b.Ratio })},
		field{name: "min_per_second", kind: kindNumber, flo: 0, fhi: maxRetryMinPerSecond, def: DefaultRetryBudgetMinPerSecond,
			doc:  "retries allowed per second whatever the ratio",
			bind: at(func(b *RetryBudget) *float64 { return &b.MinPerSecond })},
	)

	retryBlock = newBlock(
		field{name: "attempts", kind: kindInt, lo: minRetryAttempts, hi: maxRetryAttempts, def: DefaultRetryAttempts,
			doc:  "tries in all, the first included",
			bind: at(func(r *Retry) *int { return &r.Attempts })},
		field{name: "on", kind: kindList, minItems: 1, item: &field{kind: kindEither, either: []field{
			{kind: kindEnum, enum: retryConditions}, {kind: kindInt, lo: minRetryStatus, hi: maxRetryStatus}}},
			doc: `conditions retried: "connect_failure", "refused_stream", "reset_before_response" or a status from 400 to 599`},
		field{name: "per_try_timeout", kind: kindDuration, def: nil,
			doc:  "deadline of each try; none when omitted",
			bind: at(func(r *Retry) *time.Duration { return &r.PerTryTimeout })},
		field{name: "backoff", kind: kindBlock, sub: backoffBlock, doc: "jittered exponential backoff between tries"},
		field{name: "budget", kind: kindBlock, sub: retryBudgetBlock, doc: "cap on retries across the upstream (upstreams only)",
			bind: at(func(r *Retry) *RetryBudget { return &r.Budget })},
		field{name: "replay_body_limit", kind: kindSize, lo: 0, hi: maxReplayBodyLimit, def: DefaultRetryReplayBodyLimit,
			doc:  "largest request body kept to replay on a retry",
			bind: at(func(r *Retry) *int64 { return &r.ReplayBodyLimit })},
	)

	limitsBlock = newBlock(
		field{name: "max_concurrency", kind: kindEither, required: true, doc: limitRule, either: []field{
			{kind: kindInt, lo: 1, hi: maxConcurrencyCap}, {kind: kindEnum, enum: []string{adaptiveLimit}}}},
		field{name: "min", kind: kindInt, lo: 1, hi: maxConcurrencyCap, doc: "lowest adaptive limit",
			bind: at(func(l *Limits) *int { return &l.Min })},
		field{name: "max", kind: kindInt, lo: 1, hi: maxConcurrencyCap, doc: "highest adaptive limit",
			bind: at(func(l *Limits) *int { return &l.Max })},
		field{name: "max_queue", kind: kindInt, lo: 0, hi: maxQueueCap, doc: "requests waiting at once; twice a static limit, or 256 with adaptive",
			bind: at(func(l *Limits) *int { return &l.MaxQueue })},
		field{name: "queue_timeout", kind: kindDuration, def: DefaultLimitsQueueTimeout, doc: "longest wait in the queue",
			bind: at(func(l *Limits) *time.Duration { return &l.QueueTimeout })},
		field{name: "max_per_consumer", kind: kindInt, lo: 0, hi: maxMaxConnections, def: DefaultLimitsMaxPerConsumer,
			doc:  "requests one consumer may have in flight; 0 is half the limit",
			bind: at(func(l *Limits) *int { return &l.MaxPerConsumer })},
	)

	httpCheckBlock = newBlock(
		field{name: "path", kind: kindString, def: DefaultHealthCheckPath, doc: "path probed; at most 1024 bytes",
			check: problemOf(checkHealthPath), bind: at(func(h *HTTPCheck) *string { return &h.Path })},
		field{name: "expect", kind: kindList, minItems: 1, maxItems: maxExpectStatuses,
			item: &field{kind: kindInt, lo: minHealthCheckStatus, hi: maxHealthCheckStatus}, doc: "statuses that count as healthy (1 to 16)"},
	)

	healthCheckBlock = newBlock(
		field{name: "http", kind: kindBlock, sub: httpCheckBlock, doc: "probe with an HTTP GET"},
		field{name: "tcp", kind: kindBool, doc: "probe by opening a connection",
			bind: at(func(h *HealthCheck) *bool { return &h.TCP })},
		field{name: "interval", kind: kindDuration, def: DefaultHealthCheckInterval, doc: "time between probes; at least timeout",
			bind: at(func(h *HealthCheck) *time.Duration { return &h.Interval })},
		field{name: "timeout", kind: kindDuration, def: DefaultHealthCheckTimeout, doc: "deadline of a probe",
			bind: at(func(h *HealthCheck) *time.Duration { return &h.Timeout })},
		field{name: "healthy_after", kind: kindInt, lo: 1, hi: maxCheckRun, def: DefaultHealthyAfter, doc: "passing probes in a row that make an endpoint healthy",
			bind: at(func(h *HealthCheck) *int { return &h.HealthyAfter })},
		field{name: "unhealthy_after", kind: kindInt, lo: 1, hi: maxCheckRun, def: DefaultUnhealthyAfter, doc: "failing probes in a row that make it unhealthy",
			bind: at(func(h *HealthCheck) *int { return &h.UnhealthyAfter })},
	)

	outlierDetectionBlock = newBlock(
		field{name: "consecutive_gateway_failures", kind: kindInt, lo: 0, hi: maxFailureRun, def: DefaultConsecutiveGatewayFailures,
			doc:  "gateway failures in a row that eject an endpoint; 0 is off",
			bind: at(func(o *OutlierDetection) *int { return &o.ConsecutiveGatewayFailures })},
		field{name: "consecutive_5xx", kind: kindInt, lo: 0, hi: maxFailureRun, def: DefaultConsecutive5xx,
			doc:  "5xx responses in a row that eject an endpoint; 0 is off",
			bind: at(func(o *OutlierDetection) *int { return &o.Consecutive5xx })},
		field{name: "base_ejection_time", kind: kindDuration, def: DefaultBaseEjectionTime, doc: "first ejection's length",
			bind: at(func(o *OutlierDetection) *time.Duration { return &o.BaseEjectionTime })},
		field{name: "max_ejection_time", kind: kindDuration, def: DefaultMaxEjectionTime, doc: "longest ejection; at least base_ejection_time",
			bind: at(func(o *OutlierDetection) *time.Duration { return &o.MaxEjectionTime })},
		field{name: "max_ejection_percent", kind: kindInt, lo: 0, hi: maxEjectionPercent, def: DefaultMaxEjectionPercent,
			doc:  "most of the endpoints ejected at once, in percent",
			bind: at(func(o *OutlierDetection) *int { return &o.MaxEjectionPercent })},
	)

	zonesBlock = newBlock(
		field{name: "local", kind: kindString, required: true, pattern: namePattern, doc: "the zone this levee runs in",
			missing: "required, the zone this levee runs in", empty: zoneProblem(""),
			check: checkZone, bind: at(func(z *Zones) *string { return &z.Local })},
		field{name: "failover", kind: kindList, maxItems: maxFailoverZones, item: &field{kind: kindString, pattern: namePattern}, doc: "other zones to fail over to, nearest first (at most 16)"},
		field{name: "overprovisioning", kind: kindNumber, flo: 1, fhi: maxOverprovisioning, def: DefaultOverprovisioning,
			doc:  "factor on a zone's healthy share before traffic spills over",
			bind: at(func(z *Zones) *float64 { return &z.Overprovisioning })},
	)

	upstreamBlock = newBlock(
		field{name: "balancer", kind: kindEnum, enum: balancers, def: DefaultBalancer, doc: "how an endpoint is picked",
			bind: at(func(u *Upstream) *string { return &u.Balancer })},
		field{name: "least_request", kind: kindBlock, sub: leastRequestBlock, doc: "options of balancer least_request"},
		field{name: "consistent_hash", kind: kindBlock, sub: consistentHashBlock, doc: "options of balancer consistent_hash; required with it"},
		field{name: "discovery", kind: kindBlock, sub: discoveryBlock, doc: "where endpoints come from besides the list: exactly one of file, etcd or push"},
		field{name: "endpoints", kind: kindList, minItems: 1, item: &field{kind: kindBlock, sub: endpointBlock},
			doc: "the endpoints; required unless discovery is set"},
		field{name: "timeouts", kind: kindBlock, sub: timeoutsBlock, doc: "upstream connection timeouts",
			bind: at(func(u *Upstream) *Timeouts { return &u.Timeouts })},
		field{name: "max_idle_conns_per_endpoint", kind: kindInt, lo: 1, hi: maxIdleConnsPerEndpointCap, def: DefaultMaxIdleConnsPerEndpoint,
			doc:  "idle connections kept per endpoint",
			bind: at(func(u *Upstream) *int { return &u.MaxIdleConnsPerEndpoint })},
		field{name: "retry", kind: kindBlock, sub: retryBlock, doc: "retries; none when omitted"},
		field{name: "limits", kind: kindBlock, sub: limitsBlock, doc: "concurrency limit and queue; none when omitted"},
		field{name: "health_check", kind: kindBlock, sub: healthCheckBlock, doc: "active health checks; none when omitted"},
		field{name: "outlier_detection", kind: kindBlock, sub: outlierDetectionBlock, doc: "passive ejection of failing endpoints; off when omitted"},
		field{name: "panic_threshold", kind: kindNumber, flo: 0, fhi: maxPanicThreshold, def: DefaultPanicThreshold,
			doc:  "percent of healthy endpoints below which all are used",
			bind: at(func(u *Upstream) *float64 { return &u.PanicThreshold })},
		field{name: "slow_start", kind: kindDuration, doc: "ramp of a new endpoint's share; none when omitted",
			bind: at(func(u *Upstream) *time.Duration { return &u.SlowStart })},
		field{name: "zones", kind: kindBlock, sub: zonesBlock, doc: "zone-aware routing; off when omitted"},
	)

	quotaBlock = newBlock(
		field{name: "requests", kind: kindInt, lo: 1, hi: maxQuotaRequests, required: true, doc: "requests allowed per period",
			bind: at(func(q *Quota) *int64 { return &q.Requests })},
		field{name: "per", kind: kindDuration, required: true, doc: "the period, from 1s to 8784h",
			check: checkQuotaPer, bind: at(func(q *Quota) *time.Duration { return &q.Per })},
	)

	anonymousLimitsBlock = newBlock(
		field{name: "rate", kind: kindNumber, flo: 0, fhi: maxRate, required: true, doc: "requests per second, sustained; greater than 0",
			check: checkRate, bind: at(func(a *AnonymousLimits) *float64 { return &a.Rate })},
		field{name: "burst", kind: kindInt, lo: 1, hi: maxBurst, doc: "requests at once above the rate; max(1, ceil(rate)) when omitted",
			bind: at(func(a *AnonymousLimits) *int { return &a.Burst })},
	)

	routeLimitBlock = newBlock(
		field{name: "rate", kind: kindNumber, flo: 0, fhi: maxRate, doc: "requests per second, sustained; greater than 0",
			check: checkRate, bind: at(func(l *RouteLimit) *float64 { return &l.Rate })},
		field{name: "burst", kind: kindInt, lo: 1, hi: maxBurst, doc: "requests at once above the rate; only with rate",
			bind: at(func(l *RouteLimit) *int { return &l.Burst })},
		field{name: "quota", kind: kindBlock, sub: quotaBlock, doc: "requests per period",
			bind: opt(func(l *RouteLimit) **Quota { return &l.Quota }, func() *Quota { return &Quota{} })},
	)

	appLimitsBlock = newBlock(
		field{name: "rate", kind: kindNumber, flo: 0, fhi: maxRate, doc: "requests per second, sustained; greater than 0",
			check: checkRate, bind: at(func(l *AppLimits) *float64 { return &l.Rate })},
		field{name: "burst", kind: kindInt, lo: 1, hi: maxBurst, doc: "requests at once above the rate; only with rate",
			bind: at(func(l *AppLimits) *int { return &l.Burst })},
		field{name: "quota", kind: kindBlock, sub: quotaBlock, doc: "requests per period",
			bind: opt(func(l *AppLimits) **Quota { return &l.Quota }, func() *Quota { return &Quota{} })},
		field{name: "max_concurrency", kind: kindInt, lo: 1, hi: maxAppConcurrency, doc: "requests in flight at once",
			bind: at(func(l *AppLimits) *int { return &l.MaxConcurrency })},
	)

	appBlock = newBlock(
		field{name: "id", kind: kindString, required: true, pattern: namePattern, doc: "the app's id, unique",
			check: checkName, bind: at(func(a *App) *string { return &a.ID })},
		field{name: "name", kind: kindString, doc: "display name; the id when omitted",
			check: problemOf(checkAppName), bind: at(func(a *App) *string { return &a.Name })},
		field{name: "status", kind: kindEnum, enum: appStatuses, def: DefaultAppStatus, doc: "a suspended app's keys are refused",
			bind: at(func(a *App) *string { return &a.Status })},
		field{name: "api_key_sha256", kind: kindList, maxItems: maxAppKeys, item: &field{kind: kindString, pattern: "^[0-9a-fA-F]{64}$"},
			doc: "SHA-256 of each API key, as hex; unique across apps", secret: true},
		field{name: "grants", kind: kindList, maxItems: maxAppGrants, item: &field{kind: kindString, pattern: namePattern}, doc: "the routes the app may call"},
		field{name: "limits", kind: kindBlock, sub: appLimitsBlock, doc: "the app's limits across its routes"},
		field{name: "route_limits", kind: kindMap, sub: routeLimitBlock, doc: "per route overrides; each key one of grants"},
	)

	matchBlock = newBlock(
		field{name: "host", kind: kindString, doc: `Host matched, exactly or as "*.example.com"; any when omitted`,
			check: checkMatchHost, bind: at(func(m *Match) *string { return &m.Host })},
		field{name: "path_prefix", kind: kindString, def: DefaultPathPrefix, doc: "path prefix matched, on segment boundaries",
			check: problemOf(checkPathPrefix), bind: at(func(m *Match) *string { return &m.PathPrefix })},
		field{name: "methods", kind: kindList, minItems: 1, item: &field{kind: kindString, pattern: tokenPattern}, doc: "methods matched; any when omitted"},
		field{name: "raw_path", kind: kindBool, doc: "match the path as sent rather than normalised",
			bind: at(func(m *Match) *bool { return &m.RawPath })},
	)

	routeBlock = newBlock(
		field{name: "name", kind: kindString, required: true, pattern: namePattern, doc: "the route's name, unique",
			check: checkName, bind: at(func(r *Route) *string { return &r.Name })},
		field{name: "match", kind: kindBlock, sub: matchBlock, doc: "the requests the route takes; every request when omitted"},
		field{name: "upstream", kind: kindString, pattern: namePattern, doc: "the upstream requests go to; required unless data is set",
			bind: at(func(r *Route) *string { return &r.Upstream })},
		field{name: "data", kind: kindBlock, sub: dataBlock, doc: "answer from a data source (a SQL query or a table) instead of an upstream"},
		field{name: "max_body_bytes", kind: kindSize, lo: 0, hi: maxSize, def: DefaultMaxBodyBytes, doc: "largest request body; 0 is no limit",
			bind: at(func(r *Route) *int64 { return &r.MaxBodyBytes })},
		field{name: "timeout", kind: kindDuration, doc: "deadline of the whole request; none when omitted",
			bind: at(func(r *Route) *time.Duration { return &r.Timeout })},
		field{name: "send_timeout", kind: kindDuration, doc: "longest wait for the client to accept each write of an answer; server.send_timeout (a data route: data.send_timeout) when omitted; 100ms to 1h",
			check: checkDurationWithin(minClientTimeout, maxClientTimeout), bind: at(func(r *Route) *time.Duration { return &r.SendTimeout })},
		field{name: "retry", kind: kindBlock, sub: retryBlock, omit: []string{"budget"}, doc: "overrides the upstream's retry"},
		field{name: "priority", kind: kindEnum, enum: priorities, def: DefaultPriority, doc: "which requests are shed first under pressure",
			bind: at(func(r *Route) *string { return &r.Priority })},
		field{name: "auth", kind: kindEnum, enum: authModes, def: DefaultRouteAuth, doc: "how callers are identified",
			bind: at(func(r *Route) *string { return &r.Auth })},
		field{name: "anonymous_limits", kind: kindBlock, sub: anonymousLimitsBlock, doc: "rate limit per client address, with auth: none"},
		field{name: "forward_trailers", kind: kindList, item: &field{kind: kindString}, doc: "trailers passed through"},
		field{name: "upgrades", kind: kindList, item: &field{kind: kindString}, doc: `protocols a request may upgrade to; ["websocket"] when omitted`},
	)

	rootBlock = newBlock(
		field{name: "listen", kind: kindString, required: true, doc: "host:port of the data-plane listener", reload: restart,
			check: checkListen, bind: at(func(c *Config) *string { return &c.Listen })},
		field{name: "tls", kind: kindBlock, sub: tlsBlock, doc: "serve HTTPS (and HTTP/2) on listen; plain HTTP when omitted", reload: restartOnOff,
			bind: opt(func(c *Config) **TLS { return &c.TLS }, func() *TLS { return &TLS{} })},
		field{name: "admin", kind: kindBlock, sub: adminBlock, required: true, doc: "the admin API"},
		field{name: "state_dir", kind: kindString, nonEmpty: true, def: DefaultStateDir, doc: "directory of the app store and snapshots",
			empty: "must not be empty (omit it for the default " + strconv.Quote(DefaultStateDir) + ")",
			bind:  at(func(c *Config) *string { return &c.StateDir })},
		field{name: "server", kind: kindBlock, sub: serverBlock, doc: "the client-facing server",
			bind: at(func(c *Config) *Server { return &c.Server })},
		field{name: "memory", kind: kindBlock, sub: memoryBlock, doc: "memory budget and load shedding; off when omitted", reload: restart},
		field{name: "cluster", kind: kindBlock, sub: clusterBlock, doc: "cluster mode: limits shared with other nodes; a single node when omitted", reload: restart,
			bind: opt(func(c *Config) **Cluster { return &c.Cluster }, func() *Cluster { return &Cluster{} })},
		field{name: "log", kind: kindBlock, sub: logBlock, doc: "logging"},
		field{name: "metrics", kind: kindBlock, sub: metricsBlock, doc: "metrics",
			bind: at(func(c *Config) *Metrics { return &c.Metrics })},
		field{name: "profiles", kind: kindBlock, sub: profilesBlock, doc: "CPU profiles levee captures by itself when busy or shedding",
			bind: at(func(c *Config) *Profiles { return &c.Profiles })},
		field{name: "tracing", kind: kindBlock, sub: tracingBlock, doc: "OpenTelemetry tracing exported over OTLP/HTTP; off when omitted",
			bind: opt(func(c *Config) **Tracing { return &c.Tracing }, defaultTracing)},
		field{name: "upstreams", kind: kindMap, sub: upstreamBlock, minItems: 1, doc: "upstreams by name; required unless data_sources is set"},
		field{name: "data_sources", kind: kindMap, sub: dataSourceBlock, minItems: 1, doc: "databases data routes query, by name"},
		field{name: "routes", kind: kindList, required: true, minItems: 1, item: &field{kind: kindBlock, sub: routeBlock},
			doc: "routes; the most specific match wins"},
		field{name: "apps", kind: kindList, maxItems: maxApps, item: &field{kind: kindBlock, sub: appBlock},
			doc: "API consumers, their keys, grants and limits"},
	)
)

// withDefaults sets each field of v that block b binds and gives a
// default (def) to that default, and returns v: the default* constructors
// take their values from the tables this way, so a default is written
// once, in its field's entry. Sub-blocks are not entered (a bind may
// allocate an optional one); their constructors call withDefaults in
// turn. Values that are not one table default (lists such as retry's on,
// limits that depend on max_concurrency) are set by the constructor.
func withDefaults[T any](b *block, v *T) *T {
	for i := range b.fields {
		f := &b.fields[i]
		if f.bind == nil || f.def == nil || f.kind == kindBlock || f.kind == kindMap {
			continue
		}
		reflect.ValueOf(f.bind(v)).Elem().Set(reflect.ValueOf(f.def))
	}
	return v
}
