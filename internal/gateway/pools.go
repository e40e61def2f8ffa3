package gateway

import (
	"fmt"
	"time"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/balance"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/proxy"
	"github.com/levee-gw/levee/internal/retrybudget"
	"github.com/levee-gw/levee/internal/upstream"
)

// pools keeps what must outlive one snapshot: each upstream's transport
// (its pooled connections) while the upstream's connection settings do not
// change, and each endpoint's live counters while the endpoint exists.
// Guarded by Gateway.mu.
type pools struct {
	transports map[string]pooledTransport
	stats      map[statsKey]*endpoint.Stats
	budgets    map[string]pooledBudget
	// pickers holds each upstream's last picker. When neither the
	// endpoint set nor the balancer settings changed it is reused as is
	// (a discovery update to one upstream does not rebuild the others);
	// otherwise it is handed to the next one as Prev: least_request keeps
	// its latency estimates and consistent_hash its table size, so a
	// change moves few keys.
	pickers map[string]pooledPicker
	// limiters keeps each upstream's admission limiter (its queue, its
	// in-flight count, its adaptive limit) while its options are unchanged.
	limiters map[string]pooledLimiter
	// sources keeps each data source's pool while its options are
	// unchanged (data.go).
	sources map[string]pooledSource
}

type pooledPicker struct {
	inputs pickerInputs
	raw    balance.Picker   // unguarded, for Prev
	tiers  []balance.Picker // with zones: each tier's picker, for Prev
	bal    *proxy.Balance
}

type pooledLimiter struct {
	opts    config.Limits
	tuning  limiterTuning
	limiter *admission.Limiter
}

// limiterTuning is what an admission limiter takes beyond its limits
// block: upstreams use the zero value, data sources dataLimiterTuning.
type limiterTuning struct {
	// queueTarget is the short wait of a flooding consumer's requests
	// under controlled delay (0: admission's default).
	queueTarget time.Duration
	// startAtMax starts an adaptive limit at its max once the first probe
	// has measured the latency, instead of growing there from its min.
	startAtMax bool
}

// limiter returns the upstream's admission limiter (nil without limits),
// reusing the current one when its options are unchanged.
func (p *pools) limiter(name string, l *config.Limits, tuning limiterTuning) (*admission.Limiter, error) {
	if l == nil {
		delete(p.limiters, name)
		return nil, nil
	}
	if cur, ok := p.limiters[name]; ok && cur.opts == *l && cur.tuning == tuning {
		return cur.limiter, nil
	}
	o := admission.Options{
		MaxConcurrency: l.MaxConcurrency,
		MaxQueue:       l.MaxQueue,
		QueueTimeout:   l.QueueTimeout,
		QueueTarget:    min(tuning.queueTarget, l.QueueTimeout),
		MaxPerConsumer: l.MaxPerConsumer,
	}
	if l.Adaptive {
		o.MaxConcurrency = 0
		o.Adaptive = &admission.AdaptiveOptions{Min: l.Min, Max: l.Max}
		if tuning.startAtMax {
			o.Adaptive.Initial = l.Max
		}
	}
	lim, err := admission.New(o)
	if err != nil {
		return nil, fmt.Errorf("upstreams.%s.limits: %w", name, err)
	}
	p.limiters[name] = pooledLimiter{opts: *l, tuning: tuning, limiter: lim}
	return lim, nil
}

// pooledBudget keeps an upstream's retry budget across reloads while its
// options are unchanged, so a reload during a retry storm cannot refill it.
type pooledBudget struct {
	opts   retrybudget.Options
	budget *retrybudget.Budget
}

// retryBudgetWindow is the sliding window of every upstream's retry budget.
const retryBudgetWindow = 10 * time.Second

type pooledTransport struct {
	opts      upstream.Options
	transport *upstream.Transport
}

type statsKey struct{ upstream, address string }

func newPools() *pools {
	return &pools{transports: map[string]pooledTransport{}, stats: map[statsKey]*endpoint.Stats{}, budgets: map[string]pooledBudget{}, pickers: map[string]pooledPicker{},
		limiters: map[string]pooledLimiter{}, sources: map[string]pooledSource{}}
}

// budget returns the upstream's retry budget, reusing the current one when
// its options are unchanged. Options come from validated configuration, so
// an error here is a bug in validation; it is returned, never ignored.
func (p *pools) budget(name string, o retrybudget.Options) (*retrybudget.Budget, error) {
	if cur, ok := p.budgets[name]; ok && cur.opts == o {
		return cur.budget, nil
	}
	b, err := retrybudget.New(o)
	if err != nil {
		return nil, fmt.Errorf("upstreams.%s.retry.budget: %w", name, err)
	}
	p.budgets[name] = pooledBudget{opts: o, budget: b}
	return b, nil
}

// transport returns the upstream's transport, reusing the current one when
// its options (with TLS, the files' contents too) are unchanged.
func (p *pools) transport(name string, o upstream.Options) *upstream.Transport {
	if cur, ok := p.transports[name]; ok && cur.opts.Equal(o) {
		return cur.transport
	}
	t := upstream.NewTransport(o)
	if old, ok := p.transports[name]; ok {
		// Requests in flight on the old transport finish; its idle
		// connections are of no further use.
		old.transport.Close()
	}
	p.transports[name] = pooledTransport{opts: o, transport: t}
	return t
}

// retain drops transports and counters that the configuration no longer
// references, and closes the kept transports' pooled connections to
// endpoints no longer in their upstream's set.
func (p *pools) retain(upstreams map[string]bool, stats map[statsKey]bool) {
	for name, t := range p.transports {
		if !upstreams[name] {
			t.transport.Close()
			delete(p.transports, name)
			continue
		}
		t.transport.RetainEndpoints(func(addr string) bool { return stats[statsKey{name, addr}] })
	}
	for name := range p.budgets {
		if !upstreams[name] {
			delete(p.budgets, name)
		}
	}
	for name := range p.pickers {
		if !upstreams[name] {
			delete(p.pickers, name)
		}
	}
	for name := range p.limiters {
		if !upstreams[name] {
			delete(p.limiters, name)
		}
	}
	for name, s := range p.sources {
		if !upstreams[name] {
			s.source.Close()
			delete(p.sources, name)
		}
	}
	for k := range p.stats {
		if !stats[k] {
			delete(p.stats, k)
		}
	}
}

// retainStats drops the counters of upstream name's endpoints that are
// not in eps (after a discovery update removed them), and closes its
// transport's pooled connections to them.
func (p *pools) retainStats(name string, eps []*endpoint.Endpoint) {
	live := make(map[string]bool, len(eps))
	for _, ep := range eps {
		live[ep.Address] = true
	}
	for k := range p.stats {
		if k.upstream == name && !live[k.address] {
			delete(p.stats, k)
		}
	}
	if t, ok := p.transports[name]; ok {
		t.transport.RetainEndpoints(func(addr string) bool { return live[addr] })
	}
}

func (p *pools) closeAll() {
	for _, t := range p.transports {
		t.transport.Close()
	}
	for _, s := range p.sources {
		s.source.Close()
	}
}

// sweepIdle closes the idle upstream connections that have outlived their
// upstream's idle timeout at now, and returns how long to wait before the
// next sweep (upstream.SweepInterval). Called by upstream.Sweep, the one
// goroutine that sweeps, with g.mu held.
func (p *pools) sweepIdle(now time.Time) time.Duration {
	idle := make([]time.Duration, 0, len(p.transports))
	for _, t := range p.transports {
		t.transport.SweepIdle(now)
		idle = append(idle, t.opts.Idle)
	}
	return upstream.SweepInterval(idle)
}
