package rollback

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func opts() Options {
	return Options{Window: 10 * time.Second, MaxErrorRatio: 0.1, MinRequests: 20}
}

// TestWatcherRevertsOnOwnErrors: traffic at 1% own errors before a change,
// then every request an own 502: the verdict is Bad as soon as
// MinRequests were answered, within the window, naming the ratios.
func TestWatcherRevertsOnOwnErrors(t *testing.T) {
	clock := testkit.NewClock(t0)
	w := NewWatcher(opts())
	s := Sample{Ready: true}
	for i := 0; i < 10; i++ { // 10 s of 100 requests a second, 1 own error each
		s.Requests += 100
		s.Errors++
		clock.Advance(time.Second)
		if v := w.Tick(clock.Now(), s); v.Bad.Version+len(v.Good) != 0 {
			t.Fatalf("verdict with nothing watched: %+v", v)
		}
	}
	w.Begin(clock.Now(), s, Change{Version: 7, Kind: KindReload, Subject: "config", Digest: "d"})
	s.Requests += 19
	s.Errors += 19
	clock.Advance(100 * time.Millisecond)
	if v := w.Tick(clock.Now(), s); v.Bad.Version != 0 {
		t.Fatalf("judged on 19 requests (min 20): %+v", v)
	}
	s.Requests++
	s.Errors++
	clock.Advance(100 * time.Millisecond)
	v := w.Tick(clock.Now(), s)
	if v.Bad.Version != 7 {
		t.Fatalf("verdict %+v, want version 7 bad", v)
	}
	t.Logf("why: %s", v.Why)
	if v.Why != "own 5xx ratio 1.00 (before 0.01) over 20 requests" {
		t.Errorf("why %q", v.Why)
	}
	if w.Watching() != 0 {
		t.Errorf("still watching %d", w.Watching())
	}
}

// TestWatcherKeepsHarmlessChange: the same error ratio before and after
// (upstream trouble that was there already), and a rise below the
// threshold, both end Good at the end of the window, not before.
func TestWatcherKeepsHarmlessChange(t *testing.T) {
	clock := testkit.NewClock(t0)
	w := NewWatcher(opts())
	s := Sample{Ready: true}
	for i := 0; i < 10; i++ {
		s.Requests += 100
		s.Errors += 30 // 30% before
		clock.Advance(time.Second)
		w.Tick(clock.Now(), s)
	}
	w.Begin(clock.Now(), s, Change{Version: 1, Kind: KindReload})
	for i := 0; i < 9; i++ {
		s.Requests += 100
		s.Errors += 35 // 35% after: a rise of 0.05 < 0.1
		clock.Advance(time.Second)
		if v := w.Tick(clock.Now(), s); v.Bad.Version+len(v.Good) != 0 {
			t.Fatalf("after %d s: %+v", i+1, v)
		}
	}
	clock.Advance(time.Second)
	v := w.Tick(clock.Now(), s)
	if len(v.Good) != 1 || v.Good[0].Version != 1 || v.Bad.Version != 0 {
		t.Fatalf("verdict %+v, want version 1 good", v)
	}
}

// TestWatcherNotReady: a change after which the node is not ready at the
// end of the window is bad; with two changes watched the newest is
// blamed first, the older one measured again from then.
func TestWatcherNotReady(t *testing.T) {
	clock := testkit.NewClock(t0)
	w := NewWatcher(opts())
	s := Sample{Ready: true}
	w.Begin(clock.Now(), s, Change{Version: 1})
	clock.Advance(2 * time.Second)
	w.Begin(clock.Now(), s, Change{Version: 2})
	s.Ready = false
	clock.Advance(8 * time.Second) // version 1's window ends
	v := w.Tick(clock.Now(), s)
	if v.Bad.Version != 2 || v.Why != "not ready at the end of the window" {
		t.Fatalf("verdict %+v, want version 2 bad", v)
	}
	v = w.Tick(clock.Now(), s) // still not ready: the older one next
	if v.Bad.Version != 1 {
		t.Fatalf("verdict %+v, want version 1 bad", v)
	}
}

