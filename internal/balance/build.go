package balance

import "github.com/levee-gw/levee/internal/endpoint"

// Kind names a balancer (the upstream's `balancer`).
type Kind uint8

const (
	// KindSmoothWeighted is smooth weighted round robin (the default).
	KindSmoothWeighted Kind = iota
	// KindLeastRequest is least request (LeastRequest).
	KindLeastRequest
	// KindConsistentHash is consistent hashing (ConsistentHash).
	KindConsistentHash
)

// Spec is what an upstream's picker is built from beside its endpoints.
type Spec struct {
	Kind Kind
	// LeastRequest are least_request's options (Prev is set by Build).
	LeastRequest LeastRequestOptions
	// Zones, when not nil, builds zone tiers: the local zone, each
	// failover zone in order, then every other zone and endpoints
	// without one. The caller leaves it nil in panic mode.
	Zones *ZoneSpec
}

// ZoneSpec is an upstream's zones block.
type ZoneSpec struct {
	Local            string
	Failover         []string
	Overprovisioning float64
}

// Built is a picker Build made, with what the next build reuses.
type Built struct {
	// Picker picks over the effective endpoints (a *Zoned with zones);
	// not guarded (the caller wraps it in Guarded).
	Picker Picker
	// Tiers are each tier's picker, with zones (for the next build's
	// Prev); Members each tier's effective endpoints, for retries.
	Tiers   []Picker
	Members [][]*endpoint.Endpoint
	// Observers are the least_request pickers built (for latency
	// observations when EWMA is on).
	Observers []*LeastRequest
}

// Build builds the picker of s over eff, the effective endpoints (base
// are the configured ones, parallel, whose weights make the zone shares;
// healthy says which of eff are healthy), handing each picker its
// predecessor at the same place in prev, so that least_request keeps its
// latency estimates and consistent_hash its table size.
func Build(s Spec, base, eff []*endpoint.Endpoint, healthy []bool, prev Built) Built {
	if s.Zones == nil {
		p, lrp := newPicker(s, eff, prev.Picker)
		b := Built{Picker: p}
		if lrp != nil {
			b.Observers = []*LeastRequest{lrp}
		}
		return b
	}
	z := s.Zones
	n := len(z.Failover) + 2
	tierOf := make(map[string]int, n-1)
	tierOf[z.Local] = 0
	for i, name := range z.Failover {
		tierOf[name] = i + 1
	}
	b := Built{Members: make([][]*endpoint.Endpoint, n), Tiers: make([]Picker, n)}
	healthyW, total := make([]uint64, n), make([]uint64, n)
	for i, e := range eff {
		t, listed := tierOf[e.Zone]
		if !listed {
			t = n - 1
		}
		b.Members[t] = append(b.Members[t], e)
		if w := uint64(base[i].Weight); w > 0 {
			total[t] += w
			if healthy[i] {
				healthyW[t] += w
			}
		}
	}
	shares := make([]float64, n)
	ZoneShares(healthyW, total, z.Overprovisioning, shares)
	for t := range b.Tiers {
		var prevTier Picker
		if t < len(prev.Tiers) {
			prevTier = prev.Tiers[t]
		}
		var lrp *LeastRequest
		b.Tiers[t], lrp = newPicker(s, b.Members[t], prevTier)
		if lrp != nil {
			b.Observers = append(b.Observers, lrp)
		}
	}
	b.Picker = NewZoned(b.Tiers, shares)
	return b
}

// newPicker builds s's balancer over eps with prev (the previous picker
// at the same place); lrp is the picker when it is a least_request one.
func newPicker(s Spec, eps []*endpoint.Endpoint, prev Picker) (picker Picker, lrp *LeastRequest) {
	switch s.Kind {
	case KindLeastRequest:
		o := s.LeastRequest
		o.Prev, _ = prev.(*LeastRequest)
		lrp = NewLeastRequest(eps, o)
		return lrp, lrp
	case KindConsistentHash:
		o := HashOptions{}
		o.Prev, _ = prev.(*ConsistentHash)
		return NewConsistentHash(eps, o), nil
	}
	return NewSmoothWeighted(eps), nil
}
