package profiles

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"
)

// meter is a fake CPU clock the test advances.
type meter struct {
	mu  sync.Mutex
	cpu time.Duration
}

func (m *meter) add(d time.Duration) { m.mu.Lock(); m.cpu += d; m.mu.Unlock() }
func (m *meter) read() time.Duration { m.mu.Lock(); defer m.mu.Unlock(); return m.cpu }

// events collects what the capturer reported.
type events struct {
	mu sync.Mutex
	e  []Event
}

func (ev *events) add(e Event) { ev.mu.Lock(); ev.e = append(ev.e, e); ev.mu.Unlock() }
func (ev *events) all() []Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return append([]Event(nil), ev.e...)
}

var t0 = time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)

func newTest(t *testing.T, o Options) (*Capturer, *meter, *events) {
	t.Helper()
	m, ev := &meter{}, &events{}
	o.Dir = filepath.Join(t.TempDir(), "profiles")
	o.CPUTime, o.Record, o.Procs = m.read, ev.add, 2
	if o.Duration == 0 {
		o.Duration = 20 * time.Millisecond
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Wait)
	return c, m, ev
}

// TestCPUTrigger: CPU use above the threshold for Sustain (whole ticks)
// starts one capture, not before; a dip below it starts the count again.
func TestCPUTrigger(t *testing.T) {
	c, m, ev := newTest(t, Options{CPUThreshold: 0.5, Sustain: 3 * time.Second})
	busy := func(sec int) { m.add(1500 * time.Millisecond); c.Tick(t0.Add(time.Duration(sec)*time.Second), 0) } // 75 % of 2 cores
	idle := func(sec int) { m.add(200 * time.Millisecond); c.Tick(t0.Add(time.Duration(sec)*time.Second), 0) }  // 10 %
	c.Tick(t0, 0)
	busy(1)
	busy(2)
	idle(3) // the stretch ends
	busy(4)
	busy(5)
	c.Wait()
	if n := len(ev.all()); n != 0 {
		t.Fatalf("captured after 2 s busy, a dip, and 2 s busy: %+v", ev.all())
	}
	busy(6) // busy over the 3 s since tick 3
	c.Wait()
	got := ev.all()
	if len(got) != 1 || got[0].Trigger != TriggerCPU || got[0].Skipped != "" || len(got[0].Files) != 2 {
		t.Fatalf("events %+v, want one CPU capture with two files", got)
	}
	if !strings.Contains(got[0].Detail, "CPU 75% of 2 cores") {
		t.Errorf("detail %q", got[0].Detail)
	}
	caps, err := c.List()
	if err != nil || len(caps) != 1 || caps[0].Trigger != TriggerCPU || !caps[0].Time.Equal(t0.Add(6*time.Second)) {
		t.Fatalf("List = %+v, %v", caps, err)
	}
	checkFiles(t, c, caps[0])
}

// checkFiles: a capture's CPU profile is a gzip'd pprof and its dump
// lists goroutines with their stacks.
func checkFiles(t *testing.T, c *Capturer, cp Capture) {
	t.Helper()
	for _, f := range cp.Files {
		r, err := c.Open(f.Name)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		r.Close()
		switch {
		case strings.HasSuffix(f.Name, ".cpu.pprof"):
			if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
				t.Errorf("%s is not gzip'd pprof: % x", f.Name, b[:min(len(b), 4)])
			}
		case strings.HasSuffix(f.Name, ".goroutines.txt"):
			if !bytes.Contains(b, []byte("goroutine ")) || !bytes.Contains(b, []byte("profiles.")) {
				t.Errorf("%s is not a goroutine dump: %.200s", f.Name, b)
			}
		default:
			t.Errorf("unexpected file %s", f.Name)
		}
		if int64(len(b)) != f.Bytes {
			t.Errorf("%s: listed %d bytes, holds %d", f.Name, f.Bytes, len(b))
		}
	}
}

// TestIntervalAndShedding: shedding (the shed count growing) triggers a
// capture; another trigger within Interval is skipped and reported; after
// Interval the next one is taken. A shed count that does not grow triggers
// nothing.
func TestIntervalAndShedding(t *testing.T) {
	c, _, ev := newTest(t, Options{OnShedding: true, Interval: time.Minute})
	c.Tick(t0, 5) // the first look only sets the baseline
	c.Tick(t0.Add(time.Second), 5)
	c.Wait()
	if n := len(ev.all()); n != 0 {
		t.Fatalf("captured with no new refusals: %+v", ev.all())
	}
	c.Tick(t0.Add(2*time.Second), 9)
	c.Wait()
	c.Tick(t0.Add(30*time.Second), 12)
	c.Wait()
	c.Tick(t0.Add(63*time.Second), 13)
	c.Wait()
	got := ev.all()
	if len(got) != 3 || got[0].Skipped != "" || got[1].Skipped != "interval" || got[2].Skipped != "" {
		t.Fatalf("events %+v, want capture, skip (interval), capture", got)
	}
	for _, e := range got {
		if e.Trigger != TriggerShedding {
			t.Errorf("trigger %q", e.Trigger)
		}
	}
	if caps, _ := c.List(); len(caps) != 2 {
		t.Errorf("%d captures listed, want 2", len(caps))
	}
}

