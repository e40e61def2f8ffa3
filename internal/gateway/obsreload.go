package gateway

// Reloading the access log and the tracer (log.access, tracing). The
// handler holds both behind atomic pointers, like the table: a request
// loads each once and keeps it to its end, so a swap never waits for a
// request nor a request for a swap. A reload that changes one builds the
// new one first (a file that cannot be opened, an endpoint the exporter
// refuses: the reload fails naming the field and the old one keeps
// serving), starts it, swaps it in, then retires the old one on its own
// goroutine: the old access log writes every line queued before the swap
// to its own destination (lines of requests still in flight then go to
// the new log), the old tracer exports its queued spans within its export
// timeout. A reload that changes neither touches neither.

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/telemetry"
	"github.com/levee-gw/levee/internal/tracing"
	"github.com/prometheus/client_golang/prometheus"
)

// obsState is what rebuilding the access log and the tracer needs.
type obsState struct {
	out io.Writer // Options.LogOutput: the access log's "stderr"
	// dropped and tracing are registered once per process (New) and
	// shared by every access log and tracer built since.
	dropped prometheus.Counter
	tracing *tracing.Metrics
	// retiring counts the retired logs and tracers still flushing;
	// Shutdown waits for them.
	retiring sync.WaitGroup
	// running is set (under mu) when Start started the access log and the
	// tracer: from then on a new one is started before it serves, and an
	// old one is retired as a running one (still so while Shutdown drains,
	// before stopObservability). stopped is set by Shutdown under reloadMu:
	// a later reload leaves both alone.
	running, stopped bool
}

// init registers the counters every access log and tracer share.
func (o *obsState) init(out io.Writer, reg prometheus.Registerer) (err error) {
	o.out = out
	if o.dropped, err = telemetry.NewAccessLogDropped(reg); err != nil {
		return err
	}
	o.tracing, err = tracing.NewMetrics(reg)
	return err
}

// obsChange is a reload's new access log and tracer, built and not yet
// serving; a nil *obsChange changes nothing.
type obsChange struct {
	logChanged, tracingChanged bool
	log                        *telemetry.AccessLog // nil: off
	tracer                     *tracing.Tracer      // nil: off
	prevTracing                *config.Tracing      // the block the replaced tracer was built from
}

// prepareObservability builds what next changes of log.access and
// tracing (called under reloadMu, before the table is swapped).
func (g *Gateway) prepareObservability(next *config.Config) (*obsChange, error) {
	cur := g.fileCfg
	c := &obsChange{
		logChanged:     !sameAccessLog(next.Log, cur.Log),
		tracingChanged: !sameTracing(next.Tracing, cur.Tracing),
		prevTracing:    cur.Tracing,
	}
	if g.obsReload.stopped || (!c.logChanged && !c.tracingChanged) {
		return nil, nil
	}
	var err error
	if c.logChanged {
		if c.log, err = newAccessLog(next.Log, g.obsReload.out, g.logger, g.obsReload.dropped); err != nil {
			return nil, config.FieldError{Path: "log.access.output", Message: err.Error()}
		}
	}
	if c.tracingChanged {
		if c.tracer, err = newTracer(next.Tracing, g.obsReload.tracing, g.logger); err != nil {
			c.discard()
			return nil, err
		}
	}
	return c, nil
}

// discard releases what a refused reload built (neither ever served).
func (c *obsChange) discard() {
	if c == nil {
		return
	}
	if c.log != nil {
		go c.log.Run() // Close needs Run; nothing is queued
		c.log.Close()
	}
	if c.tracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = c.tracer.Shutdown(ctx) // never started: nothing to export
		cancel()
	}
}

// swapObservability makes c's access log and tracer serve and retires
// the ones they replace (after the reload's table swap). Under g.mu, so
// that Start and a reload agree on who starts them.
func (g *Gateway) swapObservability(c *obsChange) {
	if c == nil {
		return
	}
	g.mu.Lock()
	started := g.obsReload.running // not g.started: see running
	if c.logChanged {
		if started && c.log != nil {
			go c.log.Run()
		}
		old := g.handler.SwapAccessLog(c.log)
		if old != nil {
			g.obsReload.retiring.Add(1)
			go func() {
				defer g.obsReload.retiring.Done()
				if !started {
					go old.Run() // Start never ran it: Retire needs Run
				}
				old.Retire(c.log)
			}()
		}
	}
	if c.tracingChanged {
		if started && c.tracer != nil {
			c.tracer.Start()
		}
		if old := g.handler.SwapTracer(c.tracer); old != nil {
			g.obsReload.retiring.Add(1)
			go func() {
				defer g.obsReload.retiring.Done()
				g.stopTracer(old, c.prevTracing)
			}()
		}
	}
	g.mu.Unlock()
	g.logger.Info("access log and tracing reloaded", "log_access_changed", c.logChanged, "access_log", c.log != nil,
		"tracing_changed", c.tracingChanged, "tracing", c.tracer != nil)
}

// startObservability starts the access log and the tracer serving now
// (Start, under g.mu).
func (g *Gateway) startObservability() {
	g.obsReload.running = true
	if al := g.handler.AccessLog(); al != nil {
		go al.Run()
	}
	if tr := g.handler.Tracer(); tr != nil {
		tr.Start()
	}
}

// stopObservability writes the access log's last lines and exports the
// last spans (Shutdown, after the drain), waits for the retired ones, and
// keeps later reloads from building new ones.
func (g *Gateway) stopObservability() {
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	g.obsReload.stopped = true
	if al := g.handler.AccessLog(); al != nil {
		al.Close()
	}
	g.stopTracer(g.handler.Tracer(), g.fileCfg.Tracing)
	g.obsReload.retiring.Wait()
}
