package balance

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/levee-gw/levee/internal/endpoint"
	"pgregory.net/rapid"
)

// TestZoneShares pins the spill-over arithmetic at the points the docs
// quote (overprovisioning 1.4): local at 100 %, 72 %, 50 %, 25 %, 0 %
// healthy, a degraded second tier, and nothing healthy anywhere.
func TestZoneShares(t *testing.T) {
	tests := []struct {
		name           string
		healthy, total []uint64
		op             float64
		want           []float64
	}{
		{"local whole", []uint64{4, 4}, []uint64{4, 4}, 1.4, []float64{1, 0}},
		{"local 75% still enough", []uint64{3, 4}, []uint64{4, 4}, 1.4, []float64{1, 0}},
		{"local half", []uint64{2, 4}, []uint64{4, 4}, 1.4, []float64{0.7, 0.3}},
		{"local quarter", []uint64{1, 4}, []uint64{4, 4}, 1.4, []float64{0.35, 0.65}},
		{"local gone", []uint64{0, 4}, []uint64{4, 4}, 1.4, []float64{0, 1}},
		{"three tiers", []uint64{1, 1, 4}, []uint64{4, 4, 4}, 1.4, []float64{0.35, 0.35, 0.3}},
		{"all degraded: normalised", []uint64{1, 1}, []uint64{4, 4}, 1, []float64{0.5, 0.5}},
		{"nothing healthy", []uint64{0, 0}, []uint64{4, 4}, 1.4, []float64{0, 0}},
		{"empty tier", []uint64{0, 3}, []uint64{0, 3}, 1.4, []float64{0, 1}},
		{"op below 1 counts as 1", []uint64{2, 2}, []uint64{4, 2}, 0.5, []float64{0.5, 0.5}},
		{"healthy above total clamps", []uint64{9, 1}, []uint64{4, 1}, 1.4, []float64{1, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make([]float64, len(tt.healthy))
			ZoneShares(tt.healthy, tt.total, tt.op, got)
			for i := range got {
				if math.Abs(got[i]-tt.want[i]) > 1e-9 {
					t.Fatalf("shares = %v, want %v", got, tt.want)
				}
			}
		})
	}
}

// TestZoneSharesProperties: for any weights the shares are in [0, 1], sum
// to 1 when some tier has healthy weight (else all 0), no tier gets more
// than its health when the total health reaches 1, and an earlier tier at
// full health takes everything.
func TestZoneSharesProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, MaxTiers).Draw(t, "tiers")
		healthy, total := make([]uint64, n), make([]uint64, n)
		anyHealthy := false
		for i := range n {
			total[i] = rapid.Uint64Range(0, 1_000_000).Draw(t, "total")
			healthy[i] = rapid.Uint64Range(0, total[i]).Draw(t, "healthy")
			anyHealthy = anyHealthy || healthy[i] > 0
		}
		op := rapid.Float64Range(1, 3).Draw(t, "op")
		out := make([]float64, n)
		ZoneShares(healthy, total, op, out)
		sum := 0.0
		for i, s := range out {
			if s < 0 || s > 1 || math.IsNaN(s) {
				t.Fatalf("share %d = %v", i, s)
			}
			if healthy[i] == 0 && s != 0 {
				t.Fatalf("tier %d has no healthy weight but share %v", i, s)
			}
			sum += s
		}
		if anyHealthy && math.Abs(sum-1) > 1e-9 {
			t.Fatalf("shares %v sum to %v", out, sum)
		}
		if !anyHealthy && sum != 0 {
			t.Fatalf("nothing healthy but shares %v", out)
		}
		if total[0] > 0 && op*float64(healthy[0]) >= float64(total[0]) && out[0] != 1 {
			t.Fatalf("healthy local tier got %v", out[0])
		}
	})
}

// TestZonedPickFollowsShares draws many picks and checks each tier's share
// and that tiers with share 0 are never picked.
func TestZonedPickFollowsShares(t *testing.T) {
	a, b, c := endpoints(100, 100), addrEndpoints(100, 100), endpoints(100)
	tiers := []Picker{NewSmoothWeighted(a), NewLeastRequest(b, LeastRequestOptions{}), NewConsistentHash(c, HashOptions{})}
	z := NewZoned(tiers, []float64{0.7, 0.3, 0})
	inTier := map[*endpoint.Endpoint]int{a[0]: 0, a[1]: 0, b[0]: 1, b[1]: 1, c[0]: 2}
	const picks = 200_000
	var count [3]int
	for range picks {
		e, err := z.Pick()
		if err != nil {
			t.Fatal(err)
		}
		count[inTier[e]]++
	}
	if count[2] != 0 {
		t.Errorf("a tier with share 0 got %d picks", count[2])
	}
	if got := float64(count[0]) / picks; math.Abs(got-0.7) > 0.01 {
		t.Errorf("tier 0 share = %.4f, want 0.7", got)
	}
	// Keys: with consistent-hash tiers a key sticks to one tier and one
	// endpoint.
	z = NewZoned([]Picker{NewConsistentHash(addrEndpoints(1, 1, 1), HashOptions{}), NewConsistentHash(endpoints(1, 1), HashOptions{})}, []float64{0.5, 0.5})
	for k := range uint64(1000) {
		e1, _ := z.PickKey(k)
		e2, _ := z.PickKey(k)
		if e1 != e2 {
			t.Fatalf("key %d went to %s then %s", k, e1.Address, e2.Address)
		}
	}
}

