package admission

import (
	"math"
	"slices"
	"time"
)

// The adaptive limit is the gradient controller of Envoy's adaptive
// concurrency filter (envoyproxy.io, "Adaptive Concurrency", gradient
// controller), in three parts:
//
//  1. minRTT, the latency of the upstream when it is not queueing, is
//     measured by a probe: the limit drops to Min until ProbeSamples
//     requests admitted after the probe began have finished; minRTT is
//     the 10th percentile of their latencies (probeQuantile). A probe
//     runs at start, every ProbeInterval (jittered ±10 % so a fleet does
//     not probe in step), and after
//     floorWindows consecutive windows ended with the limit at Min (the
//     upstream got slower for good, so the old minRTT is wrong). After a
//     probe the limit returns to its value before it.
//
//  2. Between probes, latency samples (endpoint.Success and Failure outcomes;
//     not NotSent or Abandoned) are collected per window (at most maxWindowSamples of them,
//     a uniform reservoir beyond). A window closes, and the limit is
//     recomputed, at the first sample at least Window after the window
//     opened and with at least MinSamples samples in it: at most one update
//     per Window, each from at least MinSamples samples.
//
//  3. The update:
//
//     gradient = clamp((minRTT × (1 + Buffer)) / sampleRTT, 0.5, 2)
//
//     with sampleRTT the window's median latency, its 50th percentile
//     (Envoy's default sample_aggregate_percentile, 50). The median, not
//     the arithmetic mean: a few
//     requests delayed by something other than the upstream (a garbage
//     collection, a busy core) must not cut the limit for everyone.
//     limit'   = gradient × limit + sqrt(gradient × limit)
//     limit'   = clamp(limit', Min, Max)
//
//     The square root is Envoy's headroom: it lets the limit grow when
//     latency is flat and leaves a small queue at the upstream so it is
//     never idle. Two levee additions: a window where more than half the
//     samples were Failures uses gradient 0.5 (timeouts and errors are a
//     congestion signal even when fast), and a window whose peak in-flight
//     count stayed below the limit does not raise it (the limit was not
//     what held traffic back, so the samples say nothing about a higher
//     one: TCP's congestion window validation, RFC 7661). Netflix
//     Gradient2 only stops at half the limit; that let 20 clients, which
//     never queue at a 20-slot upstream, lift the limit to 40, and the
//     first 100 ms of a flood then ran at 40 in flight and twice the
//     latency.
//
// Fixed point: against an upstream that serves C at a time and queues the
// rest (latency = base × inflight/C once inflight > C), a saturated window
// has sampleRTT = base × limit/C, so gradient × limit = (1+Buffer) × C
// whatever the limit was, and one update lands at
// (1+Buffer)×C + sqrt((1+Buffer)×C): about 1.33 C for C = 20 with the
// default Buffer 0.1, 1.27 C for C = 40, 1.43 C for C = 10. Below C the
// limit grows by a factor of at least 1.1 per window. Envoy's default
// Buffer is 25 %; levee uses 10 % to queue less at the upstream.
//
// Envoy was chosen over Netflix Gradient2 because Gradient2's long-term RTT
// is an average of the loaded RTT and drifts up under sustained overload
// (the limit creeps up with it), while a periodically re-measured minRTT
// is anchored to the unloaded upstream.
//
// Cost and locking: the controller is plain state inside Limiter.mu; each
// Release.Done of an adaptive limiter adds a few integer operations under
// the mutex it takes anyway, and a window update is O(1) (one sqrt).

// AdaptiveOptions configure the adaptive limit. Zero values of the optional
// fields take the defaults named on them.
type AdaptiveOptions struct {
	// Min is the lowest limit, >= 1, and the limit while minRTT is probed.
	// Keep it well below the upstream's capacity, or the probe measures a
	// queueing latency.
	Min int
	// Max is the highest limit, >= Min.
	Max int
	// Initial is the limit once the first probe has measured minRTT,
	// Min..Max; 0 means Min, and the limit then grows window by window.
	// A data source starts at its pool's size: the operator sized it, and
	// growing from Min to it under a saturating load took seconds of half
	// the goodput (200 ms queries: a window needs MinSamples of them).
	Initial int
	// Window is the shortest time between two limit updates. Default 100ms.
	Window time.Duration
	// MinSamples is the fewest samples a window needs to update the limit.
	// Default 20.
	MinSamples int
	// Buffer is the latency above minRTT tolerated before the limit shrinks,
	// as a fraction of minRTT, 0..1. Default 0.1 (10 %).
	Buffer float64
	// ProbeInterval is the time between minRTT probes, each interval
	// jittered by up to ±10 %. Default 30s.
	ProbeInterval time.Duration
	// ProbeSamples is the number of latency samples a probe collects;
	// minRTT is their 10th percentile (probeQuantile). Default 25.
	ProbeSamples int
}

const (
	defaultWindow        = 100 * time.Millisecond
	defaultMinSamples    = 20
	defaultBuffer        = 0.1
	defaultProbeInterval = 30 * time.Second
	defaultProbeSamples  = 25
	// floorWindows consecutive windows ending at Min trigger a probe
	// (Envoy uses 5).
	floorWindows = 5
	// probeQuantile is the quantile of a probe's samples taken as minRTT:
	// a low one, since the upstream's latency without a queue is what the
	// probe is after, and on a busy proxy every sample also carries some
	// scheduling delay of the proxy's own; not the minimum, so that one
	// stray fast answer does not set it.
	probeQuantile = 0.1
	// maxWindowSamples bounds the latencies kept per window and per probe
	// (2 KiB); a window's median and a probe's 10th percentile are taken
	// over at most this many. ProbeSamples
	// above it still wait for that many samples, with a reservoir.
	maxWindowSamples = 256
)

