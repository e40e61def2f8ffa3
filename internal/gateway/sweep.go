package gateway

import "time"

// sweepIdle closes expired idle upstream connections until stop is closed,
// so that without traffic none outlives its upstream's idle timeout by more
// than the sweep interval. It is the one goroutine that does so.
func (g *Gateway) sweepIdle(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	g.mu.Lock()
	every := g.pools.sweepIdle(time.Now())
	g.mu.Unlock()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			g.mu.Lock()
			next := g.pools.sweepIdle(now)
			g.mu.Unlock()
			if next != every {
				every = next
				tick.Reset(every)
			}
		}
	}
}
