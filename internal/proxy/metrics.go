package proxy

import (
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the request path's Prometheus series. Build one per process
// with NewMetrics; every Table built with it shares the series.
type Metrics struct {
	requests         *prometheus.CounterVec   // route, upstream, code
	refusals         *prometheus.CounterVec   // route, reason
	duration         *prometheus.HistogramVec // route
	upstreamDuration *prometheus.HistogramVec // upstream
	inflight         prometheus.Gauge
	retries          *prometheus.CounterVec // upstream, reason
	budgetExhausted  *prometheus.CounterVec // upstream
	pickerFallbacks  *prometheus.CounterVec // upstream
	shedTotal        *prometheus.CounterVec // route, reason
	bytesIn          *prometheus.CounterVec // route
	bytesOut         *prometheus.CounterVec // route
	preflights       *prometheus.CounterVec // route, result (cors.go)
	compressed       *prometheus.CounterVec // route, encoding
	compressedIn     *prometheus.CounterVec // route
	drainClosed      *prometheus.CounterVec // reason (drain.go)
	quotaUsed        *prometheus.CounterVec // kind (rows, bytes): usage.go
	quotaCut         prometheus.Counter     // answers cut at a row or byte quota
	quotaRows        prometheus.Counter     // quotaUsed's rows, resolved once
	quotaBytes       prometheus.Counter     // quotaUsed's bytes, resolved once
	splitRequests    *prometheus.CounterVec // route, upstream (split.go)
	// answered and ownErrors count every answer and the 502/503/504
	// refusals levee made itself (sheds excepted): the health the
	// rollback watcher samples (HealthCounts).
	answered, ownErrors atomic.Uint64
	mirrors             *prometheus.CounterVec // route, result (mirror.go)
	routeCache          routeMetricsCache      // the latest table's routeMetrics (routecache.go)
}

// HealthCounts returns the answers counted since the process started and,
// among them, levee's own 502, 503 and 504 refusals (not an upstream's own
// 5xx passed on, not admission's sheds, which follow load rather than a
// change).
func (m *Metrics) HealthCounts() (answered, ownErrors uint64) {
	return m.answered.Load(), m.ownErrors.Load()
}

// ownErrorReason marks the rows of reasonTable whose refusals count in
// HealthCounts' ownErrors, read-only.
var ownErrorReason = func() (out [len(reasonTable)]bool) {
	for i, s := range reasonTable {
		out[i] = !s.Shed && (s.Status == 502 || s.Status == 503 || s.Status == 504)
	}
	return out
}()

// NewMetrics declares the request path's metrics in reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_requests_total",
			Help: "Requests answered, by route, upstream and status code. route and upstream are empty when no route matched; code 499 means the client went away first.",
		}, []string{"route", "upstream", "code"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_refusals_total",
			Help: "Answers levee wrote itself instead of an upstream's, by route and stable reason.",
		}, []string{"route", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "levee_request_duration_seconds",
			Help:    "Time from receiving a request's headers to the end of its response, by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		upstreamDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "levee_upstream_request_duration_seconds",
			Help:    "Time from sending a request to an upstream endpoint to the end of its response body, by upstream.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"upstream"}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "levee_inflight_requests",
			Help: "Requests currently being served on the data listener.",
		}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_retries_total",
			Help: "Retries levee sent to an upstream, by why the previous attempt failed (connect_failure, reset_before_response, timeout, the upstream's status code, or grpc_<status> for a gRPC status).",
		}, []string{"upstream", "reason"}),
		budgetExhausted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "levee_retry_budget_exhausted_total",
			Help: "Retries not sent because the upstream's retry budget was spent; the failure went to the client as is.",
		}, []string{"upstream"}),
	}
	m.pickerFallbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_picker_fallbacks_total",
		Help: "Picks where the upstream's balancer panicked or returned an invalid endpoint and a uniform pick over its endpoint set was used instead.",
	}, []string{"upstream"})
	m.shedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_shed_total",
		Help: shedHelp(),
	}, []string{"route", "reason"})
	m.bytesIn = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_request_bytes_total",
		Help: "Request body bytes levee read from clients, by route.",
	}, []string{"route"})
	m.bytesOut = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_response_bytes_total",
		Help: "Response body bytes levee wrote to clients (upstreams' answers and levee's own refusals), by route.",
	}, []string{"route"})
	m.preflights = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_cors_preflights_total",
		Help: "CORS preflights levee answered itself, by route and result: allowed (with the Access-Control-Allow-* headers) or refused (without them, or over the per-address cap).",
	}, []string{"route", "result"})
	m.compressed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_compressed_responses_total",
		Help: "Answers levee compressed (a route's compression), by route and coding (zstd, br, gzip).",
	}, []string{"route", "encoding"})
	m.compressedIn = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_compressed_input_bytes_total",
		Help: "Body bytes of the answers levee compressed, before coding, by route (levee_response_bytes_total counts them after).",
	}, []string{"route"})
	m.drainClosed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_drain_closed_total",
		Help: "Long connections (WebSocket and other tunnels, streamed answers) levee closed itself, by reason: drain_timeout (the configuration they started on was replaced longer than server.drain_timeout ago) or shutdown.",
	}, []string{"reason"})
	for _, r := range []DrainReason{DrainTimeout, DrainShutdown} {
		m.drainClosed.WithLabelValues(string(r))
	}
	m.quotaUsed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_quota_used_total",
		Help: "Rows and bytes of answers charged to apps' row and byte quotas as they streamed, by kind (rows, bytes).",
	}, []string{"kind"})
	m.quotaRows, m.quotaBytes = m.quotaUsed.WithLabelValues("rows"), m.quotaUsed.WithLabelValues("bytes")
	m.quotaCut = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "levee_quota_truncated_total",
		Help: "Answers cut short because they crossed an app's row or byte quota (quota_exhausted).",
	})
	m.splitRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_route_split_requests_total",
		Help: "Requests a route's split sent to each side, by route and the side's upstream (after a down side's share went to the others).",
	}, []string{"route", "upstream"})
	m.mirrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_mirror_requests_total",
		Help: "Copies of a route's requests for its mirror's shadow upstream, by route and result: sent (the shadow answered), failed (no answer), skipped_cap, skipped_memory or skipped_body (not sent).",
	}, []string{"route", "result"})
	// The refusals made outside the handler, by the data listener, exist
	// from the start at 0 (route "": before any route is known).
	for _, r := range []Reason{ReasonConnectionLimit, ReasonHeaderTooLarge} {
		m.refusals.WithLabelValues("", string(r))
	}
	for _, c := range []prometheus.Collector{m.requests, m.refusals, m.duration, m.upstreamDuration, m.inflight, m.retries, m.budgetExhausted, m.pickerFallbacks, m.shedTotal, m.bytesIn, m.bytesOut, m.preflights, m.compressed, m.compressedIn, m.drainClosed, m.quotaUsed, m.quotaCut, m.splitRequests, m.mirrors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// ForgetRoute deletes every series labelled with route. The gateway calls
// it when a table without the route replaces one with it, so that routes
// created and deleted at runtime (data APIs, under new names each time)
// do not add series for the life of the process. Requests of the old table
// still in flight count into children no longer exported; a route added
// again starts from 0, which Prometheus reads as a counter reset.
func (m *Metrics) ForgetRoute(route string) {
	m.forgetRouteMetrics(route)
	l := prometheus.Labels{"route": route}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.requests, m.refusals, m.duration, m.shedTotal, m.bytesIn, m.bytesOut, m.preflights, m.compressed, m.compressedIn, m.splitRequests, m.mirrors} {
		v.DeletePartialMatch(l)
	}
}

