package upstream

import "time"

// Sweep closes expired idle upstream connections until stop is closed
// (then it closes done), so that without traffic none outlives its
// upstream's idle timeout by more than the sweep interval. sweep closes
// the expired ones of every transport serving at now and returns the
// interval to the next sweep (SweepInterval). It is the one goroutine that
// does so.
func Sweep(stop <-chan struct{}, done chan<- struct{}, sweep func(now time.Time) time.Duration) {
	defer close(done)
	every := sweep(time.Now())
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			if next := sweep(now); next != every {
				every = next
				tick.Reset(every)
			}
		}
	}
}

// SweepInterval is how long to wait between sweeps for transports with
// these idle timeouts: a quarter of the shortest, between 10ms and 1s, so
// a connection lingers at most that long past its timeout.
func SweepInterval(idle []time.Duration) time.Duration {
	next := time.Second
	for _, d := range idle {
		if d := d / 4; d > 0 && d < next {
			next = d
		}
	}
	return max(next, 10*time.Millisecond)
}
