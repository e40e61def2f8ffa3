// Package profiles captures a CPU profile and a goroutine dump by itself
// when levee is in trouble: when the process's CPU use has stayed above a
// share of GOMAXPROCS for a while, or when admission control starts
// shedding. In the outage levee was written after (docs/balancing.md: a
// gcd loop spinning on a registry weight of "0"; TestIncidentReplayed
// replays it) a flame graph found the spinning loop about two hours in; a
// profile taken in the first minute, without anyone asking, is what this
// package is for (docs/profiles.md).
//
// Captures are bounded three ways: at most one per Interval (the first
// trigger wins, the rest are counted as skipped), the newest Keep kept,
// and the files' total size at most MaxBytes (the oldest captures go
// first). A capture runs on its own goroutine; the request path never
// waits for it. Decisions take the time as a parameter (Tick), so tests
// step a fake clock and a fake CPU meter.
package profiles

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"
)

// Triggers name why a capture was taken: the trigger label of
// levee_profiles_captured_total and part of each file's name.
const (
	TriggerCPU      = "cpu"      // CPU use above the threshold for Sustain
	TriggerShedding = "shedding" // admission started refusing requests
)

// Options configure a Capturer. Zero durations and counts take the
// defaults below.
type Options struct {
	// Dir holds the captures (created 0700 if missing).
	Dir string
	// CPUThreshold is the share of GOMAXPROCS's CPU time above which the
	// process counts as busy, 0 < t <= 1. 0: the CPU trigger is off.
	CPUThreshold float64
	// Sustain is how long CPU use must stay above the threshold, measured
	// over whole ticks, before a capture. Default 10s.
	Sustain time.Duration
	// OnShedding turns the shedding trigger on.
	OnShedding bool
	// Interval is the least time between two captures. Default 10m.
	Interval time.Duration
	// Duration is how long a CPU profile records. Default 10s.
	Duration time.Duration
	// Keep is how many captures are kept, newest first. Default 10.
	Keep int
	// MaxBytes bounds the captures' files together. Default 64 MiB.
	MaxBytes int64
	// CPUTime returns the process's CPU time so far (user + system).
	// Default: getrusage (cputime_unix.go).
	CPUTime func() time.Duration
	// Procs is GOMAXPROCS. Default runtime.GOMAXPROCS(0).
	Procs int
	// Record receives each capture's outcome for the metrics and the log:
	// trigger and file names, or a skip with its reason. Optional.
	Record func(Event)
}

const (
	defaultSustain  = 10 * time.Second
	defaultInterval = 10 * time.Minute
	defaultDuration = 10 * time.Second
	defaultKeep     = 10
	defaultMaxBytes = 64 << 20
	// maxGoroutineDump bounds one goroutine dump: a process with a million
	// goroutines would otherwise write gigabytes.
	maxGoroutineDump = 16 << 20
	// maxListed bounds the files List reads from Dir, whatever else was
	// put there.
	maxListed = 1000
)

// Event is one capture or skipped capture, for the caller's metrics and log.
type Event struct {
	Trigger string
	// Skipped is why no capture was taken ("" when one was): "interval"
	// (one was taken less than Interval ago), "busy" (a capture or another
	// CPU profile is running), or "error".
	Skipped string
	Err     error
	Files   []string // the files written, base names
	Detail  string   // what tripped the trigger, for the log
}

// Capture is one capture on disk: a CPU profile and a goroutine dump
// taken together.
type Capture struct {
	ID      string    `json:"id"` // the files' common prefix
	Time    time.Time `json:"time"`
	Trigger string    `json:"trigger"`
	Files   []File    `json:"files"`
}

// File is one file of a capture.
type File struct {
	Name  string `json:"name"`
	Bytes int64  `json:"bytes"`
}

// Capturer watches for the triggers and takes captures. Safe for
// concurrent use.
type Capturer struct {
	o Options

	mu        sync.Mutex
	last      time.Time     // the last capture's start; zero: none yet
	running   bool          // a capture is being written
	busySince time.Time     // the first tick of the current busy stretch; zero: not busy
	prevTick  time.Time     // the previous tick, zero before the first
	prevCPU   time.Duration // CPU time at the previous tick
	prevShed  uint64        // the shed count at the previous tick
	wg        sync.WaitGroup
}

