package drill

import (
	"context"
	"fmt"
	"math"
	"time"
)

// cpuSeconds reads levee's process_cpu_seconds_total.
func (e *env) cpuSeconds(ctx context.Context) float64 {
	v, _ := e.metric(ctx, "process_cpu_seconds_total")
	return v
}

// zeroWeight: the first outage's poisoned registry record.
func zeroWeight(ctx context.Context, e *env, r *Result) error {
	var bs [3]*backend
	for i := range bs {
		b, err := e.backend()
		if err != nil {
			return err
		}
		bs[i] = b
	}
	key, err := e.app(ctx, "client", "")
	if err != nil {
		return err
	}
	up := `levee_discovery_rejected_total`
	label := `upstream="` + e.o.Upstream + `"`
	rejectedBefore, _ := e.metric(ctx, up, label)

	// Phase 1: two good records, for the CPU-per-request baseline.
	e.pushed = true
	if _, err := e.push(ctx, fmt.Sprintf(`[{"address":%q,"weight":1},{"address":%q,"weight":"1"}]`, bs[0].addr, bs[1].addr)); err != nil {
		return err
	}
	half := e.o.Duration / 2
	// A quarter of the rate cap: the drill upstream's concurrency limit
	// (there for the overload drill) must not be what is measured here.
	rate := e.o.Rate / 4
	cpu0 := e.cpuSeconds(ctx)
	base := e.drive(ctx, key, rate, half, nil)
	cpu1 := e.cpuSeconds(ctx)

	// Phase 2: the same two beside the poison.
	p, err := e.push(ctx, fmt.Sprintf(`[{"address":%q,"weight":1},{"address":%q,"weight":"1"},`+
		`{"address":%q,"weight":"0"},{"address":"127.0.0.1:9","weight":"abc"},`+
		`{"address":"127.0.0.1:10","weight":"NaN"},{"address":"127.0.0.1:11","weight":1e309}]`,
		bs[0].addr, bs[1].addr, bs[2].addr))
	if err != nil {
		return err
	}
	hits := [3]int64{bs[0].hits.Load(), bs[1].hits.Load(), bs[2].hits.Load()}
	cpu2 := e.cpuSeconds(ctx)
	poisoned := e.drive(ctx, key, rate, half, nil)
	cpu3 := e.cpuSeconds(ctx)
	u, err := e.upstream(ctx)
	if err != nil {
		return err
	}
	rejectedAfter, _ := e.metric(ctx, up, label)

	reasons := map[string]string{}
	for _, x := range p.Rejected {
		reasons[x.Key] = x.Reason
	}
	drained := false
	for _, ep := range u.Endpoints {
		if ep.Address == bs[2].addr {
			drained = ep.State == "drained"
		}
	}
	quarantined := 0
	if u.Discovery != nil {
		quarantined = u.Discovery.QuarantinedTotal
	}
	served := [3]int64{bs[0].hits.Load() - hits[0], bs[1].hits.Load() - hits[1], bs[2].hits.Load() - hits[2]}
	perReq := func(c0, c1 float64, t *tally) float64 {
		if t.sent == 0 {
			return 0
		}
		return (c1 - c0) / float64(t.sent) * 1e6
	}
	cpuBase, cpuPoison := perReq(cpu0, cpu1, base), perReq(cpu2, cpu3, poisoned)

	r.fig("records_pushed", 6, "")
	r.fig("records_quarantined", float64(len(p.Rejected)), "")
	r.fig("quarantined_in_admin_api", float64(quarantined), "")
	r.fig("levee_discovery_rejected_total_increase", rejectedAfter-rejectedBefore, "")
	r.fig("requests", float64(poisoned.sent), "")
	r.fig("success_ratio", poisoned.successRatio(), "")
	r.fig("served_by_good_endpoint_1", float64(served[0]), "requests")
	r.fig("served_by_good_endpoint_2", float64(served[1]), "requests")
	r.fig("served_by_weight_0_endpoint", float64(served[2]), "requests")
	r.fig("cpu_per_request_before", cpuBase, "µs")
	r.fig("cpu_per_request_poisoned", cpuPoison, "µs")

	r.check(p.Result == "applied", "the update with bad records was %q, want applied with the bad records dropped", p.Result)
	r.check(reasons["[3]"] == "not_a_number" && reasons["[4]"] == "not_finite" && reasons["[5]"] == "not_finite",
		`weights "abc", "NaN", 1e309 not all quarantined (rejected: %v)`, reasons)
	r.check(quarantined >= 3, "the admin API lists %d quarantined records, want 3", quarantined)
	r.check(rejectedAfter-rejectedBefore >= 3, "levee_discovery_rejected_total rose by %g, want 3", rejectedAfter-rejectedBefore)
	r.check(drained && served[2] == 0, `the weight "0" endpoint is not drained (drained=%v, %d requests)`, drained, served[2])
	r.check(served[0] > 0 && served[1] > 0, "the good endpoints were not both served (%d, %d)", served[0], served[1])
	r.check(poisoned.sent > 0 && poisoned.failures() == 0, "%d of %d requests failed with the poisoned records:%s", poisoned.failures(), poisoned.sent, poisoned.summary())
	// CPU is read at 10 ms resolution on a shared machine: "unchanged"
	// means within 3x plus 500 µs, far below a spinning core.
	r.check(cpuPoison <= 3*cpuBase+500, "CPU per request rose from %.0f µs to %.0f µs", cpuBase, cpuPoison)
	return nil
}

