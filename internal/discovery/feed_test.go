package discovery

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// newPushFeed builds a push feed (no source) serving static, with its
// snapshot under a temporary directory; applied counts rebuild requests.
func newPushFeed(t *testing.T, static []Instance, applied func()) *Feed {
	t.Helper()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFeed(FeedOptions{Upstream: "api", Static: static, SourceName: "push", StateDir: t.TempDir(), Metrics: m, Applied: applied})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func pushBody(l []Instance) []byte {
	parts := make([]string, len(l))
	for i, in := range l {
		parts[i] = fmt.Sprintf(`{"address": %q, "weight": "%d"}`, in.Address, in.Weight/100)
	}
	return []byte("[" + strings.Join(parts, ",") + "]")
}

func snapshotOf(t *testing.T, f *Feed) []Instance {
	t.Helper()
	snap, _, err := ReadSnapshot(f.o.StateDir, f.o.Upstream, f.o.Limits)
	if err != nil {
		t.Fatalf("reading the snapshot: %v", err)
	}
	return snap
}

// TestFeedPushHoldConfirm walks a push feed through apply, hold and an
// operator's confirm, checking the served set, its origin, the snapshot
// and the rebuild requests at each step.
func TestFeedPushHoldConfirm(t *testing.T) {
	ten := list(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	var rebuilds int
	f := newPushFeed(t, list(1), func() { rebuilds++ })
	if cur, origin := f.Instances(); origin != "config" || !Identical(cur, list(1)) {
		t.Fatalf("before any push: %v from %q, want the static set from config", cur, origin)
	}
	res, err := f.Push(pushBody(ten), t0)
	if err != nil || res.Decision.Action != Apply || res.Instances != 10 {
		t.Fatalf("push of ten: %+v, %v", res, err)
	}
	if cur, origin := f.Instances(); origin != "push" || !Identical(cur, ten) || !Identical(snapshotOf(t, f), ten) || rebuilds != 1 {
		t.Fatalf("after the push: %d instances from %q, %d rebuilds", len(cur), origin, rebuilds)
	}
	if _, ok := f.Confirm(at(time.Second)); ok {
		t.Fatal("Confirm with nothing held reported ok")
	}
	four := list(1, 1, 1, 1)
	if res, err = f.Push(pushBody(four), at(2*time.Second)); err != nil || res.Decision.Action != Hold {
		t.Fatalf("push dropping 60%%: %+v, %v, want Hold", res, err)
	}
	if s := f.State(); s.Held == nil || !Identical(s.Held.Instances, four) || rebuilds != 1 {
		t.Fatalf("while held: state %+v, %d rebuilds", s, rebuilds)
	}
	d, ok := f.Confirm(at(5 * time.Second))
	if !ok || d.HeldFor != 3*time.Second {
		t.Fatalf("Confirm: %+v, %v", d, ok)
	}
	if cur, _ := f.Instances(); !Identical(cur, four) || !Identical(snapshotOf(t, f), four) || rebuilds != 2 || f.State().Held != nil {
		t.Fatalf("after Confirm: %v served, %d rebuilds", cur, rebuilds)
	}
	if _, err := f.Push([]byte(`{"not": "a list"}`), at(6*time.Second)); err == nil {
		t.Fatal("a malformed push was accepted")
	}
	if cur, _ := f.Instances(); !Identical(cur, four) {
		t.Fatalf("a refused push changed the served set to %v", cur)
	}
}

// TestFeedConfirmCannotOverwriteANewerUpdate is the bug issue 15 names:
// Confirm took the held set from the guard, an update arrived and was
// applied, and then Confirm applied the older held set over it. The hook
// sends the newer update at exactly that point and gives it up to 100 ms to
// land; with the feed and the guard under one mutex it cannot land before
// Confirm has applied, so it applies after, and the newer set serves (and
// is the snapshot).
func TestFeedConfirmCannotOverwriteANewerUpdate(t *testing.T) {
	ten := list(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	f := newPushFeed(t, ten, nil)
	held := list(1, 1, 1, 1) // drops 60%: held
	if d, _ := f.offer(Update{Instances: held}, t0, "registry"); d.Action != Hold {
		t.Fatalf("offer of a 60%% drop: %v, want hold", d.Action)
	}
	// newer keeps all of held (and the rest), so it applies over either set.
	newer := append(list(1, 1, 1, 1, 1, 1, 1, 1, 1, 1), Instance{Address: "10.0.1.1:80", Weight: 100})
	done := make(chan struct{})
	f.confirmHook = func() {
		go func() {
			defer close(done)
			_, _ = f.offer(Update{Instances: newer}, at(time.Second), "registry")
		}()
		select {
		case <-done:
		case <-time.After(100 * time.Millisecond):
		}
	}
	if _, ok := f.Confirm(at(time.Second)); !ok {
		t.Fatal("Confirm found nothing held")
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the newer update never applied")
	}
	if cur, _ := f.Instances(); !Identical(cur, newer) {
		t.Fatalf("serving %d instances, want the newer update's %d: the confirmed older set overwrote it", len(cur), len(newer))
	}
	if snap := snapshotOf(t, f); !Identical(snap, newer) {
		t.Fatalf("snapshot holds %d instances, want the newer update's %d", len(snap), len(newer))
	}
}

// TestFeedSnapshotIsTheLatestSet: snapshots are written outside the feed's
// mutex, so applies racing each other may reach the disk in any order; the
// version check must leave the set served last on disk.
func TestFeedSnapshotIsTheLatestSet(t *testing.T) {
	f := newPushFeed(t, list(1), nil)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				// Each list adds endpoints only: every one applies.
				l := append(list(1), Instance{Address: fmt.Sprintf("10.1.%d.%d:80", w, i+1), Weight: 100})
				if res, err := f.Push(pushBody(l), t0); err != nil || res.Decision.Action != Apply {
					t.Errorf("push: %+v, %v", res, err)
					return
				}
			}
		})
	}
	wg.Wait()
	cur, _ := f.Instances()
	if snap := snapshotOf(t, f); !Identical(snap, cur) {
		t.Fatalf("snapshot %v, serving %v", snap, cur)
	}
}

// TestFeedReofferReleasesHeld: the once-a-second re-offer applies a held
// update after confirm_after, and leaves a newer hold's clock alone.
func TestFeedReofferReleasesHeld(t *testing.T) {
	ten := list(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	f := newPushFeed(t, ten, nil)
	four := list(1, 1, 1, 1)
	_, _ = f.offer(Update{Instances: four}, t0, "registry")
	f.reofferHeld(at(10 * time.Second))
	if cur, _ := f.Instances(); !Identical(cur, ten) {
		t.Fatal("released before confirm_after")
	}
	f.reofferHeld(at(DefaultConfirmAfter))
	if cur, origin := f.Instances(); !Identical(cur, four) || origin != "registry" || f.State().Held != nil {
		t.Fatalf("after confirm_after: %v from %q", cur, origin)
	}
}
