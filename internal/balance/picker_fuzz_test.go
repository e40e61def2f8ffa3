package balance

import (
	"errors"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

// fuzzPickerOps drives the operation bytes of FuzzSmoothWeighted (add,
// add many, add nil, drain, remove, build, pick) over an endpoint set,
// calling build on every opBuild (and once at the end) and pick(n, r) on
// every opPick with n from the next byte. It returns when the bytes run out
// or after fuzzMaxBuilds builds.
func fuzzPickerOps(data []byte, build func(eps []*endpoint.Endpoint), pick func(n int, r *fuzzReader)) {
	r := &fuzzReader{data: data}
	var eps []*endpoint.Endpoint
	builds, id := 0, 0
	add := func(w uint32) {
		if len(eps) < fuzzMaxEndpoints {
			eps = append(eps, endpoint.New(fuzzName(id), w))
			id++
		}
	}
	for !r.empty() && builds < fuzzMaxBuilds {
		switch r.op() {
		case opAdd16:
			add(r.u16() * 100) // hundredths: up to 655.35 · 100
		case opAdd32:
			add(r.u32())
		case opAddMany:
			n, w := r.u8()+1, r.u16()
			for range n {
				add(w)
			}
		case opAddNil:
			if len(eps) < fuzzMaxEndpoints {
				eps = append(eps, nil)
			}
		case opDrain:
			if len(eps) > 0 {
				if i := r.index(len(eps)); eps[i] != nil {
					eps[i] = endpoint.New(eps[i].Address, 0)
				}
			}
		case opRemove:
			if len(eps) > 0 {
				i := r.index(len(eps))
				eps = append(eps[:i:i], eps[i+1:]...)
			}
		case opBuild:
			builds++
			build(eps)
		case opPick:
			pick(r.u8(), r)
		}
	}
	if builds < fuzzMaxBuilds {
		build(eps)
	}
}

func liveMap(eps []*endpoint.Endpoint) map[*endpoint.Endpoint]bool {
	m := make(map[*endpoint.Endpoint]bool, len(eps))
	for _, e := range eps {
		if e != nil && e.Weight > 0 {
			m[e] = true
		}
	}
	return m
}

func fuzzSeeds(f *testing.F) {
	f.Add([]byte{opAdd16, 3, 0, opAdd16, 1, 0, opBuild, opPick, 8})
	f.Add([]byte{opAdd16, 5, 0, opAdd16, 1, 0, opAdd16, 1, 0, opBuild, opDrain, 0, opBuild, opPick, 20})
	f.Add([]byte{opAdd16, 0, 0, opAddNil, opBuild, opPick, 3})
	f.Add([]byte{opAdd32, 0xff, 0xff, 0xff, 0xff, opAdd32, 0x40, 0x42, 0x0f, 0, opAdd32, 1, 0, 0, 0, opBuild, opPick, 50})
	f.Add([]byte{opAddMany, 255, 0x10, 0x27, opAddMany, 255, 0xff, 0x00, opAdd16, 1, 0, opBuild, opPick, 255})
	f.Add([]byte{opAddMany, 63, 0, 4, opAdd16, 1, 0, opBuild, opRemove, 64, opBuild})
}

// FuzzLeastRequest: every build satisfies checkLeastRequest (exact alias
// table, live picks from distinct candidates, ErrNoEndpoint iff nothing is
// live); picks interleave with inflight changes (next two bytes: endpoint,
// count) and latency observations, with and without EWMA.
func FuzzLeastRequest(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var (
			p    *LeastRequest
			live map[*endpoint.Endpoint]bool
			now  = time.Unix(1e9, 0)
		)
		ewma := len(data) > 0 && data[0]&0x80 != 0
		build := func(eps []*endpoint.Endpoint) {
			p = NewLeastRequest(eps, LeastRequestOptions{EWMA: ewma, Prev: p, Now: func() time.Time { return now }})
			checkLeastRequest(t, eps, p, 16)
			live = liveMap(eps)
		}
		pick := func(n int, r *fuzzReader) {
			if p == nil {
				return
			}
			for range n {
				if len(p.eps) > 0 {
					i := r.index(len(p.eps))
					p.eps[i].Stats.Inflight.Store(int64(r.u8()) - 8)
					p.Observe(p.eps[i], time.Duration(r.u16())*time.Millisecond, now)
				}
				now = now.Add(time.Duration(r.u8()) * time.Second)
				e, err := p.Pick()
				if len(live) == 0 {
					if e != nil || !errors.Is(err, ErrNoEndpoint) {
						t.Fatalf("no live endpoint: Pick() = %v, %v", e, err)
					}
				} else if err != nil || !live[e] {
					t.Fatalf("Pick() = %v, %v; want a live endpoint", e, err)
				}
			}
		}
		fuzzPickerOps(data, build, pick)
	})
}

// FuzzConsistentHash: every build (with Prev) satisfies checkHash (size
// rule, full table, weight shares within the header's bound, probe budget);
// PickKey with keys from the input returns a live endpoint, the same one
// for the same key, or ErrNoEndpoint iff nothing is live.
func FuzzConsistentHash(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var (
			p    *ConsistentHash
			live map[*endpoint.Endpoint]bool
		)
		build := func(eps []*endpoint.Endpoint) {
			p = NewConsistentHash(eps, HashOptions{Prev: p})
			checkHash(t, eps, p)
			live = liveMap(eps)
		}
		pick := func(n int, r *fuzzReader) {
			if p == nil {
				return
			}
			for range n {
				key := uint64(r.u32())<<32 | uint64(r.u32())
				e, err := p.PickKey(key)
				if len(live) == 0 {
					if e != nil || !errors.Is(err, ErrNoEndpoint) {
						t.Fatalf("no live endpoint: PickKey = %v, %v", e, err)
					}
					continue
				}
				if err != nil || !live[e] {
					t.Fatalf("PickKey(%d) = %v, %v; want a live endpoint", key, e, err)
				}
				if again, _ := p.PickKey(key); again != e {
					t.Fatalf("PickKey(%d) changed: %v then %v", key, e, again)
				}
			}
		}
		fuzzPickerOps(data, build, pick)
	})
}
