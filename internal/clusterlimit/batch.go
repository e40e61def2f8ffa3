package clusterlimit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Batching: decisions of concurrent requests share round trips. Each
// request's decision is queued; a sender takes every decision waiting (up
// to maxBatch) and has Redis decide them all in one EVALSHA of the limit
// script, so a node under load pays one write and one read system call
// (on both sides), one command and one script call for many decisions
// instead of one each. A decision alone in flight skips the
// queue: one round trip from its own goroutine. Every wait stays bounded: the queue is
// queueLen long (full: the decision falls back at once), a caller waits
// for its answer no longer than its own timeout, and a script call's I/O is
// bounded by Options.Timeout.
const (
	maxBatch = 64   // decisions in one script call
	queueLen = 4096 // decisions waiting for a sender
	senders  = 2    // script calls in flight at once
)

// errQueueFull: the senders are behind (Redis slow or away); the
// decision falls back.
var errQueueFull = errors.New("clusterlimit: too many decisions waiting for Redis")

// call is one decision waiting for its answer.
type call struct {
	keys []string
	args []any
	v    any
	err  error
	done chan struct{}
}

// batcher holds the queue and its senders' lifecycle.
type batcher struct {
	queue    chan *call
	wg       sync.WaitGroup
	inflight atomic.Int64 // decisions between runLimit's start and end
}

// startSenders starts the senders; stopSenders (after stop is closed)
// waits for them. Decisions before startSenders, or after stop, go
// straight to Redis (runLimit).
func (l *Limiter) startSenders() {
	l.batch.queue = make(chan *call, queueLen)
	for range senders {
		l.batch.wg.Go(l.send)
	}
	l.batching.Store(true)
}

func (l *Limiter) stopSenders() {
	l.batching.Store(false)
	l.batch.wg.Wait()
	// Calls still queued are answered with an error: their callers have
	// stopped waiting (their timeout) or get the fallback now.
	for {
		select {
		case c := <-l.batch.queue:
			c.err = errors.New("clusterlimit: closed")
			close(c.done)
		default:
			return
		}
	}
}

// runLimit runs the limit script for one decision: directly when it is
// the only decision in flight (a batch of one would only add two goroutine
// hand-offs) or the senders do not run, else through the senders. It
// returns when ctx ends at the latest.
func (l *Limiter) runLimit(ctx context.Context, keys []string, args []any) (any, error) {
	n := l.batch.inflight.Add(1)
	defer l.batch.inflight.Add(-1)
	if n == 1 || !l.batching.Load() {
		v, err := l.run(ctx, l.limit, keys, args)
		if err != nil {
			return nil, err
		}
		return parseAnswers(v)
	}
	c := &call{keys: keys, args: args, done: make(chan struct{})}
	select {
	case l.batch.queue <- c:
	default:
		return nil, errQueueFull
	}
	select {
	case <-c.done:
		return c.v, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// send is one sender: it takes the next decision and every other one
// already waiting (up to maxBatch) and sends them as one script call.
func (l *Limiter) send() {
	batch := make([]*call, 0, maxBatch)
	for {
		select {
		case <-l.stop:
			return
		case c := <-l.batch.queue:
			batch = append(batch[:0], c)
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case c := <-l.batch.queue:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		l.sendBatch(batch)
		clear(batch)
	}
}

// sendBatch decides batch with one EVALSHA of the limit script (its
// requests one after the other, each as it would be alone; a restarted
// Redis's NOSCRIPT is answered by SCRIPT LOAD and the call again, within
// the same Timeout). A failure is counted once for the breaker, as one
// failed operation, and handed to every caller as a batchError.
func (l *Limiter) sendBatch(batch []*call) {
	ctx, cancel := context.WithTimeout(context.Background(), l.o.Timeout)
	defer cancel()
	nk, na := 0, 1
	for _, c := range batch {
		nk += len(c.keys)
		na += len(c.args) - 1
	}
	keys := make([]string, 0, nk)
	args := make([]any, 1, na)
	args[0] = len(batch)
	for _, c := range batch {
		keys = append(keys, c.keys...)
		args = append(args, c.args[1:]...)
	}
	v, err := l.run(ctx, l.limit, keys, args)
	var answers []any
	if err == nil {
		var ok bool
		if answers, ok = v.([]any); !ok || len(answers) != len(batch) {
			err = fmt.Errorf("clusterlimit: unexpected script answer %v", v)
		}
	}
	if err != nil {
		l.failed(err)
		err = batchError{err}
	}
	for i, c := range batch {
		if err != nil {
			c.err = err
		} else {
			c.v = answers[i]
		}
		close(c.done)
	}
}

// batchError is a batch's failure, already counted for the breaker.
type batchError struct{ error }

func (e batchError) Unwrap() error { return e.error }

// result is a script command's answer, a nil answer being an error.
func result(cmd *redis.Cmd) (any, error) {
	v, err := cmd.Result()
	if errors.Is(err, redis.Nil) {
		err = errors.New("clusterlimit: script returned nil")
	}
	return v, err
}
