// The limiter's counters as a snapshot (the collector in collector.go
// exports them).

package admission

// Stats is a snapshot of a Limiter's gauges and counters.
type Stats struct {
	InFlight  int // requests admitted and not yet Done
	Queued    int // requests waiting
	Limit     int // the limit in force
	Consumers int // consumers with requests in service or queued

	Admitted uint64 // requests admitted, at once or from the queue
	Canceled uint64 // requests whose context ended before admission

	// Refusals by reason.
	ConcurrencyLimit uint64
	QueueFull        uint64
	QueueTimeout     uint64
	ShedPriority     uint64
	ConsumerLimit    uint64
}

// Refused returns the count of refusals with reason r.
func (s Stats) Refused(r Reason) uint64 {
	switch r {
	case ReasonConcurrencyLimit:
		return s.ConcurrencyLimit
	case ReasonQueueFull:
		return s.QueueFull
	case ReasonQueueTimeout:
		return s.QueueTimeout
	case ReasonShedPriority:
		return s.ShedPriority
	case ReasonConsumerLimit:
		return s.ConsumerLimit
	}
	return 0
}

// Stats returns the limiter's current gauges and counters.
func (l *Limiter) Stats() Stats {
	l.mu.Lock()
	s := Stats{
		InFlight:  l.mu.inflight,
		Queued:    l.mu.queued,
		Limit:     l.mu.limit,
		Consumers: len(l.mu.consumers),
	}
	l.mu.Unlock()
	s.Admitted = l.admitted.Load()
	s.Canceled = l.canceled.Load()
	s.ConcurrencyLimit = l.refused[rConcurrency].Load()
	s.QueueFull = l.refused[rQueueFull].Load()
	s.QueueTimeout = l.refused[rQueueTimeout].Load()
	s.ShedPriority = l.refused[rShed].Load()
	s.ConsumerLimit = l.refused[rConsumer].Load()
	return s
}