// gradient is the controller's state. Times are nanoseconds on the
// limiter's clock (since Limiter.epoch). Guarded by Limiter.mu.
type gradient struct {
	min, max      float64
	window        int64
	minSamples    int
	buffer        float64
	probeInterval int64
	probeSamples  int

	limit   float64 // the estimate; the enforced limit is its rounding
	minRTT  int64   // 0 until the first probe ends
	lastRTT int64   // the last closed window's median latency, ns; 0 before the first

	// The open window.
	windowStart int64
	// samples holds the window's (or the probe's) latencies, ns: all of
	// them while count <= maxWindowSamples, else a uniform reservoir.
	samples  [maxWindowSamples]int64
	count    int
	failures int
	peak     int // highest in-flight count seen in the window
	atFloor  int // consecutive windows that ended with limit == min

	// The probe.
	probing    bool
	probeStart int64
	saved      float64 // limit before the probe
	nextProbe  int64
}

func newGradient(o AdaptiveOptions) *gradient {
	g := &gradient{
		min: float64(o.Min), max: float64(o.Max),
		window: int64(o.Window), minSamples: o.MinSamples, buffer: o.Buffer,
		probeInterval: int64(o.ProbeInterval), probeSamples: o.ProbeSamples,
	}
	if g.window == 0 {
		g.window = int64(defaultWindow)
	}
	if g.minSamples == 0 {
		g.minSamples = defaultMinSamples
	}
	if g.buffer == 0 {
		g.buffer = defaultBuffer
	}
	if g.probeInterval == 0 {
		g.probeInterval = int64(defaultProbeInterval)
	}
	if g.probeSamples == 0 {
		g.probeSamples = defaultProbeSamples
	}
	g.limit = g.min
	if o.Initial > 0 {
		g.limit = math.Min(math.Max(float64(o.Initial), g.min), g.max)
	}
	g.saved = g.limit // what the first probe returns to
	g.probing = true  // the first probe starts at time 0
	return g
}

// current is the enforced limit.
func (g *gradient) current() int {
	if g.probing {
		return int(g.min)
	}
	return int(math.Round(g.limit))
}

// observeInflight records the in-flight count after an admission.
func (g *gradient) observeInflight(n int) {
	if n > g.peak {
		g.peak = n
	}
}

// sample takes one finished request: admitted at start, finished at now,
// failed or not. rnd returns a uniform random number for the probe jitter
// (called once per probe). It reports whether the enforced limit may have
// changed.
func (g *gradient) sample(now, start int64, failed bool, rnd func() uint64, inflight int) bool {
	if g.probing {
		if start < g.probeStart {
			return false // admitted under the old limit: a loaded sample
		}
		g.keep(now-start, rnd)
		if g.count < g.probeSamples {
			return false
		}
		g.minRTT = max(1, g.quantile(probeQuantile))
		g.probing = false
		g.limit = g.saved
		g.atFloor = 0
		// Jitter in [0.9, 1.1) × interval.
		j := 0.9 + 0.2*float64(rnd()>>11)/float64(1<<53)
		g.nextProbe = now + int64(j*float64(g.probeInterval))
		g.openWindow(now, inflight)
		return true
	}
	if now >= g.nextProbe {
		g.startProbe(now)
		return true
	}
	g.keep(now-start, rnd)
	if failed {
		g.failures++
	}
	if now-g.windowStart < g.window || g.count < g.minSamples {
		return false
	}
	g.update()
	if g.current() <= int(g.min) {
		g.atFloor++
		if g.atFloor >= floorWindows {
			g.startProbe(now)
			return true
		}
	} else {
		g.atFloor = 0
	}
	g.openWindow(now, inflight)
	return true
}

// update applies the gradient formula to the closed window.
func (g *gradient) update() {
	g.lastRTT = max(1, g.quantile(0.5))
	rtt := float64(g.lastRTT)
	grad := float64(g.minRTT) * (1 + g.buffer) / rtt
	if 2*g.failures > g.count {
		grad = 0.5
	}
	grad = min(2, max(0.5, grad))
	if grad > 1 && g.peak < int(math.Round(g.limit)) {
		return // the limit was not reached: no evidence for a higher one
	}
	l := grad * g.limit
	l += math.Sqrt(l)
	g.limit = min(g.max, max(g.min, l))
}

func (g *gradient) openWindow(now int64, inflight int) {
	g.windowStart = now
	g.count, g.failures = 0, 0
	g.peak = inflight
}

// keep adds a latency to the samples: Vitter's algorithm R once the
// buffer is full, so every sample of the window is kept with the same
// probability.
func (g *gradient) keep(lat int64, rnd func() uint64) {
	if g.count < maxWindowSamples {
		g.samples[g.count] = lat
	} else if j := rnd() % uint64(g.count+1); j < maxWindowSamples {
		g.samples[j] = lat
	}
	g.count++
}

// quantile returns the q-quantile (0 <= q < 1) of the kept samples by
// nearest rank (q 0.5: the median, the upper one of an even count),
// sorting them in place: O(k log k) for k <= 256, once per window.
func (g *gradient) quantile(q float64) int64 {
	k := min(g.count, maxWindowSamples)
	if k == 0 {
		return 0
	}
	s := g.samples[:k]
	slices.Sort(s)
	return s[int(q*float64(k))]
}

func (g *gradient) startProbe(now int64) {
	g.probing = true
	g.probeStart = now
	g.count, g.failures = 0, 0
	g.saved = g.limit
}