// retryStorm: the second outage's app retrying without limit.
func retryStorm(ctx context.Context, e *env, r *Result) error {
	b, err := e.backend()
	if err != nil {
		return err
	}
	// The noisy app's limit, and its 10x traffic, fit in the rate cap
	// beside the quiet app: limit = rate/20, noisy 10x = rate/2, quiet rate/10.
	limit := e.o.Rate / 20
	noisyRate, quietRate := 10*limit, e.o.Rate/10
	noisyKey, err := e.app(ctx, "noisy", fmt.Sprintf(`{"rate":%d,"burst":%d}`, limit, limit))
	if err != nil {
		return err
	}
	quietKey, err := e.app(ctx, "quiet", "")
	if err != nil {
		return err
	}
	e.pushed = true
	if _, err := e.push(ctx, fmt.Sprintf(`[{"address":%q}]`, b.addr)); err != nil {
		return err
	}
	half := e.o.Duration / 2
	base := e.drive(ctx, quietKey, quietRate, half, nil)
	var noisy *tally
	done := make(chan struct{})
	go func() {
		defer close(done)
		noisy = e.drive(ctx, noisyKey, noisyRate, half, nil)
	}()
	quiet := e.drive(ctx, quietKey, quietRate, half, nil)
	<-done

	refused := 0.0
	if noisy.sent > 0 {
		refused = float64(noisy.count("429")) / float64(noisy.sent)
	}
	r.fig("noisy_app_limit", float64(limit), "requests/s")
	r.fig("noisy_app_rate", float64(noisyRate), "requests/s")
	r.fig("noisy_requests", float64(noisy.sent), "")
	r.fig("noisy_429", float64(noisy.count("429")), "")
	r.fig("noisy_429_with_retry_after", float64(noisy.retryAfter), "")
	r.fig("noisy_served", float64(noisy.ok()), "")
	r.fig("quiet_success_ratio_before", base.successRatio(), "")
	r.fig("quiet_success_ratio_during", quiet.successRatio(), "")
	r.fig("quiet_p99_before", base.p99(), "ms")
	r.fig("quiet_p99_during", quiet.p99(), "ms")

	r.check(refused >= 0.5, "the app at 10x its limit got 429 for %.0f%% of its requests, want at least 50%%:%s", 100*refused, noisy.summary())
	r.check(noisy.throttled == noisy.retryAfter, "%d of %d refusals lacked a Retry-After", noisy.throttled-noisy.retryAfter, noisy.throttled)
	r.check(quiet.sent > 0 && quiet.successRatio() >= 0.99 && quiet.successRatio() >= base.successRatio()-0.01,
		"the other app's success fell from %.3f to %.3f:%s", base.successRatio(), quiet.successRatio(), quiet.summary())
	// p99 "unchanged" on a shared machine: within 3x or 100 ms of before.
	r.check(quiet.p99() <= math.Max(3*base.p99(), base.p99()+100), "the other app's p99 rose from %.1f ms to %.1f ms", base.p99(), quiet.p99())
	return nil
}