// New returns a Capturer writing to o.Dir.
func New(o Options) (*Capturer, error) {
	if o.Dir == "" {
		return nil, errors.New("profiles: no directory")
	}
	if o.CPUThreshold < 0 || o.CPUThreshold > 1 {
		return nil, fmt.Errorf("profiles: CPU threshold %v: must be in (0, 1], or 0 for off", o.CPUThreshold)
	}
	if o.Sustain <= 0 {
		o.Sustain = defaultSustain
	}
	if o.Interval <= 0 {
		o.Interval = defaultInterval
	}
	if o.Duration <= 0 {
		o.Duration = defaultDuration
	}
	if o.Keep <= 0 {
		o.Keep = defaultKeep
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = defaultMaxBytes
	}
	if o.CPUTime == nil {
		o.CPUTime = processCPUTime
	}
	if o.Procs <= 0 {
		o.Procs = runtime.GOMAXPROCS(0)
	}
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("profiles: %w", err)
	}
	return &Capturer{o: o}, nil
}

// Tick takes one observation at now: the shed count so far (any counter of
// admission refusals that only grows). It starts a capture when a trigger
// fires and the last capture is at least Interval old. The caller ticks
// about once a second (Run does).
func (c *Capturer) Tick(now time.Time, shed uint64) {
	cpu := c.o.CPUTime()
	c.mu.Lock()
	trigger, detail := "", ""
	if !c.prevTick.IsZero() && now.After(c.prevTick) {
		share := float64(cpu-c.prevCPU) / float64(now.Sub(c.prevTick)) / float64(c.o.Procs)
		switch {
		case c.o.CPUThreshold == 0 || share < c.o.CPUThreshold:
			c.busySince = time.Time{}
		case c.busySince.IsZero():
			c.busySince = c.prevTick
		}
		if !c.busySince.IsZero() && now.Sub(c.busySince) >= c.o.Sustain {
			trigger = TriggerCPU
			detail = fmt.Sprintf("CPU %.0f%% of %d cores for %v (threshold %.0f%%)", 100*share, c.o.Procs, now.Sub(c.busySince).Round(time.Second), 100*c.o.CPUThreshold)
		}
		if c.o.OnShedding && shed > c.prevShed && trigger == "" {
			trigger = TriggerShedding
			detail = fmt.Sprintf("admission refused %d requests since the last look", shed-c.prevShed)
		}
	}
	c.prevTick, c.prevCPU, c.prevShed = now, cpu, shed
	if trigger == "" {
		c.mu.Unlock()
		return
	}
	skip := ""
	switch {
	case c.running:
		skip = "busy"
	case !c.last.IsZero() && now.Sub(c.last) < c.o.Interval:
		skip = "interval"
	}
	if skip != "" {
		c.mu.Unlock()
		c.record(Event{Trigger: trigger, Skipped: skip, Detail: detail})
		return
	}
	c.running, c.last, c.busySince = true, now, time.Time{}
	c.wg.Add(1)
	c.mu.Unlock()
	go c.capture(now, trigger, detail)
}

// Wait returns when no capture is being written: for shutdown and tests.
func (c *Capturer) Wait() { c.wg.Wait() }

// Run ticks once a second until stop is closed, reading the shed count
// from shed (nil: none), then waits for a capture in progress.
func (c *Capturer) Run(stop <-chan struct{}, shed func() uint64) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	defer c.Wait()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			var n uint64
			if shed != nil {
				n = shed()
			}
			c.Tick(now, n)
		}
	}
}

func (c *Capturer) record(e Event) {
	if c.o.Record != nil {
		c.o.Record(e)
	}
}

// capture writes the CPU profile (Duration long) and then the goroutine
// dump, prunes old captures and reports.
func (c *Capturer) capture(at time.Time, trigger, detail string) {
	defer c.wg.Done()
	defer func() {
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
	}()
	id := at.UTC().Format("20060102T150405Z") + "-" + trigger
	cpuName, dumpName := id+".cpu.pprof", id+".goroutines.txt"
	// The goroutines first, as they are when the trigger fired; then the
	// CPU profile, whose file appears last: List shows a capture only
	// once its CPU profile is there, so never half of one.
	var files []string
	dumpPath := filepath.Join(c.o.Dir, dumpName)
	if err := writeFile(dumpPath, func(w io.Writer) error {
		return pprof.Lookup("goroutine").WriteTo(&capped{w: w, left: maxGoroutineDump}, 2)
	}); err == nil {
		files = append(files, dumpName)
	}
	if err := c.writeCPU(filepath.Join(c.o.Dir, cpuName)); err != nil {
		os.Remove(dumpPath)
		skip := "error"
		if errors.Is(err, errProfiling) {
			skip = "busy"
		}
		c.record(Event{Trigger: trigger, Skipped: skip, Err: err, Detail: detail})
		return
	}
	files = append([]string{cpuName}, files...)
	c.prune()
	c.record(Event{Trigger: trigger, Files: files, Detail: detail})
}

