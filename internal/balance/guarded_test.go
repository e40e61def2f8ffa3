package balance

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/levee-gw/levee/internal/endpoint"
)

// pickerFunc adapts a function to Picker.
type pickerFunc func() (*endpoint.Endpoint, error)

func (f pickerFunc) Pick() (*endpoint.Endpoint, error) { return f() }

func TestGuardedFallsBack(t *testing.T) {
	fb := endpoints(1, 0, 5)
	fb = append(fb, nil)
	drained := endpoint.New("drained", 0)
	other := errors.New("boom")
	tests := []struct {
		name string
		p    Picker
	}{
		{"panics", pickerFunc(func() (*endpoint.Endpoint, error) { panic("picker bug") })},
		{"panics with nil", pickerFunc(func() (*endpoint.Endpoint, error) { panic(nil) })},
		{"nil endpoint, nil error", pickerFunc(func() (*endpoint.Endpoint, error) { return nil, nil })},
		{"drained endpoint", pickerFunc(func() (*endpoint.Endpoint, error) { return drained, nil })},
		{"endpoint and error", pickerFunc(func() (*endpoint.Endpoint, error) { return fb[0], ErrNoEndpoint })},
		{"unknown error", pickerFunc(func() (*endpoint.Endpoint, error) { return nil, other })},
		{"nil picker", nil},
		{"nil SmoothWeighted", (*SmoothWeighted)(nil)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int64
			g := Guarded(tt.p, fb, func() { n.Add(1) })
			seen := map[*endpoint.Endpoint]int{}
			for range 200 {
				e, err := g.Pick()
				if err != nil || (e != fb[0] && e != fb[2]) {
					t.Fatalf("Pick() = %v, %v; want a live fallback endpoint", e, err)
				}
				seen[e]++
			}
			if n.Load() != 200 {
				t.Fatalf("onFallback called %d times, want 200", n.Load())
			}
			if seen[fb[0]] < 50 || seen[fb[2]] < 50 {
				t.Fatalf("fallback picks %v, want uniform over the two live endpoints", seen)
			}
			e, err := g.(KeyPicker).PickKey(42)
			e2, _ := g.(KeyPicker).PickKey(42)
			if err != nil || e != e2 || e.Weight == 0 {
				t.Fatalf("PickKey(42) = %v, %v then %v; want one live fallback endpoint", e, err, e2)
			}
		})
	}
}

func TestGuardedPassesThrough(t *testing.T) {
	eps := endpoints(3, 1)
	var n atomic.Int64
	count := func() { n.Add(1) }
	for _, p := range []Picker{
		NewSmoothWeighted(eps),
		NewLeastRequest(eps, LeastRequestOptions{}),
		NewConsistentHash(eps, HashOptions{}),
	} {
		g := Guarded(p, eps, count)
		for range 100 {
			if e, err := g.Pick(); err != nil || e.Weight == 0 {
				t.Fatalf("Pick() = %v, %v", e, err)
			}
		}
	}
	// A legitimate ErrNoEndpoint is not overridden by the older set.
	g := Guarded(NewSmoothWeighted(endpoints(0)), eps, count)
	if e, err := g.Pick(); e != nil || !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("all drained: Pick() = %v, %v; want ErrNoEndpoint", e, err)
	}
	if n.Load() != 0 {
		t.Fatalf("onFallback called %d times on valid results", n.Load())
	}
	// PickKey reaches the wrapped ConsistentHash.
	ch := NewConsistentHash(eps, HashOptions{})
	g = Guarded(ch, nil, nil)
	for _, k := range []uint64{1, 2, 3, 99} {
		want, _ := ch.PickKey(k)
		if got, _ := g.(KeyPicker).PickKey(k); got != want {
			t.Fatalf("PickKey(%d) = %v, want %v", k, got, want)
		}
	}
	// Fallback with no live endpoint: ErrNoEndpoint, counted, no panic.
	g = Guarded(pickerFunc(func() (*endpoint.Endpoint, error) { panic("x") }), endpoints(0), count)
	if e, err := g.Pick(); e != nil || !errors.Is(err, ErrNoEndpoint) {
		t.Fatalf("empty fallback: Pick() = %v, %v", e, err)
	}
	if n.Load() != 1 {
		t.Fatalf("onFallback called %d times, want 1", n.Load())
	}
}

func TestGuardedHappyPathDoesNotAllocate(t *testing.T) {
	eps := endpoints(3, 1, 0, 7)
	for name, p := range map[string]Picker{
		"smooth":          NewSmoothWeighted(eps),
		"least_request":   NewLeastRequest(eps, LeastRequestOptions{}),
		"least_ewma":      NewLeastRequest(eps, LeastRequestOptions{EWMA: true}),
		"consistent_hash": NewConsistentHash(eps, HashOptions{}),
	} {
		g := Guarded(p, eps, func() { t.Errorf("%s: fallback on the happy path", name) })
		if a := testing.AllocsPerRun(1000, func() { _, _ = g.Pick() }); a != 0 {
			t.Errorf("%s: guarded Pick allocates %.1f times", name, a)
		}
		if a := testing.AllocsPerRun(1000, func() { _, _ = g.(KeyPicker).PickKey(7) }); a != 0 {
			t.Errorf("%s: guarded PickKey allocates %.1f times", name, a)
		}
	}
}
