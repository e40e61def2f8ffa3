package drill

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The registry-down drill runs on a second declared upstream whose
// endpoints come from a file levee reads (discovery: {file: PATH}) and the
// drill writes: a registry the drill controls and can take away. Push has
// no lease in levee, so a "pushes stop" drill would hold by construction.

const (
	// registryDetect bounds the wait for levee to see one registry fault:
	// its file poll (1 s) plus the debounce and the confirmation of an
	// invalid read (50 ms each), with margin for a busy machine.
	registryDetect = 5 * time.Second
	// registryPoll is how often the admin API is read while waiting.
	registryPoll = 50 * time.Millisecond
)

// prepareRegistry checks that the registry upstream exists, is fed by a
// file, and serves nothing (no drill running on it, not a production
// upstream), and notes the file's path.
func (e *env) prepareRegistry(ctx context.Context) error {
	name := e.o.RegistryUpstream
	u, err := e.upstreamNamed(ctx, name)
	if err != nil {
		return fmt.Errorf("the registry drill upstream %q (declare it as docs/drills.md shows): %w", name, err)
	}
	if u.Discovery == nil || !strings.HasPrefix(u.Discovery.Source, "file:") {
		return fmt.Errorf("upstream %q must have discovery: {file: PATH} on a file the drill may write (docs/drills.md)", name)
	}
	if u.EndpointsTotal != 0 {
		return fmt.Errorf("upstream %q has %d endpoints: another drill is running, or it is not the registry drill upstream", name, u.EndpointsTotal)
	}
	e.registry = strings.TrimPrefix(u.Discovery.Source, "file:")
	if !filepath.IsAbs(e.registry) {
		return fmt.Errorf("upstream %q reads %q: want an absolute path", name, e.registry)
	}
	return nil
}

