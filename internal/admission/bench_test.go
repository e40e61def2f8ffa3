package admission

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/endpoint"
)

func BenchmarkAcquireRelease(b *testing.B) {
	for _, adaptive := range []bool{false, true} {
		name := "static"
		o := Options{MaxConcurrency: 1 << 20, MaxQueue: 128, QueueTimeout: time.Second}
		if adaptive {
			name = "adaptive"
			o.Adaptive = &AdaptiveOptions{Min: 1 << 19, Max: 1 << 20}
		}
		b.Run(name, func(b *testing.B) {
			l, err := New(o)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				r, err := l.Acquire(ctx, "app", Normal)
				if err != nil {
					b.Fatal(err)
				}
				r.Done(endpoint.Success)
			}
		})
	}
}

func BenchmarkAcquireReleaseParallel(b *testing.B) {
	l, err := New(Options{MaxConcurrency: 1 << 20, MaxQueue: 128, QueueTimeout: time.Second, MaxPerConsumer: -1})
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = "app-" + strconv.Itoa(i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			r, err := l.Acquire(ctx, keys[i%len(keys)], Normal)
			if err != nil {
				b.Error(err)
				return
			}
			r.Done(endpoint.Success)
			i++
		}
	})
}

// refusingLimiter returns a limiter whose slot is held and whose queue is
// full of one consumer's waiters; the caller must call stop.
func refusingLimiter(b *testing.B) (l *Limiter, stop func()) {
	h := newHarness(b, Options{MaxConcurrency: 1, MaxQueue: 64, QueueTimeout: time.Hour, MaxPerConsumer: -1})
	hold := h.start("hold", "flood", Normal)
	for range 64 {
		h.start("q", "flood", Normal)
	}
	return h.l, func() {
		h.clk.Advance(time.Hour)
		h.settle()
		h.release(hold, endpoint.Success)
	}
}

func BenchmarkRefuse(b *testing.B) {
	for _, tc := range []struct {
		name     string
		consumer string
		p        Priority
	}{
		{"queue_full", "flood", Normal},
		{"shed_priority", "other", Sheddable},
	} {
		b.Run(tc.name, func(b *testing.B) {
			l, stop := refusingLimiter(b)
			defer stop()
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Acquire(ctx, tc.consumer, tc.p); err == nil {
					b.Fatal("admitted")
				}
			}
		})
	}
}

func BenchmarkRefuseParallel(b *testing.B) {
	l, stop := refusingLimiter(b)
	defer stop()
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := l.Acquire(ctx, "flood", Normal); err == nil {
				b.Error("admitted")
				return
			}
		}
	})
}

// BenchmarkRefuseShortWait: the short-wait bound (rule 5). A consumer whose
// sub-queue has stood for QueueInterval, with no grants out of the queue,
// may keep one waiter; every further request of it is refused at once.
func BenchmarkRefuseShortWait(b *testing.B) {
	h := newHarness(b, Options{MaxConcurrency: 1, MaxQueue: 64, QueueTimeout: time.Hour,
		QueueTarget: time.Hour, QueueInterval: 100 * time.Millisecond, MaxPerConsumer: -1})
	hold := h.start("hold", "flood", Normal)
	h.start("q1", "flood", Normal)
	h.start("q2", "flood", Normal)
	h.clk.Advance(100 * time.Millisecond)
	h.settle()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, err := h.l.Acquire(ctx, "flood", Normal)
		if ref, ok := err.(*Refusal); !ok || ref.Reason != ReasonQueueFull {
			b.Fatalf("got %v, want a queue_full refusal", err)
		}
	}
	b.StopTimer()
	h.clk.Advance(2 * time.Hour)
	h.settle()
	h.release(hold, endpoint.Success)
}