// TestWatcherBlamesNewest: errors after two changes revert the newer; once
// they stop, the older survives its window.
func TestWatcherBlamesNewest(t *testing.T) {
	clock := testkit.NewClock(t0)
	w := NewWatcher(opts())
	s := Sample{Ready: true}
	w.Begin(clock.Now(), s, Change{Version: 1})
	clock.Advance(time.Second)
	w.Begin(clock.Now(), s, Change{Version: 2})
	s.Requests, s.Errors = 30, 30
	clock.Advance(time.Second)
	if v := w.Tick(clock.Now(), s); v.Bad.Version != 2 {
		t.Fatalf("verdict %+v, want version 2 bad", v)
	}
	for i := 0; i < 9; i++ {
		s.Requests += 100
		clock.Advance(time.Second)
		v := w.Tick(clock.Now(), s)
		if v.Bad.Version != 0 {
			t.Fatalf("version %d blamed after the revert", v.Bad.Version)
		}
		if len(v.Good) == 1 && v.Good[0].Version == 1 {
			return
		}
	}
	t.Fatal("version 1 never judged good")
}

// TestWatcherBound: more than maxPending changes at once: the oldest is
// handed back as judged early.
func TestWatcherBound(t *testing.T) {
	w := NewWatcher(opts())
	for i := 1; i <= maxPending; i++ {
		if e := w.Begin(t0, Sample{}, Change{Version: i}); e.Version != 0 {
			t.Fatalf("early %d at %d", e.Version, i)
		}
	}
	if e := w.Begin(t0, Sample{}, Change{Version: maxPending + 1}); e.Version != 1 {
		t.Fatalf("early %+v, want version 1", e)
	}
	for i := 0; i < 3*maxPoints; i++ {
		w.Tick(t0, Sample{})
	}
	if len(w.points) > maxPoints {
		t.Errorf("%d points kept, bound %d", len(w.points), maxPoints)
	}
}