// writeRegistry replaces the registry file with body atomically (a
// temporary file in the same directory renamed into place), as a
// registry agent would.
func (e *env) writeRegistry(body string) error {
	tmp := e.registry + ".levee-drill.tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, e.registry); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// waitUpstream reads the registry upstream until ok holds or registryDetect
// passes; it returns the last state read and whether ok held.
func (e *env) waitUpstream(ctx context.Context, ok func(*upstreamState) bool) (*upstreamState, bool) {
	deadline := time.Now().Add(registryDetect)
	var last *upstreamState
	for {
		u, err := e.upstreamNamed(ctx, e.o.RegistryUpstream)
		if err == nil {
			last = u
			if ok(u) {
				return u, true
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return last, false
		}
		tm := time.NewTimer(registryPoll)
		select {
		case <-ctx.Done():
			tm.Stop()
		case <-tm.C:
		}
	}
}

// emptyRegistry writes an empty list to the registry file and confirms it
// past the delta guard (the drill's own upstream: nothing else is served
// from it), so the next drill finds the upstream empty.
func (e *env) emptyRegistry(ctx context.Context) error {
	if err := e.writeRegistry("[]\n"); err != nil {
		return err
	}
	u, ok := e.waitUpstream(ctx, func(u *upstreamState) bool {
		return u.EndpointsTotal == 0 || (u.Discovery != nil && u.Discovery.Held != nil && u.Discovery.Held.Instances == 0)
	})
	if !ok {
		return errors.New("levee did not take the empty list")
	}
	if u.EndpointsTotal != 0 {
		path := "/api/v1/upstreams/" + url.PathEscape(e.o.RegistryUpstream) + "/confirm"
		if _, err := e.o.Admin.Do(ctx, "POST", path, nil); err != nil {
			return fmt.Errorf("confirming the empty list: %w", err)
		}
		if _, ok := e.waitUpstream(ctx, func(u *upstreamState) bool { return u.EndpointsTotal == 0 }); !ok {
			return errors.New("the confirmed empty list was not applied")
		}
	}
	return nil
}

// registryFault is one way the registry goes away.
type registryFault struct {
	name string
	do   func() error
}

// registryDown: the registry levee reads goes away while traffic runs.
func registryDown(ctx context.Context, e *env, r *Result) error {
	a, err := e.backend()
	if err != nil {
		return err
	}
	b, err := e.backend()
	if err != nil {
		return err
	}
	key, err := e.appFor(ctx, "client", e.o.RegistryRoute, "")
	if err != nil {
		return err
	}
	good := fmt.Sprintf("[{\"address\":%q},{\"address\":%q}]\n", a.addr, b.addr)
	e.written = true
	if err := e.writeRegistry(good); err != nil {
		return fmt.Errorf("writing the registry file %s: %w", e.registry, err)
	}
	if _, ok := e.waitUpstream(ctx, func(u *upstreamState) bool { return u.EndpointsTotal == 2 }); !ok {
		return fmt.Errorf("levee did not serve the 2 endpoints written to %s within %s", e.registry, registryDetect)
	}
	label := `upstream="` + e.o.RegistryUpstream + `"`
	refused := func() float64 {
		v, _ := e.metric(ctx, "levee_discovery_updates_total", label, `result="refused"`)
		return v
	}
	refused0 := refused()

	faults := []registryFault{
		{"removed", func() error { return os.Remove(e.registry) }},
		{"garbage", func() error { return os.WriteFile(e.registry, []byte("{\"address\": \x00\xff not json"), 0o644) }},
		{"emptied", func() error { return os.WriteFile(e.registry, nil, 0o644) }},
	}
	// The faults come at 1/5, 2/5 and 3/5 of the traffic, the registry
	// back at 4/5: each is given a fifth of the duration to be seen.
	step := e.o.Duration / time.Duration(len(faults)+2)
	var (
		hitsAtDown  [2]int64
		detected    []string // faults levee counted as a refused update and reported
		detectMs    []float64
		stillServed = true // endpoints_total stayed 2 while the registry was down
		lastErr     string
		recovered   bool
	)
	chaos := make(chan struct{})
	begin := time.Now()
	go func() {
		defer close(chaos)
		for i, f := range faults {
			if !sleepUntil(ctx, begin.Add(time.Duration(i+1)*step)) {
				return
			}
			if i == 0 {
				hitsAtDown = [2]int64{a.hits.Load(), b.hits.Load()}
			}
			before := refused()
			at := time.Now()
			if err := f.do(); err != nil {
				lastErr = f.name + ": " + err.Error()
				return
			}
			u, ok := e.waitUpstream(ctx, func(u *upstreamState) bool {
				return u.Discovery != nil && u.Discovery.LastError != "" && refused() > before
			})
			if u != nil && u.EndpointsTotal != 2 {
				stillServed = false
			}
			if ok {
				detected = append(detected, f.name)
				detectMs = append(detectMs, float64(time.Since(at).Milliseconds()))
				lastErr = u.Discovery.LastError
			}
		}
		if !sleepUntil(ctx, begin.Add(time.Duration(len(faults)+1)*step)) {
			return
		}
		if err := e.writeRegistry(good); err != nil {
			return
		}
		_, recovered = e.waitUpstream(ctx, func(u *upstreamState) bool {
			return u.Discovery != nil && u.Discovery.LastError == "" && u.EndpointsTotal == 2
		})
	}()
	t := e.driveTo(ctx, e.o.RegistryPrefix, key, e.o.Rate/4, e.o.Duration, nil)
	<-chaos
	refused1 := refused()
	served := [2]int64{a.hits.Load() - hitsAtDown[0], b.hits.Load() - hitsAtDown[1]}
	worst := 0.0
	for _, ms := range detectMs {
		worst = max(worst, ms)
	}

	r.fig("requests", float64(t.sent), "")
	r.fig("client_failures", float64(t.failures()), "")
	r.fig("registry_faults", float64(len(faults)), "")
	r.fig("registry_faults_reported", float64(len(detected)), "")
	r.fig("slowest_fault_reported_after", worst, "ms")
	r.fig("levee_discovery_updates_total_refused_increase", refused1-refused0, "")
	r.fig("served_by_endpoint_1_while_down", float64(served[0]), "requests")
	r.fig("served_by_endpoint_2_while_down", float64(served[1]), "requests")

	r.check(len(detected) == len(faults), "levee reported %d of the %d registry faults (%v) as a refused update with last_error in the admin API within %s (last: %q)",
		len(detected), len(faults), detected, registryDetect, lastErr)
	r.check(stillServed, "the upstream's endpoints changed while the registry was down: the last good set was not kept")
	r.check(served[0] > 0 && served[1] > 0, "the last good set was not served while the registry was down (%d, %d requests)", served[0], served[1])
	r.check(t.sent > 0 && t.failures() == 0, "%d of %d requests failed while the registry was down:%s", t.failures(), t.sent, t.summary())
	r.check(recovered || ctx.Err() != nil, "the registry came back and levee still reports it failing (last_error set) after %s", registryDetect)
	return nil
}

// sleepUntil waits until t (pacing the drill's steps, not a state); false
// when ctx ends first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	tm := time.NewTimer(time.Until(t))
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
