package health

// PANIC MODE. Envoy's panic threshold (docs: "Panic threshold"): when the
// healthy share of an upstream drops low, sending everything to the few
// healthy endpoints would overload them too, so the balancer spreads over
// every endpoint instead and lets some requests fail. levee compares
// weights, not counts: with H the configured weight of the serving
// endpoints and T that of every non-drained one, the upstream is in panic
// when T > 0 and H < threshold × T. Drained endpoints (weight 0) are never
// used, panic or not. In panic, slow start and zones are ignored: every
// non-drained endpoint gets its configured weight.

import (
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

// plan decides the effective endpoints of eps at now. state(i) reports
// whether endpoint i serves and when its slow start began (zero: none).
// next is the next time a ramped weight changes (zero: none). O(len(eps)).
func plan(eps []*endpoint.Endpoint, state func(i int) (serving bool, rampFrom time.Time), threshold float64, slow time.Duration, now time.Time) (p Plan, next time.Time) {
	p.Endpoints = make([]*endpoint.Endpoint, len(eps))
	p.Healthy = make([]bool, len(eps))
	var healthy, total uint64
	for i, e := range eps {
		serving, _ := state(i)
		p.Healthy[i] = serving && e.Weight > 0
		if e.Weight > 0 {
			total += uint64(e.Weight)
			if p.Healthy[i] {
				healthy += uint64(e.Weight)
			}
		}
	}
	p.Panic = threshold > 0 && total > 0 && float64(healthy) < threshold*float64(total)
	for i, e := range eps {
		w := e.Weight
		if !p.Panic {
			if !p.Healthy[i] {
				w = 0
			} else if _, from := state(i); !from.IsZero() {
				var step time.Time
				w, step = rampWeight(w, from, slow, now)
				if !step.IsZero() && (next.IsZero() || step.Before(next)) {
					next = step
				}
			}
		}
		if w == e.Weight {
			p.Endpoints[i] = e
			continue
		}
		c := *e
		c.Weight = w
		p.Endpoints[i] = &c
	}
	return p, next
}
