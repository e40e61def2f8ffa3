package discovery

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const (
	listA = `[{"address": "10.0.0.1:80"}, {"address": "10.0.0.2:80", "weight": "2"}]`
	listB = `[{"address": "10.0.0.3:80", "weight": 0.5}]`
)

// writeAtomic writes content to a temporary file beside path and renames it
// into place, as configuration tools do.
func writeAtomic(t *testing.T, path, content string) {
	t.Helper()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		t.Fatal(err)
	}
}

// newTestFileSource builds a source with short timings and a counter of
// completed reads.
func newTestFileSource(t *testing.T, path string, o FileOptions) (*FileSource, *atomic.Int64) {
	t.Helper()
	s, err := NewFileSource(path, o)
	if err != nil {
		t.Fatal(err)
	}
	var checks atomic.Int64
	s.onCheck = func(bool) { checks.Add(1) }
	return s, &checks
}

// waitChecks waits until the source has read the file more than n times.
func waitChecks(t *testing.T, checks *atomic.Int64, n int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for checks.Load() <= n {
		if time.Now().After(deadline) {
			t.Fatalf("the source did not read the file again within %v", timeout)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFileSourceInitialRead(t *testing.T) {
	checkLeaks(t)
	path := filepath.Join(t.TempDir(), "endpoints.json")
	writeAtomic(t, path, listA)
	s, _ := newTestFileSource(t, path, FileOptions{})
	c := runSource(t, s)
	_, _ = c.waitEvent(t, 0, 5*time.Second, "with the initial list", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80", "10.0.0.2:80") })
	evs, _ := c.snapshot()
	if got, want := evs[0].Source, "file:"+path; got != want {
		t.Errorf("Source = %q, want %q", got, want)
	}
	if w := evs[0].Update.Instances[1].Weight; w != 200 {
		t.Errorf("weight \"2\" = %d hundredths, want 200", w)
	}
}

func TestFileSourceAtomicReplace(t *testing.T) {
	checkLeaks(t)
	path := filepath.Join(t.TempDir(), "endpoints.json")
	writeAtomic(t, path, listA)
	// A long poll: the change must be seen through fsnotify.
	s, _ := newTestFileSource(t, path, FileOptions{Poll: time.Hour})
	c := runSource(t, s)
	c.waitEvent(t, 0, 5*time.Second, "with the initial list", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80", "10.0.0.2:80") })
	start := time.Now()
	writeAtomic(t, path, listB)
	_, at := c.waitEvent(t, 1, 5*time.Second, "with the replaced list", func(ev Event) bool { return hasAddrs(ev, "10.0.0.3:80") })
	t.Logf("rename to delivery: %v", at.Sub(start))
	if n := c.count(); n != 2 {
		t.Errorf("%d events, want 2:%s", n, describe(func() []Event { e, _ := c.snapshot(); return e }()))
	}
}

// A file rewritten in place in two writes, with a pause shorter than the
// debounce between them, is delivered once, complete: the half-written
// content is never delivered as an error.
func TestFileSourceInPlaceRewriteInTwoHalves(t *testing.T) {
	checkLeaks(t)
	path := filepath.Join(t.TempDir(), "endpoints.json")
	writeAtomic(t, path, listA)
	s, _ := newTestFileSource(t, path, FileOptions{Poll: time.Hour, Debounce: 100 * time.Millisecond})
	c := runSource(t, s)
	c.waitEvent(t, 0, 5*time.Second, "with the initial list", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80", "10.0.0.2:80") })

	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	half := len(listB) / 2
	if _, err := f.WriteString(listB[:half]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // the writer's pause, part of the scenario
	if _, err := f.WriteString(listB[half:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	i, _ := c.waitEvent(t, 1, 5*time.Second, "with the rewritten list", func(ev Event) bool { return hasAddrs(ev, "10.0.0.3:80") })
	evs, _ := c.snapshot()
	for _, ev := range evs[1:i] {
		if ev.Err != nil {
			t.Errorf("error delivered for the half-written file: %v", ev.Err)
		}
	}
	if i != 1 {
		t.Errorf("the rewrite took %d deliveries, want 1:%s", i, describe(evs))
	}
}

func TestFileSourceInvalidJSONDeliversOneError(t *testing.T) {
	checkLeaks(t)
	path := filepath.Join(t.TempDir(), "endpoints.json")
	writeAtomic(t, path, listA)
	s, checks := newTestFileSource(t, path, FileOptions{Poll: 20 * time.Millisecond})
	c := runSource(t, s)
	c.waitEvent(t, 0, 5*time.Second, "with the initial list", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80", "10.0.0.2:80") })

	writeAtomic(t, path, `[{"address": "10.0.0.3:80"`)
	c.waitEvent(t, 1, 5*time.Second, "with a malformed-payload error", func(ev Event) bool { return errors.Is(ev.Err, ErrMalformed) })

	// Touch the file (new mtime, same content) and rewrite it identically:
	// each makes the source read it again, and neither delivers.
	n := checks.Load()
	now := time.Now()
	if err := os.Chtimes(path, now, now.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	waitChecks(t, checks, n, 5*time.Second)
	n = checks.Load()
	writeAtomic(t, path, `[{"address": "10.0.0.3:80"`)
	waitChecks(t, checks, n, 5*time.Second)

	evs, _ := c.snapshot()
	if len(evs) != 2 {
		t.Fatalf("%d events, want the list and one error:%s", len(evs), describe(evs))
	}
	var pe *PayloadError
	if !errors.As(evs[1].Err, &pe) || pe.Code != CodeNotJSON {
		t.Errorf("error = %v, want a PayloadError with code %s", evs[1].Err, CodeNotJSON)
	}
	if evs[1].Source != "file:"+path {
		t.Errorf("Source = %q", evs[1].Source)
	}
}

func TestFileSourceRemovedThenRecreated(t *testing.T) {
	checkLeaks(t)
	path := filepath.Join(t.TempDir(), "endpoints.json")
	writeAtomic(t, path, listA)
	s, _ := newTestFileSource(t, path, FileOptions{Poll: 20 * time.Millisecond})
	c := runSource(t, s)
	c.waitEvent(t, 0, 5*time.Second, "with the initial list", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80", "10.0.0.2:80") })

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	c.waitEvent(t, 1, 5*time.Second, "saying the file is missing", func(ev Event) bool { return errors.Is(ev.Err, ErrUnavailable) })
	// Another file in the directory is no concern of the source.
	writeAtomic(t, path+".other", "unrelated")
	writeAtomic(t, path, listB)
	i, _ := c.waitEvent(t, 2, 5*time.Second, "with the recreated list", func(ev Event) bool { return hasAddrs(ev, "10.0.0.3:80") })
	if i != 2 {
		evs, _ := c.snapshot()
		t.Errorf("events:%s\nwant list, missing, list", describe(evs))
	}
}

func TestFileSourceIdenticalRewriteDeliversNothing(t *testing.T) {
	checkLeaks(t)
	path := filepath.Join(t.TempDir(), "endpoints.json")
	writeAtomic(t, path, listA)
	s, checks := newTestFileSource(t, path, FileOptions{})
	c := runSource(t, s)
	c.waitEvent(t, 0, 5*time.Second, "with the initial list", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80", "10.0.0.2:80") })
	n := checks.Load()
	if err := os.WriteFile(path, []byte(listA), 0o644); err != nil {
		t.Fatal(err)
	}
	waitChecks(t, checks, n, 5*time.Second)
	if got := c.count(); got != 1 {
		evs, _ := c.snapshot()
		t.Errorf("identical rewrite delivered:%s", describe(evs))
	}
}

// With fsnotify off, the stat poll alone sees a change within 2×Poll.
func TestFileSourceStatFallback(t *testing.T) {
	checkLeaks(t)
	path := filepath.Join(t.TempDir(), "endpoints.json")
	writeAtomic(t, path, listA)
	const poll = 300 * time.Millisecond
	s, _ := newTestFileSource(t, path, FileOptions{Poll: poll})
	s.noNotify = true
	c := runSource(t, s)
	c.waitEvent(t, 0, 5*time.Second, "with the initial list", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80", "10.0.0.2:80") })
	for i, content := range []string{listB, listA} {
		start := time.Now()
		writeAtomic(t, path, content)
		_, at := c.waitEvent(t, i+1, 5*time.Second, "after the change", func(ev Event) bool { return ev.Err == nil })
		if d := at.Sub(start); d > 2*poll {
			t.Errorf("change %d seen after %v, want within 2×Poll = %v", i, d, 2*poll)
		} else {
			t.Logf("change %d seen by the stat poll after %v (Poll %v)", i, d, poll)
		}
	}
}

func TestFileSourceMissingAtStartThenCreated(t *testing.T) {
	checkLeaks(t)
	path := filepath.Join(t.TempDir(), "endpoints.json")
	s, _ := newTestFileSource(t, path, FileOptions{})
	c := runSource(t, s)
	c.waitEvent(t, 0, 5*time.Second, "saying the file is missing", func(ev Event) bool { return errors.Is(ev.Err, ErrUnavailable) })
	writeAtomic(t, path, listA)
	c.waitEvent(t, 1, 5*time.Second, "with the created list", func(ev Event) bool { return hasAddrs(ev, "10.0.0.1:80", "10.0.0.2:80") })
}

func TestFileSourceTooLargeAndAllRejected(t *testing.T) {
	checkLeaks(t)
	path := filepath.Join(t.TempDir(), "endpoints.json")
	big := "[" + strings.Repeat(`{"address": "10.0.0.1:80"},`, 100) + `{"address": "10.0.0.2:80"}]`
	writeAtomic(t, path, big)
	s, _ := newTestFileSource(t, path, FileOptions{Limits: Limits{MaxPayloadBytes: 1000}})
	c := runSource(t, s)
	c.waitEvent(t, 0, 5*time.Second, "saying the file is too large", func(ev Event) bool {
		var pe *PayloadError
		return errors.As(ev.Err, &pe) && pe.Code == CodePayloadTooLarge
	})
	writeAtomic(t, path, `[{"address": "10.0.0.1:80", "weight": "abc"}]`)
	i, _ := c.waitEvent(t, 1, 5*time.Second, "saying all were rejected", func(ev Event) bool { return errors.Is(ev.Err, ErrAllRejected) })
	evs, _ := c.snapshot()
	if r := evs[i].Update.Rejected; len(r) != 1 || r[0].Reason != ReasonNotANumber {
		t.Errorf("Rejected = %+v, want one not_a_number", r)
	}
}

func TestNewFileSourceRejectsBadOptions(t *testing.T) {
	for name, tc := range map[string]struct {
		path string
		o    FileOptions
		want string
	}{
		"empty path":        {"", FileOptions{}, "path is empty"},
		"negative poll":     {"x.json", FileOptions{Poll: -1}, "poll must be"},
		"negative debounce": {"x.json", FileOptions{Debounce: -1}, "debounce must be"},
		"bad limits":        {"x.json", FileOptions{Limits: Limits{MaxPayloadBytes: -1}}, "max payload bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewFileSource(tc.path, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