// ForgetUpstream deletes the series labelled with upstream, as ForgetRoute
// does for a route (levee_requests_total's go with their routes).
func (m *Metrics) ForgetUpstream(upstream string) {
	l := prometheus.Labels{"upstream": upstream}
	for _, v := range []interface{ DeletePartialMatch(prometheus.Labels) int }{m.upstreamDuration, m.retries, m.budgetExhausted, m.pickerFallbacks} {
		v.DeletePartialMatch(l)
	}
}

// routeMetrics are one route's series, resolved once so that the request
// path does no label lookups: counters per status code are resolved on first
// use and cached in an array indexed by code.
type routeMetrics struct {
	m        *Metrics
	route    string
	upstream string
	duration prometheus.Observer
	// bytesIn and bytesOut are the route's body bytes read and written,
	// resolved once (so they exist from the start at 0).
	bytesIn, bytesOut prometheus.Counter
	codes             [600]atomic.Pointer[prometheus.Counter] // index 0 holds codes outside 100..599
	// refusals and sheds per reason, resolved on first use; indexed by
	// reasonIndex (the last slot is for reasons outside reasonTable, which
	// are resolved on every use).
	refusals, sheds [len(reasonTable) + 1]atomic.Pointer[prometheus.Counter]
}

// reasonIndex maps each reason of reasonTable to its slot in a route's
// cached counters, read-only.
var reasonIndex = func() map[Reason]int {
	m := make(map[Reason]int, len(reasonTable))
	for i, s := range reasonTable {
		m[s.Reason] = i
	}
	return m
}()