// TestPrune: at most Keep captures stay, newest first, and their files
// together stay within MaxBytes (the newest always stays).
func TestPrune(t *testing.T) {
	c, _, _ := newTest(t, Options{OnShedding: true, Interval: time.Second, Keep: 2})
	c.Tick(t0, 0)
	for i := 1; i <= 4; i++ {
		c.Tick(t0.Add(time.Duration(i)*time.Second), uint64(i))
		c.Wait()
	}
	caps, _ := c.List()
	if len(caps) != 2 || !caps[0].Time.Equal(t0.Add(4*time.Second)) || !caps[1].Time.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("kept %+v, want the captures of seconds 4 and 3", caps)
	}

	small, _, _ := newTest(t, Options{OnShedding: true, Interval: time.Second, MaxBytes: 1})
	small.Tick(t0, 0)
	for i := 1; i <= 3; i++ {
		small.Tick(t0.Add(time.Duration(i)*time.Second), uint64(i))
		small.Wait()
	}
	if caps, _ := small.List(); len(caps) != 1 || !caps[0].Time.Equal(t0.Add(3*time.Second)) {
		t.Fatalf("with MaxBytes 1 kept %+v, want only the newest", caps)
	}
}

// TestBusyProfiler: while another CPU profile runs (someone reading
// /debug/pprof/profile), a capture is skipped as busy and leaves no file.
// When one already runs in this test binary (go test -cpuprofile), that
// one makes the profiler busy: the test runs all the same, never skips.
func TestBusyProfiler(t *testing.T) {
	if err := pprof.StartCPUProfile(io.Discard); err == nil {
		defer pprof.StopCPUProfile()
	} else {
		t.Logf("a CPU profile already runs in this test binary (%v): it keeps the profiler busy", err)
	}
	c, _, ev := newTest(t, Options{OnShedding: true})
	c.Tick(t0, 0)
	c.Tick(t0.Add(time.Second), 1)
	c.Wait()
	got := ev.all()
	if len(got) != 1 || got[0].Skipped != "busy" || got[0].Err == nil {
		t.Fatalf("events %+v, want one skip (busy) with its error", got)
	}
	if caps, _ := c.List(); len(caps) != 0 {
		t.Errorf("a skipped capture left %+v", caps)
	}
}

// TestOpenRefusesPaths: only plain names of files in the directory open.
func TestOpenRefusesPaths(t *testing.T) {
	c, _, _ := newTest(t, Options{})
	if err := os.WriteFile(filepath.Join(filepath.Dir(c.o.Dir), "secret"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"", "../secret", ".", "..", "a/b", `..\secret`, ".hidden"} {
		if f, err := c.Open(name); err == nil {
			f.Close()
			t.Errorf("Open(%q) succeeded", name)
		}
	}
}

// TestNewRefuses: a threshold outside (0, 1] and no directory are errors.
func TestNewRefuses(t *testing.T) {
	for _, o := range []Options{{}, {Dir: t.TempDir(), CPUThreshold: 1.5}, {Dir: t.TempDir(), CPUThreshold: -0.1}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// TestNeverListedHalfWritten: while a capture is written, List shows
// nothing of it (each file is written under a dot name and renamed when
// complete, the CPU profile last); afterwards both files, at their final
// sizes, and no leftover.
func TestNeverListedHalfWritten(t *testing.T) {
	c, _, _ := newTest(t, Options{OnShedding: true, Duration: 300 * time.Millisecond})
	c.Tick(t0, 0)
	c.Tick(t0.Add(time.Second), 1)
	for {
		c.mu.Lock()
		running := c.running
		c.mu.Unlock()
		if !running {
			break
		}
		// Listed before running is cleared only once complete: both
		// files, renamed at their final sizes.
		if caps, _ := c.List(); len(caps) != 0 && len(caps[0].Files) != 2 {
			t.Fatalf("listed while being written: %+v", caps)
		}
		time.Sleep(5 * time.Millisecond)
	}
	caps, _ := c.List()
	if len(caps) != 1 || len(caps[0].Files) != 2 {
		t.Fatalf("after the capture: %+v", caps)
	}
	checkFiles(t, c, caps[0])
	entries, _ := os.ReadDir(c.o.Dir)
	if len(entries) != 2 {
		t.Errorf("the directory holds %d entries, want the 2 files and no leftover", len(entries))
	}
}
