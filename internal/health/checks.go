// Active checks in the Manager: the jobs handed to the bounded worker pool,
// the heap of due checks, dispatch and what a result changes. The loop and
// its locking are described in manager.go.

package health

import (
	"container/heap"
	"math/rand/v2"
	"time"
)

type job struct {
	m     *member
	addr  string
	check *CheckOptions
}

type result struct {
	m   *member
	err error
}

func (m *Manager) worker() {
	defer m.wg.Done()
	for {
		select {
		case <-m.stop:
			return
		case j := <-m.jobs:
			ctx, cancel := checkContext(m.ctx, m.o.Clock, j.check.Timeout)
			err := m.o.Probe(ctx, j.addr, j.check)
			cancel()
			// results has room for every outstanding job: never blocks.
			m.results <- result{m: j.m, err: err}
		}
	}
}

// dispatchLocked hands due checks to free workers.
func (m *Manager) dispatchLocked(now time.Time) {
	for len(m.mu.due) > 0 && m.mu.outstanding < m.o.Workers {
		mb := m.mu.due[0]
		if mb.nextCheck.After(now) {
			return
		}
		heap.Pop(&m.mu.due)
		c := mb.up.opts.Check
		if mb.removed || c == nil {
			continue
		}
		// Fixed rate: the next check is due one jittered interval after
		// this one was due, so a slow check does not stretch the schedule
		// (Timeout <= Interval). A schedule that fell behind restarts
		// from now.
		next := mb.nextCheck.Add(jitter(c.Interval))
		if next.Before(now) {
			next = now.Add(jitter(c.Interval))
		}
		mb.nextCheck = next
		heap.Push(&m.mu.due, mb)
		if mb.checking {
			continue // the previous check is still out; skip this one
		}
		mb.checking = true
		m.mu.outstanding++
		m.jobs <- job{m: mb, addr: mb.addr, check: c} // has room: outstanding < Workers
	}
}

// jitter returns d scaled by a uniform factor in (0.9, 1].
func jitter(d time.Duration) time.Duration {
	return d - time.Duration(rand.Int64N(int64(d)/10+1))
}

// resultLocked applies one check result.
func (m *Manager) resultLocked(r result, now time.Time) {
	mb := r.m
	mb.checking = false
	m.mu.outstanding--
	c := mb.up.opts.Check
	if mb.removed || c == nil {
		return
	}
	flipped, up, returned := mb.recordCheck(r.err == nil, c)
	reason := "check_passed"
	if r.err != nil {
		reason = "check_failed: " + r.err.Error()
	}
	if returned {
		mb.uneject(now)
		reason = "passed_checks_while_ejected"
	}
	if flipped || returned {
		if (up || returned) && mb.serving() {
			m.startRampLocked(mb, now)
		}
		m.transitionLocked(mb, reason, now)
	}
}

// dueHeap orders members by their next check.
type dueHeap []*member

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].nextCheck.Before(h[j].nextCheck) }

func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heapIdx, h[j].heapIdx = i, j
}

func (h *dueHeap) Push(x any) {
	mb := x.(*member)
	mb.heapIdx = len(*h)
	*h = append(*h, mb)
}

func (h *dueHeap) Pop() any {
	old := *h
	mb := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	mb.heapIdx = -1
	return mb
}