// shedHelp is levee_shed_total's help, naming the reasons it counts.
func shedHelp() string {
	var names []string
	for _, s := range reasonTable {
		if s.Shed {
			names = append(names, string(s.Reason))
		}
	}
	return "Requests shed by admission control before reaching an upstream, by route and reason (" + strings.Join(names, ", ") + ")."
}

// cached returns the counter of vec for (route, reason) from slots,
// resolving and caching it on first use.
func cached(slots *[len(reasonTable) + 1]atomic.Pointer[prometheus.Counter], vec *prometheus.CounterVec, route string, reason Reason) prometheus.Counter {
	i, ok := reasonIndex[reason]
	if !ok {
		return vec.WithLabelValues(route, string(reason))
	}
	if c := slots[i].Load(); c != nil {
		return *c
	}
	c := vec.WithLabelValues(route, string(reason))
	slots[i].Store(&c)
	return c
}

func newRouteMetrics(m *Metrics, route, upstream string) *routeMetrics {
	rm := &routeMetrics{m: m, route: route, upstream: upstream, duration: m.duration.WithLabelValues(route),
		bytesIn: m.bytesIn.WithLabelValues(route), bytesOut: m.bytesOut.WithLabelValues(route)}
	// The shed reasons' series exist from the start at 0 (refusals and
	// sheds), so that a rule's rate() or increase() sees a route's first
	// shed request (a series born at 1 shows no increase). Bounded: routes
	// × the shed rows of reasonTable (none for the no-route route "", which
	// sheds nothing).
	if route != "" {
		for _, code := range preDeclaredCodes {
			rm.code(code)
		}
	}
	for _, s := range reasonTable {
		if s.Shed && route != "" {
			cached(&rm.refusals, m.refusals, route, s.Reason)
			cached(&rm.sheds, m.shedTotal, route, s.Reason)
		}
	}
	return rm
}

func (rm *routeMetrics) count(code int) {
	rm.m.answered.Add(1)
	rm.code(code).Inc()
}

// code returns the route's counter of status code, resolving and caching
// it on first use.
func (rm *routeMetrics) code(code int) prometheus.Counter {
	i := code
	if i < 100 || i >= len(rm.codes) {
		i = 0
	}
	c := rm.codes[i].Load()
	if c == nil {
		label := "other"
		if i != 0 {
			label = strconv.Itoa(i)
		}
		counter := rm.m.requests.WithLabelValues(rm.route, rm.upstream, label)
		c = &counter
		rm.codes[i].Store(c)
	}
	return *c
}

// preDeclaredCodes are the status codes each route's levee_requests_total
// has from the start at 0, so that the error-rate alert's rate() sees a
// route's first 5xx: success, and the 5xx answers levee itself gives or
// most often passes on. (Not all 500 codes: that would be 500 series a
// route; the others appear on first use.)
var preDeclaredCodes = []int{200, 500, 502, 503, 504}

// bytes counts a request's body bytes read and written (no allocation:
// the counters are resolved once per route).
func (rm *routeMetrics) bytes(in, out int64) {
	if in > 0 {
		rm.bytesIn.Add(float64(in))
	}
	if out > 0 {
		rm.bytesOut.Add(float64(out))
	}
}

func (rm *routeMetrics) shed(reason Reason) {
	cached(&rm.sheds, rm.m.shedTotal, rm.route, reason).Inc()
}

func (rm *routeMetrics) refused(reason Reason) {
	if i, ok := reasonIndex[reason]; ok && ownErrorReason[i] {
		rm.m.ownErrors.Add(1)
	}
	cached(&rm.refusals, rm.m.refusals, rm.route, reason).Inc()
}

// CountRefusal counts a refusal made outside the handler (for example by a
// listener cap) under route and reason.
func (m *Metrics) CountRefusal(route string, reason Reason) {
	m.refusals.WithLabelValues(route, string(reason)).Inc()
}

// retried counts one retry of an attempt that failed with fail, or, when
// fail is empty, with the upstream's status.
func (m *Metrics) retried(upstream string, fail failure, status int) {
	reason := string(fail)
	if reason == "" {
		reason = strconv.Itoa(status)
	}
	m.retries.WithLabelValues(upstream, reason).Inc()
}

// PickerFallback returns the function that counts a picker fallback of
// upstream (for balance.Guarded).
func (m *Metrics) PickerFallback(upstream string) func() {
	c := m.pickerFallbacks.WithLabelValues(upstream)
	return c.Inc
}