// dyingEndpoint: one of two backends dies under traffic.
func dyingEndpoint(ctx context.Context, e *env, r *Result) error {
	a, err := e.backend()
	if err != nil {
		return err
	}
	b, err := e.backend()
	if err != nil {
		return err
	}
	key, err := e.app(ctx, "client", "")
	if err != nil {
		return err
	}
	e.pushed = true
	if _, err := e.push(ctx, fmt.Sprintf(`[{"address":%q},{"address":%q}]`, a.addr, b.addr)); err != nil {
		return err
	}
	label := `upstream="` + e.o.Upstream + `"`
	retries0, _ := e.metric(ctx, "levee_retries_total", label)
	// A quarter of the rate cap keeps the retries inside the default retry
	// budget (20% of requests plus 5 a second).
	rate := e.o.Rate / 4
	var bBefore int64
	var killedAt time.Duration
	start := time.Now()
	t := e.drive(ctx, key, rate, e.o.Duration, func() {
		bBefore = b.hits.Load()
		killedAt = time.Since(start)
		b.kill()
	})
	retries1, _ := e.metric(ctx, "levee_retries_total", label)

	r.fig("requests", float64(t.sent), "")
	r.fig("client_failures", float64(t.failures()), "")
	r.fig("killed_after", killedAt.Seconds(), "s")
	r.fig("dying_endpoint_served_before_death", float64(bBefore), "requests")
	r.fig("surviving_endpoint_served", float64(a.hits.Load()), "requests")
	r.fig("levee_retries_total_increase", retries1-retries0, "")
	r.check(bBefore > 0, "the endpoint that died had served no request before (it was not in rotation)")
	r.check(t.sent > 0 && t.failures() == 0, "%d of %d client requests failed after an endpoint died:%s", t.failures(), t.sent, t.summary())
	return nil
}

// The overload drill's backend: a service that serves overloadSlots
// requests at once, each in overloadHold (40 requests per second).
const (
	overloadSlots = 8
	overloadHold  = 200 * time.Millisecond
)

// overload: demand far above an upstream's capacity.
func overload(ctx context.Context, e *env, r *Result) error {
	b, err := e.slowBackend(overloadSlots, overloadHold)
	if err != nil {
		return err
	}
	key, err := e.app(ctx, "client", "")
	if err != nil {
		return err
	}
	e.pushed = true
	if _, err := e.push(ctx, fmt.Sprintf(`[{"address":%q}]`, b.addr)); err != nil {
		return err
	}
	capacity := float64(overloadSlots) / overloadHold.Seconds()
	// Offered: 5x the capacity, within the rate cap.
	rate := int(math.Min(5*capacity, float64(e.o.Rate)))
	begin := time.Now()
	t := e.drive(ctx, key, rate, e.o.Duration, nil)
	secs := time.Since(begin).Seconds()
	goodput := float64(t.ok()) / secs
	refusedP99 := p99(t.refusedLat)
	errs := t.status["error"]

	r.fig("backend_capacity", capacity, "requests/s")
	r.fig("offered", float64(rate), "requests/s")
	r.fig("requests", float64(t.sent), "")
	r.fig("served", float64(t.ok()), "")
	r.fig("goodput", goodput, "requests/s")
	r.fig("refused", float64(t.throttled), "")
	r.fig("refused_with_retry_after", float64(t.retryAfter), "")
	r.fig("refused_p99", refusedP99, "ms")
	r.fig("served_p99", t.p99(), "ms")
	r.fig("client_errors", float64(errs), "")

	// Kept: half the backend's capacity at least, on a shared machine.
	r.check(goodput >= capacity/2, "goodput fell to %.1f requests/s of a capacity of %.0f", goodput, capacity)
	// Bounded: a served request waits at most a short queue (4x its work).
	r.check(t.p99() <= 4*float64(overloadHold.Milliseconds()), "served requests' p99 is %.0f ms for %d ms of work: they queue without bound", t.p99(), overloadHold.Milliseconds())
	r.check(t.throttled > 0, "nothing was refused at %.0fx the capacity:%s", float64(rate)/capacity, t.summary())
	r.check(refusedP99 <= 250, "refusals are slow: p99 %.0f ms", refusedP99)
	r.check(t.throttled == t.retryAfter, "%d of %d refusals lacked a Retry-After", t.throttled-t.retryAfter, t.throttled)
	r.check(errs == 0, "%d requests got no answer:%s", errs, t.summary())
	return nil
}