func TestZonedNoShare(t *testing.T) {
	z := NewZoned([]Picker{NewSmoothWeighted(endpoints(1)), nil}, []float64{0, 0})
	if e, err := z.Pick(); e != nil || err != ErrNoEndpoint {
		t.Fatalf("Pick = %v, %v; want ErrNoEndpoint", e, err)
	}
	if e, err := z.PickKey(7); e != nil || err != ErrNoEndpoint {
		t.Fatalf("PickKey = %v, %v; want ErrNoEndpoint", e, err)
	}
	// NaN, negative and infinite shares are not picked.
	z = NewZoned([]Picker{NewSmoothWeighted(endpoints(1)), NewSmoothWeighted(endpoints(1))}, []float64{math.NaN(), -1})
	if _, err := z.Pick(); err != ErrNoEndpoint {
		t.Fatalf("Pick with bad shares: %v", err)
	}
}

func TestZonedPickDoesNotAllocate(t *testing.T) {
	z := NewZoned([]Picker{NewSmoothWeighted(endpoints(1, 2)), NewConsistentHash(addrEndpoints(3, 4), HashOptions{})}, []float64{0.5, 0.5})
	if n := testing.AllocsPerRun(1000, func() { _, _ = z.Pick(); _, _ = z.PickKey(42) }); n != 0 {
		t.Fatalf("%v allocations per pick", n)
	}
}

// BenchmarkZonedPick: a three-tier zoned picker over smooth weighted round
// robin tiers, local zone at half health (the scan goes past tier 0 for a
// third of picks).
func BenchmarkZonedPick(b *testing.B) {
	for _, n := range pickerBenchSizes {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			eps := hundredthsEndpoints(n)
			third := max(1, n/3)
			tiers := []Picker{NewSmoothWeighted(eps[:third]), NewSmoothWeighted(eps[third : 2*third]), NewSmoothWeighted(eps[2*third:])}
			shares := make([]float64, 3)
			ZoneShares([]uint64{1, 2, 2}, []uint64{2, 2, 2}, DefaultOverprovisioning, shares)
			z := NewZoned(tiers, shares)
			b.ReportAllocs()
			var e *endpoint.Endpoint
			for b.Loop() {
				e, _ = z.Pick()
			}
			sinkEndpoint = e
		})
	}
}

// FuzzZoned: endpoint sets from the fuzz operations are split into three
// tiers (by position), each tier's healthy weight is that of its live
// endpoints at even positions; every pick returns a live endpoint of a
// tier with a positive share, or ErrNoEndpoint exactly when no share is
// positive.
func FuzzZoned(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var (
			z      *Zoned
			tierOf map[*endpoint.Endpoint]int
			shares []float64
		)
		build := func(eps []*endpoint.Endpoint) {
			const n = 3
			members := make([][]*endpoint.Endpoint, n)
			healthy, total := make([]uint64, n), make([]uint64, n)
			tierOf = map[*endpoint.Endpoint]int{}
			for i, e := range eps {
				members[i%n] = append(members[i%n], e)
				if e == nil || e.Weight == 0 {
					continue
				}
				tierOf[e] = i % n
				total[i%n] += uint64(e.Weight)
				if i%2 == 0 {
					healthy[i%n] += uint64(e.Weight)
				}
			}
			shares = make([]float64, n)
			ZoneShares(healthy, total, DefaultOverprovisioning, shares)
			tiers := make([]Picker, n)
			for i := range tiers {
				tiers[i] = NewSmoothWeighted(members[i])
			}
			z = NewZoned(tiers, shares)
		}
		pick := func(n int, r *fuzzReader) {
			if z == nil {
				return
			}
			anyShare := shares[0] > 0 || shares[1] > 0 || shares[2] > 0
			for range n {
				e, err := z.PickKey(uint64(r.u32()))
				if !anyShare {
					if e != nil || !errors.Is(err, ErrNoEndpoint) {
						t.Fatalf("no share: PickKey = %v, %v", e, err)
					}
					continue
				}
				tier, live := tierOf[e]
				if err != nil || !live || shares[tier] <= 0 {
					t.Fatalf("PickKey = %v, %v (tier %d, shares %v); want a live endpoint of a tier with a share", e, err, tier, shares)
				}
			}
		}
		fuzzPickerOps(data, build, pick)
	})
}
