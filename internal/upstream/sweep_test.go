package upstream

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestSweepInterval: a quarter of the shortest idle timeout, between 10ms
// and 1s.
func TestSweepInterval(t *testing.T) {
	for _, c := range []struct {
		idle []time.Duration
		want time.Duration
	}{
		{nil, time.Second},
		{[]time.Duration{90 * time.Second, 2 * time.Second}, 500 * time.Millisecond},
		{[]time.Duration{0, 8 * time.Second}, time.Second},
		{[]time.Duration{time.Millisecond}, 10 * time.Millisecond},
	} {
		if got := SweepInterval(c.idle); got != c.want {
			t.Errorf("SweepInterval(%v) = %v, want %v", c.idle, got, c.want)
		}
	}
}

// TestSweepStops: Sweep sweeps at once and at the interval sweep returns,
// and returns (closing done) once stop is closed.
func TestSweepStops(t *testing.T) {
	var n atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go Sweep(stop, done, func(time.Time) time.Duration { n.Add(1); return 10 * time.Millisecond })
	deadline := time.Now().Add(10 * time.Second)
	for n.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sweeps in 10s at a 10ms interval", n.Load())
		}
		time.Sleep(time.Millisecond) // polling for the state, with a deadline
	}
	close(stop)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Sweep did not return after stop")
	}
}
