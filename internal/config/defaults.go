package config

import (
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/limits"
)

// Defaults applied to omitted or null fields. Each is named by its field's
// table entry (def); the default* constructors below take the table's
// values (withDefaults) and set by hand only what is not one field's
// default (lists, limits that depend on max_concurrency). The parser
// starts from those constructors and overwrites what the file sets.
const (
	// DefaultStateDir is Config.StateDir when `state_dir` is omitted.
	DefaultStateDir = "./levee-state"
	// DefaultAdminToken is Admin.Token when `admin.token` is omitted.
	DefaultAdminToken = AdminTokenGenerate
	// DefaultMaxHeaderBytes is Server.MaxHeaderBytes when omitted: 64KiB.
	DefaultMaxHeaderBytes int64 = 64 << 10
	// DefaultReadHeaderTimeout is Server.ReadHeaderTimeout when omitted.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout is Server.IdleTimeout when omitted.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultShutdownTimeout is Server.ShutdownTimeout when omitted.
	DefaultShutdownTimeout = 15 * time.Second
	// DefaultMaxConnections is Server.MaxConnections when omitted: 0,
	// unlimited.
	DefaultMaxConnections = 0
	// DefaultMaxConnectionsPerIP is Server.MaxConnectionsPerIP when
	// omitted: 0, unlimited.
	DefaultMaxConnectionsPerIP = 0
	// DefaultHTTP2MaxConcurrentStreams is Server.HTTP2MaxConcurrentStreams
	// when omitted.
	DefaultHTTP2MaxConcurrentStreams = 250
	// DefaultEscapedSlashes is ServerPaths.EscapedSlashes when omitted.
	DefaultEscapedSlashes = EscapedSlashesReject
	// DefaultUnderscoresInHeaders is Server.UnderscoresInHeaders when
	// omitted.
	DefaultUnderscoresInHeaders = UnderscoresDrop
	// DefaultBodyTimeout is Server.BodyTimeout when omitted.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultSendTimeout is Server.SendTimeout when omitted.
	DefaultSendTimeout = 60 * time.Second
	// DefaultAnswerBuffer is Server.AnswerBuffer when omitted.
	DefaultAnswerBuffer = 1 << 20
	// DefaultMemorySoftWatermark is Memory.SoftWatermark when omitted.
	DefaultMemorySoftWatermark = 0.8
	// DefaultMemoryHardWatermark is Memory.HardWatermark when omitted.
	DefaultMemoryHardWatermark = 0.9
	// DefaultLogLevel is Log.Level when omitted.
	DefaultLogLevel = "info"
	// DefaultLogAccess is Log.Access when omitted.
	DefaultLogAccess = true
	// DefaultAccessLogOutput is AccessLog.Output when omitted.
	DefaultAccessLogOutput = "stderr"
	// DefaultAccessLogSample2xx is AccessLog.Sample2xx when omitted.
	DefaultAccessLogSample2xx = 1.0
	// DefaultMetricsAppLabels is Metrics.AppLabels when omitted.
	DefaultMetricsAppLabels = 50
	// DefaultMetricsEndpointLabels is Metrics.EndpointLabels when omitted.
	DefaultMetricsEndpointLabels = 50
	// DefaultBalancer is Upstream.Balancer when omitted.
	DefaultBalancer = BalancerWeightedRoundRobin
	// DefaultLeastRequestEWMA is LeastRequest.EWMA when omitted: in-flight
	// requests only.
	DefaultLeastRequestEWMA = false
	// DefaultLeastRequestTau is LeastRequest.Tau when omitted.
	DefaultLeastRequestTau = 10 * time.Second
	// DefaultDiscoveryMaxDropFraction is Discovery.MaxDropFraction when
	// omitted.
	DefaultDiscoveryMaxDropFraction = 0.5
	// DefaultDiscoveryConfirmAfter is Discovery.ConfirmAfter when omitted.
	DefaultDiscoveryConfirmAfter = 30 * time.Second
	// DefaultDiscoveryMaxWeight is Discovery.MaxWeight when omitted: the
	// same cap as a static endpoint's weight.
	DefaultDiscoveryMaxWeight uint32 = endpoint.MaxWeight
	// DefaultEtcdDialTimeout is EtcdDiscovery.DialTimeout when omitted.
	DefaultEtcdDialTimeout = 2 * time.Second
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
	// DefaultPathPrefix is Match.PathPrefix when omitted: every path.
	DefaultPathPrefix = "/"
	// DefaultMaxBodyBytes is Route.MaxBodyBytes when omitted: 0, no limit.
	DefaultMaxBodyBytes int64 = 0
	// DefaultRouteTimeout is Route.Timeout when omitted: 0, no deadline.
	DefaultRouteTimeout time.Duration = 0
	// DefaultPriority is Route.Priority when omitted.
	DefaultPriority = PriorityNormal
	// DefaultRouteAuth is Route.Auth when omitted: anyone may call.
	DefaultRouteAuth = AuthNone
	// DefaultAppStatus is App.Status when omitted.
	DefaultAppStatus = AppStatusActive

	// The Limits defaults apply to the fields of a `limits` block that
	// are omitted; without a block there is no limit (Upstream.Limits
	// nil). max_concurrency has no default. A static limit's MaxQueue
	// defaults to twice MaxConcurrency.

	// DefaultLimitsAdaptiveMin is Limits.Min when omitted with an
	// adaptive limit.
	DefaultLimitsAdaptiveMin = 4
	// DefaultLimitsAdaptiveMax is Limits.Max when omitted with an
	// adaptive limit.
	DefaultLimitsAdaptiveMax = 1000
	// DefaultLimitsAdaptiveMaxQueue is Limits.MaxQueue when omitted with
	// an adaptive limit.
	DefaultLimitsAdaptiveMaxQueue = 256
	// DefaultLimitsQueueTimeout is Limits.QueueTimeout when omitted.
	DefaultLimitsQueueTimeout = 50 * time.Millisecond
	// DefaultLimitsMaxPerConsumer is Limits.MaxPerConsumer when omitted:
	// 0, automatic (half the limit, at least 1).
	DefaultLimitsMaxPerConsumer = 0

	// The Retry defaults apply to the fields of a `retry` block that are
	// omitted; without a block there are no retries (Upstream.Retry nil).

	// DefaultRetryAttempts is Retry.Attempts when omitted: the first try
	// and two retries.
	DefaultRetryAttempts = 3
	// DefaultRetryPerTryTimeout is Retry.PerTryTimeout when omitted: 0,
	// none.
	DefaultRetryPerTryTimeout time.Duration = 0
	// DefaultRetryBackoffBase is Backoff.Base when omitted.
	DefaultRetryBackoffBase = 25 * time.Millisecond
	// DefaultRetryBackoffMax is Backoff.Max when omitted.
	DefaultRetryBackoffMax = 250 * time.Millisecond
	// DefaultRetryBudgetRatio is RetryBudget.Ratio when omitted.
	DefaultRetryBudgetRatio = 0.2
	// DefaultRetryBudgetMinPerSecond is RetryBudget.MinPerSecond when
	// omitted.
	DefaultRetryBudgetMinPerSecond = 5.0
	// DefaultRetryReplayBodyLimit is Retry.ReplayBodyLimit when omitted:
	// 64KiB.
	DefaultRetryReplayBodyLimit int64 = 64 << 10

	// DefaultPanicThreshold is Upstream.PanicThreshold when omitted, in
	// percent.
	DefaultPanicThreshold = 50.0
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

func defaultHealthCheck() *HealthCheck { return withDefaults(healthCheckBlock, &HealthCheck{}) }

func defaultHTTPCheck() *HTTPCheck {
	return withDefaults(httpCheckBlock, &HTTPCheck{Expect: DefaultHealthCheckExpect()})
}

func defaultOutlierDetection() *OutlierDetection {
	return withDefaults(outlierDetectionBlock, &OutlierDetection{})
}

func defaultZones() *Zones { return withDefaults(zonesBlock, &Zones{}) }

// DefaultRetryOn returns RetryOn when `on` is omitted: connect_failure,
// refused_stream, reset_before_response, 502, 503 and 504. Each call
// returns a new value.
func DefaultRetryOn() RetryOn {
	return RetryOn{
		ConnectFailure:      true,
		RefusedStream:       true,
		ResetBeforeResponse: true,
		Statuses:            []int{502, 503, 504},
	}
}

// Bounds that validation enforces.
const (
	minMaxHeaderBytes          = 1 << 10
	maxMaxHeaderBytes          = 16 << 20
	maxWeight                  = endpoint.MaxWeight
	maxIdleConnsPerEndpointCap = 100000
	maxMaxConnections          = 1<<31 - 1 // fits an int on every platform
	maxNameLen                 = limits.MaxIDLen
	minRetryAttempts           = 1
	maxRetryAttempts           = 10
	minRetryStatus             = 400
	maxRetryStatus             = 599
	maxReplayBodyLimit         = 16 << 20
	maxRetryBudgetRatio        = 1.0
	maxRetryMinPerSecond       = 1e6
	maxDropFraction            = 1.0
	minDiscoveryMaxWeight      = 1
	maxDiscoveryMaxWeight      = 1000000
	maxEtcdEndpoints           = 16
	maxHashOnNameLen           = 128
	minHTTP2Streams            = 1
	maxHTTP2Streams            = 10000
	minMemoryLimit             = 64 << 20
	maxMemoryLimit             = 1 << 40
	maxConcurrencyCap          = 100000
	maxQueueCap                = 1000000
	// An app's bounds are package limits', which the store and the rate
	// limiter apply too, so that validate refuses what run would.
	maxApps           = limits.MaxApps
	maxAppKeys        = limits.MaxKeys
	maxAppGrants      = limits.MaxGrants
	maxAppConcurrency = limits.MaxConcurrency
	maxRate           = limits.MaxRate
	maxBurst          = limits.MaxBurst
	maxQuotaRequests  = limits.MaxQuotaRequests
	minQuotaPer       = limits.MinQuotaPer
	maxQuotaPer       = limits.MaxQuotaPer

	// maxFileBytes, maxDepth and maxErrors bound the work Parse does on
	// hostile input.
	maxFileBytes = 4 << 20
	maxDepth     = 64
	maxErrors    = 1000
)

// logLevels are the accepted values of Log.Level, lowest first.
var logLevels = []string{"debug", "info", "warn", "error"}

// The accepted values of Upstream.Balancer.
const (
	BalancerWeightedRoundRobin = "weighted_round_robin"
	BalancerLeastRequest       = "least_request"
	BalancerConsistentHash     = "consistent_hash"
)

// balancers are the accepted values of Upstream.Balancer.
var balancers = []string{BalancerWeightedRoundRobin, BalancerLeastRequest, BalancerConsistentHash}

// hashOnForms are the forms of ConsistentHash.HashOn, as error messages
// list them.
const hashOnForms = `"header:NAME", "cookie:NAME", "query:NAME", "client_ip" or "path"`

// escapedSlashesModes are the accepted values of
// ServerPaths.EscapedSlashes.
var escapedSlashesModes = []string{EscapedSlashesReject, EscapedSlashesKeep, EscapedSlashesDecode}

// priorities are the accepted values of Route.Priority.
var priorities = []string{PriorityCritical, PriorityNormal, PrioritySheddable}

// adaptiveLimit is the string value of `max_concurrency` that asks for an
// adaptive limit.
const adaptiveLimit = "adaptive"

// Retry condition names, as written in `on`.
const (
	condConnectFailure      = "connect_failure"
	condRefusedStream       = "refused_stream"
	condResetBeforeResponse = "reset_before_response"
)

// retryConditions are the condition names `on` accepts besides status
// codes.
var retryConditions = []string{condConnectFailure, condRefusedStream, condResetBeforeResponse}

// The tracing block's defaults (Tracing, tracing.go).
const (
	DefaultTracingSampling    = 0.01
	DefaultTracingServiceName = "levee"
	DefaultTracingTimeout     = 10 * time.Second
	DefaultTracingMaxQueue    = 2048
)

// Data sources and data routes (data.go).
const (
	// DefaultDataMaxConns is DataSource.MaxConns when omitted.
	DefaultDataMaxConns = 8
	// DefaultDataStatementTimeout is DataSource.StatementTimeout when omitted.
	DefaultDataStatementTimeout = 2 * time.Second
	// DefaultDataConnectTimeout is DataSource.ConnectTimeout when omitted.
	DefaultDataConnectTimeout = 2 * time.Second
	// The profiles block's defaults (Profiles).
	DefaultProfilesEnabled      = true
	DefaultProfilesCPUThreshold = 0.9
	DefaultProfilesSustain      = 10 * time.Second
	DefaultProfilesOnShedding   = true
	DefaultProfilesInterval     = 10 * time.Minute
	DefaultProfilesDuration     = 10 * time.Second
	DefaultProfilesKeep         = 10
	DefaultProfilesMaxBytes     = 64 << 20
	// DefaultDataQueuePerConn times max_conns is a data source's queue
	// without a limits block: a few rounds of the pool, past which a
	// refusal now is worth more than a long wait.
	DefaultDataQueuePerConn = 4
	// DefaultDataQueueTimeout is a data source's limits.queue_timeout when
	// omitted (an upstream's is DefaultLimitsQueueTimeout, 50ms). A slot
	// frees only when a query ends, and queries hold a connection for tens
	// to hundreds of milliseconds: a consumer whose turn is next would
	// otherwise be refused while it waits for the slot it is owed. A
	// consumer that floods the queue waits only the short wait of
	// controlled delay (1ms), so the longer timeout is the well-behaved
	// consumers' alone.
	DefaultDataQueueTimeout = 500 * time.Millisecond
	// DefaultDataMaxRows is RouteData.MaxRows when omitted.
	DefaultDataMaxRows = 10000
	// DefaultDataMaxBytes is RouteData.MaxBytes when omitted (8 MiB).
	DefaultDataMaxBytes = 8 << 20
	// DefaultDataSendTimeout is RouteData.SendTimeout when omitted.
	DefaultDataSendTimeout = 10 * time.Second
	// DefaultDataPageSize is DataPage.Default when omitted.
	DefaultDataPageSize = 100
	// DefaultDataPageMax is DataPage.Max when omitted.
	DefaultDataPageMax = 1000
)

func defaultConfig() *Config {
	c := withDefaults(rootBlock, &Config{})
	withDefaults(adminBlock, &c.Admin)
	withDefaults(serverBlock, &c.Server)
	withDefaults(serverPathsBlock, &c.Server.Paths)
	withDefaults(logBlock, &c.Log)
	c.Log.Access, c.Log.AccessLog = DefaultLogAccess, defaultAccessLog() // access is true, false or a block: no bind
	withDefaults(metricsBlock, &c.Metrics)
	withDefaults(profilesBlock, &c.Profiles)
	return c
}

func defaultUpstream(name string) *Upstream {
	u := withDefaults(upstreamBlock, &Upstream{Name: name})
	withDefaults(timeoutsBlock, &u.Timeouts)
	return u
}

func defaultLeastRequest() *LeastRequest { return withDefaults(leastRequestBlock, &LeastRequest{}) }

func defaultDiscovery() *Discovery { return withDefaults(discoveryBlock, &Discovery{}) }

func defaultEtcdDiscovery() *EtcdDiscovery { return withDefaults(etcdBlock, &EtcdDiscovery{}) }

func defaultEndpoint() Endpoint { return *withDefaults(endpointBlock, &Endpoint{}) }

func defaultRoute() Route {
	r := withDefaults(routeBlock, &Route{Timeout: DefaultRouteTimeout, Upgrades: DefaultUpgrades()})
	withDefaults(matchBlock, &r.Match)
	return *r
}

// DefaultUpgrades is Route.Upgrades when omitted: WebSocket only. A new
// slice each call.
func DefaultUpgrades() []string { return []string{"websocket"} }

func defaultMemory() *Memory { return withDefaults(memoryBlock, &Memory{}) }

// defaultLimits returns the Limits of a `limits` block that sets nothing
// but max_concurrency: a static limit of n, or an adaptive one when
// adaptive.
func defaultLimits(n int, adaptive bool) *Limits {
	l := withDefaults(limitsBlock, &Limits{MaxConcurrency: n, MaxQueue: 2 * n})
	if adaptive {
		l.MaxConcurrency = 0
		l.Adaptive = true
		l.Min, l.Max = DefaultLimitsAdaptiveMin, DefaultLimitsAdaptiveMax
		l.MaxQueue = DefaultLimitsAdaptiveMaxQueue
	}
	return l
}

// defaultRetry returns the Retry of a `retry` block that sets nothing. A
// route's Retry leaves Budget zero.
func defaultRetry(route bool) *Retry {
	r := withDefaults(retryBlock, &Retry{On: DefaultRetryOn(), PerTryTimeout: DefaultRetryPerTryTimeout})
	withDefaults(backoffBlock, &r.Backoff)
	if !route {
		r.Budget = defaultRetryBudget()
	}
	return r
}

func defaultRetryBudget() RetryBudget { return *withDefaults(retryBudgetBlock, &RetryBudget{}) }
