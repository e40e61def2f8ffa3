package profiles

import (
	"sync"
	"time"
)

// Runner runs the capturer the serving configuration asks for: turned on
// by Start, replaced by Apply when the settings change, stopped by Stop. A
// replaced capturer's capture in progress finishes on its own goroutine
// (Stop waits for it; Apply does not). The zero value is ready; safe for
// concurrent use.
type Runner struct {
	mu      sync.Mutex
	running bool          // between Start and Stop
	key     any           // the settings the current capturer follows
	stop    chan struct{} // closes the current capturer's Run; nil while off
	wg      sync.WaitGroup
}

// Apply runs a capturer with o, or none when o is nil, unless the
// capturer running follows the same key (a comparable value naming the
// settings: the configuration block o was made from). shed is the
// shedding count (Capturer.Run's). New's error is returned; nothing then
// runs.
func (r *Runner) Apply(key any, o *Options, shed func() uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.running || (r.stop != nil && r.key == key) {
		return nil
	}
	if r.stop != nil {
		close(r.stop)
		r.stop = nil
	}
	r.key = key
	if o == nil {
		return nil
	}
	c, err := New(*o)
	if err != nil {
		return err
	}
	// The first look, here rather than at Run's first tick: a refusal in
	// between must count as shedding, not as the baseline.
	c.Tick(time.Now(), shed())
	stop := make(chan struct{})
	r.stop = stop
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		c.Run(stop, shed)
	}()
	return nil
}

// Start lets Apply run capturers (at the gateway's Start); the caller
// then Applies the serving settings.
func (r *Runner) Start() {
	r.mu.Lock()
	r.running = true
	r.mu.Unlock()
}

// Stop stops the capturer and waits for a capture in progress.
func (r *Runner) Stop() {
	r.mu.Lock()
	r.running = false
	if r.stop != nil {
		close(r.stop)
		r.stop = nil
	}
	r.mu.Unlock()
	r.Wait()
}

// Wait waits for every capturer stopped so far (and any running, which
// only Stop stops) to end.
func (r *Runner) Wait() { r.wg.Wait() }

// Running reports whether a capturer runs now.
func (r *Runner) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stop != nil
}
