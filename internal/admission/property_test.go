package admission

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/levee-gw/levee/internal/endpoint"
)

// TestPropertyRandomSequences runs random sequences of acquire, release,
// timeout and cancel across consumers and priorities, checking after each
// step that in-flight ≤ limit, queued ≤ MaxQueue, per-consumer state
// matches the requests outstanding, and at the end that every request got
// exactly one result and all state is gone.
func TestPropertyRandomSequences(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := rapid.IntRange(1, 4).Draw(rt, "limit")
		maxQueue := rapid.IntRange(0, 6).Draw(rt, "maxQueue")
		perConsumer := rapid.IntRange(-1, 5).Draw(rt, "perConsumer")
		const timeout = 100 * time.Millisecond
		h := newHarness(t, Options{MaxConcurrency: limit, MaxQueue: maxQueue, QueueTimeout: timeout, MaxPerConsumer: perConsumer})
		var all []*req
		check := func(step string) {
			s := h.l.Stats()
			if s.InFlight > limit {
				rt.Fatalf("%s: in flight %d > limit %d", step, s.InFlight, limit)
			}
			if s.Queued > maxQueue {
				rt.Fatalf("%s: queued %d > MaxQueue %d", step, s.Queued, maxQueue)
			}
			live := map[string]int{}
			inflight, pending := 0, 0
			for _, r := range all {
				st := r.state()
				switch st {
				case "admitted":
					inflight++
				case "pending":
					pending++
				default:
					continue
				}
				live[r.consumer]++
			}
			if inflight != s.InFlight || pending != s.Queued || len(live) != s.Consumers {
				rt.Fatalf("%s: model inflight %d pending %d consumers %d, limiter %+v", step, inflight, pending, len(live), s)
			}
		}
		// holds returns what each consumer has admitted or pending.
		holds := func() map[string]int {
			live := map[string]int{}
			for _, r := range all {
				if st := r.state(); st == "admitted" || st == "pending" {
					live[r.consumer]++
				}
			}
			return live
		}
		pick := func(want string) *req {
			var rs []*req
			for _, r := range all {
				if r.state() == want {
					rs = append(rs, r)
				}
			}
			if len(rs) == 0 {
				return nil
			}
			return rs[rapid.IntRange(0, len(rs)-1).Draw(rt, "which")]
		}
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for i := range steps {
			switch op := rapid.IntRange(0, 9).Draw(rt, "op"); {
			case op < 5:
				c := fmt.Sprintf("c%d", rapid.IntRange(0, 3).Draw(rt, "consumer"))
				p := Priority(rapid.IntRange(0, 2).Draw(rt, "priority"))
				before := holds()
				r := h.start(fmt.Sprint(i), c, p)
				all = append(all, r)
				// The per-consumer cap: a consumer at its cap gets more only
				// when it is the only consumer (then the cap protects no one).
				if st := r.state(); perConsumer > 0 && before[c] >= perConsumer && (st == "admitted" || st == "pending") {
					delete(before, c)
					if len(before) > 0 {
						rt.Fatalf("step %d: %s at its cap %d got %s while %d other consumers were active", i, c, perConsumer, st, len(before))
					}
				}
				if st := r.state(); st == "consumer_limit" {
					delete(before, c)
					if len(before) == 0 {
						rt.Fatalf("step %d: %s refused consumer_limit although it was the only consumer", i, c)
					}
				}
			case op < 8:
				if r := pick("admitted"); r != nil {
					h.release(r, endpoint.Outcome(rapid.IntRange(0, 3).Draw(rt, "outcome")))
				}
			case op < 9:
				h.clk.Advance(time.Duration(rapid.IntRange(1, 150).Draw(rt, "advance ms")) * time.Millisecond)
				h.settle()
			default:
				if r := pick("pending"); r != nil {
					h.cancel(r)
				}
			}
			check(fmt.Sprint("step ", i))
		}
		// End: time everything out, release everything.
		h.clk.Advance(timeout)
		h.settle()
		for _, r := range all {
			if r.state() == "admitted" {
				h.release(r, endpoint.Success)
			}
		}
		check("end")
		s := h.l.Stats()
		if s.InFlight != 0 || s.Queued != 0 || s.Consumers != 0 {
			rt.Fatalf("state left: %+v", s)
		}
		var refused uint64
		for _, r := range reasons {
			refused += s.Refused(r)
		}
		if got := s.Admitted + refused + s.Canceled; got != uint64(len(all)) {
			rt.Fatalf("%d requests, %d results (%+v)", len(all), got, s)
		}
		for _, r := range all {
			if r.state() == "pending" {
				rt.Fatalf("%s never ended", r.name)
			}
			select {
			case <-r.done:
				rt.Fatalf("%s ended twice", r.name)
			default:
			}
		}
	})
}