// TestStorePersists: versions, pins, the last good content and starts
// survive reopening; versions are bounded by keep; a pin is found by kind,
// subject and digest and removed by its version.
func TestStorePersists(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenStore(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if _, err := s.Record(t0, KindReload, "config", Digest([]byte{byte(i)}), StateWatching); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Mark(5, StateBad, "hurt"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.PinVersion(t0, Change{Version: 5, Kind: KindReload, Subject: "config", Digest: Digest([]byte{4})}, "hurt"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveGood([]byte("listen: good\n")); err != nil {
		t.Fatal(err)
	}
	s2, err := OpenStore(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	v := s2.View()
	if len(v.Versions) != 3 || v.Versions[0].N != 5 || v.Versions[0].State != StateBad || v.Versions[2].N != 3 {
		t.Fatalf("versions %+v", v.Versions)
	}
	if _, ok := s2.Pinned(KindReload, "config", Digest([]byte{4})); !ok {
		t.Fatal("pin lost on reopening")
	}
	if _, ok := s2.Pinned(KindDataAPI, "config", Digest([]byte{4})); ok {
		t.Fatal("pin matched another kind")
	}
	if string(s2.Good()) != "listen: good\n" {
		t.Fatalf("good %q", s2.Good())
	}
	if _, err := s2.Unpin(4); err != ErrNoPin {
		t.Fatalf("unpin of an unpinned version: %v", err)
	}
	if _, err := s2.Unpin(5); err != nil {
		t.Fatal(err)
	}
	if _, ok := s2.Pinned(KindReload, "config", Digest([]byte{4})); ok {
		t.Fatal("still pinned after Unpin")
	}
	// A good file changed behind the store's back is not trusted.
	if err := os.WriteFile(filepath.Join(dir, "good.yaml"), []byte("tampered"), 0o600); err != nil {
		t.Fatal(err)
	}
	if s2.Good() != nil {
		t.Fatal("a good.yaml not matching its digest was returned")
	}
}

// TestCrashLoop: three starts within the window that never survived make
// the fourth a crash loop; a survived start or an old one breaks it.
func TestCrashLoop(t *testing.T) {
	clock := testkit.NewClock(t0)
	s, err := OpenStore(t.TempDir(), 10)
	if err != nil {
		t.Fatal(err)
	}
	begin := func() bool {
		loop, err := s.BeginStart(clock.Now(), 3, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		clock.Advance(5 * time.Second)
		return loop
	}
	for i := 0; i < 3; i++ {
		if begin() {
			t.Fatalf("crash loop at start %d", i+1)
		}
	}
	if !begin() {
		t.Fatal("the fourth start after three crashes is no crash loop")
	}
	if err := s.Survived(); err != nil { // the fourth survived
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if begin() {
			t.Fatalf("crash loop counted a survived start (start %d after it)", i+1)
		}
	}
	if !begin() {
		t.Fatal("three crashes after a survived start: no crash loop")
	}
	clock.Advance(2 * time.Minute)
	if begin() {
		t.Fatal("crashes older than crash_within counted")
	}
}

// TestWatcherRebase: errors answered while a revert ran are not laid on
// the older change once Rebase is called after the revert.
func TestWatcherRebase(t *testing.T) {
	clock := testkit.NewClock(t0)
	w := NewWatcher(opts())
	s := Sample{Ready: true}
	w.Begin(clock.Now(), s, Change{Version: 1})
	w.Begin(clock.Now(), s, Change{Version: 2})
	s.Requests, s.Errors = 25, 25
	clock.Advance(100 * time.Millisecond)
	if v := w.Tick(clock.Now(), s); v.Bad.Version != 2 {
		t.Fatalf("verdict %+v", v)
	}
	s.Requests, s.Errors = 50, 50 // answered during the revert
	w.Rebase(s)
	s.Requests += 100
	clock.Advance(100 * time.Millisecond)
	if v := w.Tick(clock.Now(), s); v.Bad.Version != 0 {
		t.Fatalf("version %d blamed for the revert's errors", v.Bad.Version)
	}
}

// TestWatcherPanics: a handler panic recovered after a change, with none
// in the window before, is Bad at once (no MinRequests); when panics were
// already recovered in the window before, they are not laid on the change
// and it ends Good.
func TestWatcherPanics(t *testing.T) {
	clock := testkit.NewClock(t0)
	w := NewWatcher(opts())
	s := Sample{Ready: true, Requests: 1000}
	w.Tick(clock.Now(), s)
	clock.Advance(time.Second)
	w.Begin(clock.Now(), s, Change{Version: 3, Kind: KindReload})
	s.Requests += 2
	clock.Advance(100 * time.Millisecond)
	if v := w.Tick(clock.Now(), s); v.Bad.Version != 0 {
		t.Fatalf("bad with no panic: %+v", v)
	}
	s.Panics++
	clock.Advance(100 * time.Millisecond)
	v := w.Tick(clock.Now(), s)
	if v.Bad.Version != 3 || v.Why != "1 handler panic(s) recovered since the change (none in the window before)" {
		t.Fatalf("verdict %+v, want version 3 bad for a panic", v)
	}

	// Panics already there before the change: not this change's.
	clock.Advance(time.Second)
	s.Panics += 5
	w.Tick(clock.Now(), s)
	w.Begin(clock.Now(), s, Change{Version: 4, Kind: KindAdmin})
	for i := 0; i < 11; i++ {
		s.Requests += 10
		s.Panics++
		clock.Advance(time.Second)
		v := w.Tick(clock.Now(), s)
		if v.Bad.Version != 0 {
			t.Fatalf("blamed for panics that were there before: %+v", v)
		}
		if len(v.Good) == 1 && v.Good[0].Version == 4 {
			return
		}
	}
	t.Fatal("version 4 never judged good")
}

// TestWatcherWaitsForFirstEndpoints (issue 28 loose end): a start with
// file discovery and no static endpoints answers 503 until its registry
// delivers; those answers are not the start's harm. The change is
// measured from when no upstream waits: Good one window after that,
// Bad on errors made after it; and when the registry never delivers,
// counting starts one window after the change at the latest.
func TestWatcherWaitsForFirstEndpoints(t *testing.T) {
	start := Change{Version: 1, Kind: KindReload, Subject: "config", Digest: "d"}
	t.Run("good once the endpoints arrive", func(t *testing.T) {
		clock := testkit.NewClock(t0)
		w := NewWatcher(opts())
		s := Sample{Ready: true, Waiting: true}
		w.Begin(clock.Now(), s, start)
		for range 5 { // 5 s of 100 requests a second, every one an own 503
			s.Requests += 100
			s.Errors += 100
			clock.Advance(time.Second)
			if v := w.Tick(clock.Now(), s); v.Bad.Version+len(v.Good) != 0 {
				t.Fatalf("verdict while waiting for the first endpoints: %+v", v)
			}
		}
		s.Waiting = false // the registry delivered
		arrived := clock.Now().Add(time.Second)
		for clock.Now().Add(time.Second).Before(arrived.Add(opts().Window)) {
			s.Requests += 100 // served, no own error
			clock.Advance(time.Second)
			if v := w.Tick(clock.Now(), s); v.Bad.Version+len(v.Good) != 0 {
				t.Fatalf("a verdict %s after the endpoints arrived, before a window: %+v", clock.Now().Sub(arrived), v)
			}
		}
		clock.Advance(time.Second)
		if v := w.Tick(clock.Now(), s); len(v.Good) != 1 || v.Good[0].Version != 1 {
			t.Fatalf("a window after the endpoints arrived: %+v, want the start good", v)
		}
	})
	t.Run("bad on errors after the endpoints arrive", func(t *testing.T) {
		clock := testkit.NewClock(t0)
		w := NewWatcher(opts())
		s := Sample{Ready: true, Waiting: true}
		w.Begin(clock.Now(), s, start)
		s.Requests, s.Errors = 50, 50
		clock.Advance(time.Second)
		w.Tick(clock.Now(), s)
		s.Waiting = false
		clock.Advance(time.Second)
		if v := w.Tick(clock.Now(), s); v.Bad.Version != 0 {
			t.Fatalf("the waiting 503s were counted: %s", v.Why)
		}
		s.Requests += 20
		s.Errors += 20
		clock.Advance(time.Second)
		if v := w.Tick(clock.Now(), s); v.Bad.Version != 1 || v.Why != "own 5xx ratio 1.00 (before 0.00) over 20 requests" {
			t.Fatalf("errors after the endpoints arrived: %+v, want version 1 bad", v)
		}
	})
	t.Run("a registry that never delivers", func(t *testing.T) {
		clock := testkit.NewClock(t0)
		w := NewWatcher(opts())
		s := Sample{Ready: true, Waiting: true}
		w.Begin(clock.Now(), s, start)
		var v Verdict
		for i := 0; i < 30 && v.Bad.Version == 0; i++ {
			s.Requests += 10
			s.Errors += 10
			clock.Advance(time.Second)
			v = w.Tick(clock.Now(), s)
			if len(v.Good) != 0 {
				t.Fatalf("judged good while every answer is an own 503: %+v", v)
			}
		}
		if took := clock.Now().Sub(t0); v.Bad.Version != 1 || took < opts().Window || took > opts().Window+3*time.Second {
			t.Fatalf("after %s: %+v, want the change bad once counting starts one window after it", took, v)
		}
	})
}
