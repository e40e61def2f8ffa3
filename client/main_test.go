package client

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/levee-gw/levee/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is testkit's Clock: it never sleeps; Sleep records the wait
// and moves the time forward.
type fakeClock = testkit.Clock

func newFakeClock() *fakeClock { return testkit.NewClock(time.Unix(1_700_000_000, 0)) }

// seeded returns a deterministic random source, safe for concurrent use.
func seeded(seed uint64) func() float64 {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return func() float64 {
		mu.Lock()
		defer mu.Unlock()
		return r.Float64()
	}
}

func constRand(v float64) func() float64 { return func() float64 { return v } }

func mustNew(t testing.TB, o Options) *Transport {
	t.Helper()
	tr, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
