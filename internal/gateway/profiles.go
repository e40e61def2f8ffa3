package gateway

import (
	"os"
	"path/filepath"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/profiles"
)

// profilesDir is where the captures go, under state_dir.
const profilesDir = "profiles"

// applyProfiles runs the capturer cfg's profiles block asks for
// (profiles.Runner: started by Start, replaced by a reload that changes
// the block, stopped by Shutdown), or none.
func (g *Gateway) applyProfiles(cfg *config.Config) {
	pc := cfg.Profiles
	var o *profiles.Options
	if pc.Enabled {
		o = &profiles.Options{
			Dir: filepath.Join(cfg.StateDir, profilesDir), CPUThreshold: pc.CPUThreshold, Sustain: pc.Sustain,
			OnShedding: pc.OnShedding, Interval: pc.Interval, Duration: pc.Duration, Keep: pc.Keep, MaxBytes: pc.MaxBytes,
			Record: g.recordProfile,
		}
	}
	if err := g.profiler.Apply(pc, o, g.shedCount); err != nil {
		g.logger.Error("automatic profiles are off", "error", err)
	}
}

// startProfiles turns the capturer on at Start.
func (g *Gateway) startProfiles(cfg *config.Config) {
	g.profiler.Start()
	g.applyProfiles(cfg)
}

// shedCount is the admission refusals of every upstream and data source
// serving now, summed: the shedding trigger fires when it grows. A
// consumer over its own share (consumer_limit) is not levee shedding.
// Limiters replaced by a reload start again from 0; the capturer takes a
// smaller count as its new baseline.
func (g *Gateway) shedCount() uint64 {
	var n uint64
	for _, up := range g.handler.Table().Upstreams() {
		if up.Admission == nil {
			continue
		}
		s := up.Admission.Stats()
		n += s.Refused(admission.ReasonConcurrencyLimit) + s.Refused(admission.ReasonQueueFull) +
			s.Refused(admission.ReasonQueueTimeout) + s.Refused(admission.ReasonShedPriority)
	}
	return n
}

// recordProfile counts and logs a capture or a skipped one.
func (g *Gateway) recordProfile(e profiles.Event) {
	g.profileMetrics.Record(e)
	switch {
	case e.Skipped == "":
		g.logger.Warn("captured a CPU profile and a goroutine dump", "trigger", e.Trigger, "why", e.Detail, "files", e.Files)
	case e.Err != nil:
		g.logger.Error("a triggered profile was not captured", "trigger", e.Trigger, "why", e.Detail, "skipped", e.Skipped, "error", e.Err)
	default:
		g.logger.Debug("a triggered profile was not captured", "trigger", e.Trigger, "why", e.Detail, "skipped", e.Skipped)
	}
}

// profileStoreView serves /api/v1/profiles from state_dir/profiles,
// whether captures are on now or not (earlier ones stay listed).
type profileStoreView struct{ g *Gateway }

func (v profileStoreView) dir() string {
	v.g.mu.Lock()
	defer v.g.mu.Unlock()
	return filepath.Join(v.g.cfg.StateDir, profilesDir)
}

func (v profileStoreView) List() ([]profiles.Capture, error) { return profiles.List(v.dir()) }

func (v profileStoreView) Open(name string) (*os.File, error) { return profiles.OpenIn(v.dir(), name) }