// errProfiling is pprof's refusal when a CPU profile is already running
// (someone is reading /debug/pprof/profile, say).
var errProfiling = errors.New("a CPU profile is already being recorded")

func (c *Capturer) writeCPU(path string) error {
	return writeFile(path, func(w io.Writer) error {
		if err := pprof.StartCPUProfile(w); err != nil {
			return fmt.Errorf("%w: %v", errProfiling, err)
		}
		time.Sleep(c.o.Duration) // the profile records while we wait: this goroutine's only job
		pprof.StopCPUProfile()
		return nil
	})
}

// writeFile writes path through fill: into a dot file beside it, which
// List never shows, renamed to path once complete, so a capture is never
// listed (or served) half written. Nothing is left if fill fails.
func writeFile(path string, fill func(io.Writer) error) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".partial")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = fill(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// capped writes at most left bytes and then drops the rest silently: a
// truncated goroutine dump is still worth reading.
type capped struct {
	w    io.Writer
	left int64
}

func (c *capped) Write(p []byte) (int, error) {
	n := len(p)
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	if len(p) > 0 {
		if _, err := c.w.Write(p); err != nil {
			return 0, err
		}
		c.left -= int64(len(p))
	}
	return n, nil
}

// prune removes the oldest captures beyond Keep, then the oldest while
// the files together exceed MaxBytes (the newest capture always stays).
func (c *Capturer) prune() {
	caps, _ := c.List()
	var total int64
	for i, cp := range caps { // newest first
		size := int64(0)
		for _, f := range cp.Files {
			size += f.Bytes
		}
		if i > 0 && (i >= c.o.Keep || total+size > c.o.MaxBytes) {
			for _, f := range cp.Files {
				os.Remove(filepath.Join(c.o.Dir, f.Name))
			}
			continue
		}
		total += size
	}
}

// List returns the captures in Dir, newest first.
func (c *Capturer) List() ([]Capture, error) { return List(c.o.Dir) }

// Open opens one capture file by name (see OpenIn).
func (c *Capturer) Open(name string) (*os.File, error) { return OpenIn(c.o.Dir, name) }

// List returns the captures in dir, newest first (at most maxListed files
// are read), each once its CPU profile is written; a directory that does
// not exist holds none.
func List(dir string) ([]Capture, error) {
	d, err := os.Open(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	entries, err := d.ReadDir(maxListed)
	d.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	byID := map[string]*Capture{}
	for _, e := range entries {
		name := e.Name()
		id, _, ok := strings.Cut(name, ".")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		stamp, trigger, ok := strings.Cut(id, "-")
		at, err := time.Parse("20060102T150405Z", stamp)
		if !ok || err != nil {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		cp := byID[id]
		if cp == nil {
			cp = &Capture{ID: id, Time: at, Trigger: trigger}
			byID[id] = cp
		}
		cp.Files = append(cp.Files, File{Name: name, Bytes: info.Size()})
	}
	out := make([]Capture, 0, len(byID))
	for _, cp := range byID {
		if !slices.ContainsFunc(cp.Files, func(f File) bool { return f.Name == cp.ID+".cpu.pprof" }) {
			continue // being written: its CPU profile appears last
		}
		slices.SortFunc(cp.Files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
		out = append(out, *cp)
	}
	slices.SortFunc(out, func(a, b Capture) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return strings.Compare(b.ID, a.ID)
	})
	return out, nil
}

// OpenIn opens one capture file of dir by name for reading, refusing any
// name that is not a plain file name (no path separators, no dot files):
// os.ErrNotExist.
func OpenIn(dir, name string) (*os.File, error) {
	if name == "" || name != filepath.Base(name) || strings.HasPrefix(name, ".") || strings.ContainsAny(name, `/\`) {
		return nil, os.ErrNotExist
	}
	f, err := os.Open(filepath.Join(dir, name))
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, os.ErrNotExist
	}
	return f, nil
}
