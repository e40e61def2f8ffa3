package discovery

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"
)

// list builds instances "10.0.0.<i+1>:80" with the given whole weights.
func list(weights ...uint32) []Instance {
	out := make([]Instance, len(weights))
	for i, w := range weights {
		out[i] = Instance{Address: fmt.Sprintf("10.0.0.%d:80", i+1), Weight: w * 100}
	}
	return out
}

var t0 = time.Unix(1_700_000_000, 0)

func at(d time.Duration) time.Time { return t0.Add(d) }

func TestDropFraction(t *testing.T) {
	for _, c := range []struct {
		name          string
		current, next []Instance
		want          float64
	}{
		{"same", list(1, 1, 1, 1), list(1, 1, 1, 1), 0},
		{"one drained", list(1, 1, 1, 1), list(1, 1, 1, 0), 0.25},
		{"one removed", list(1, 1, 1, 1), list(1, 1, 1), 0.25},
		{"weighted", list(3, 1), list(0, 1), 0.75},
		{"reduced is not dropped", list(10, 10), list(1, 1), 0},
		{"moved weight does not offset", list(1, 1), append(list(0, 1), Instance{Address: "10.0.1.1:80", Weight: 1000}), 0.5},
		{"all drained", list(1, 1), list(0, 0), 1},
		{"empty next", list(1, 1), nil, 1},
		{"current all drained", list(0, 0), nil, 0},
		{"current empty", nil, list(1), 0},
		{"drained stays drained", list(0, 1), list(0, 1), 0},
	} {
		if got := DropFraction(c.current, c.next); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%s: DropFraction = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestGuardSteps is a step table at explicit times with the defaults
// (MaxDropFraction 0.5, ConfirmAfter 30s). current is what the caller
// serves: it follows every Apply.
func TestGuardSteps(t *testing.T) {
	ten := list(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	drain2 := list(1, 1, 1, 1, 1, 1, 1, 1, 0, 0)
	drop6 := list(1, 1, 1, 1)              // 60% removed
	drop6b := list(1, 1, 1, 1, 0, 0, 0, 0) // 60%, different set
	allDrained := list(0, 0, 0, 0, 0, 0, 0, 0)
	type step struct {
		name    string
		at      time.Duration
		next    []Instance // nil with confirm: the operator confirms instead
		confirm bool
		want    Action
		since   time.Duration // for Hold and released Apply; -1: zero
		held    bool          // whether something is held after the step
	}
	for _, tc := range []struct {
		name  string
		opts  GuardOptions
		start []Instance
		steps []step
	}{
		{"small drain applies", GuardOptions{}, ten, []step{
			{"drain 2 of 10", 0, drain2, false, Apply, -1, false},
		}},
		{"60% held then applied after ConfirmAfter", GuardOptions{}, ten, []step{
			{"drop 60%", 0, drop6, false, Hold, 0, true},
			{"again at 10s", 10 * time.Second, drop6, false, Hold, 0, true},
			{"again at 29.999s", 30*time.Second - time.Millisecond, drop6, false, Hold, 0, true},
			{"again at 30s", 30 * time.Second, drop6, false, Apply, 0, false},
			{"then a small change", 31 * time.Second, list(1, 1, 1, 0), false, Apply, -1, false},
		}},
		{"identical ignores order, zone and metadata", GuardOptions{}, ten, []step{
			{"drop 60%", 0, drop6, false, Hold, 0, true},
			{"reordered with zones", 40 * time.Second, []Instance{
				{Address: "10.0.0.4:80", Weight: 100, Zone: "b"},
				{Address: "10.0.0.1:80", Weight: 100, Metadata: map[string]string{"v": "2"}},
				{Address: "10.0.0.3:80", Weight: 100},
				{Address: "10.0.0.2:80", Weight: 100},
			}, false, Apply, 0, false},
		}},
		{"a different large drop restarts the clock", GuardOptions{}, ten, []step{
			{"drop 60%", 0, drop6, false, Hold, 0, true},
			{"another 60% drop", 20 * time.Second, drop6b, false, Hold, 20 * time.Second, true},
			{"at 30s: not yet", 30 * time.Second, drop6b, false, Hold, 20 * time.Second, true},
			{"at 50s", 50 * time.Second, drop6b, false, Apply, 20 * time.Second, false},
		}},
		{"held then confirmed by operator", GuardOptions{}, ten, []step{
			{"drop 60%", 0, drop6, false, Hold, 0, true},
			{"operator confirms", 5 * time.Second, nil, true, Apply, 0, false},
		}},
		{"newer benign update replaces a hold", GuardOptions{}, ten, []step{
			{"drop 60%", 0, drop6, false, Hold, 0, true},
			{"registry recovers", 5 * time.Second, drain2, false, Apply, -1, false},
			{"the old drop again: held anew", 6 * time.Second, list(1, 1, 1, 0, 0, 0, 0, 0), false, Hold, 6 * time.Second, true},
		}},
		{"all drained held then confirmed", GuardOptions{}, ten, []step{
			{"all to 0", 0, allDrained, false, Hold, 0, true},
			{"again", time.Second, allDrained, false, Hold, 0, true},
			{"operator confirms", 2 * time.Second, nil, true, Apply, 0, false},
			{"anything applies on zero active weight", 3 * time.Second, nil, false, Apply, -1, false},
		}},
		{"empty update held", GuardOptions{}, ten, []step{
			{"registry says none", 0, []Instance{}, false, Hold, 0, true},
		}},
		{"MaxDropFraction 1.0 never holds", GuardOptions{MaxDropFraction: 1}, ten, []step{
			{"all drained", 0, allDrained, false, Apply, -1, false},
			{"back", time.Second, ten, false, Apply, -1, false},
			{"empty", 2 * time.Second, nil, false, Apply, -1, false},
		}},
		{"custom fraction and confirm", GuardOptions{MaxDropFraction: 0.1, ConfirmAfter: time.Second}, ten, []step{
			{"drain 1 of 10", 0, list(1, 1, 1, 1, 1, 1, 1, 1, 1, 0), false, Apply, -1, false},
			{"drain another", 0, list(1, 1, 1, 1, 1, 1, 1, 1, 0, 0), false, Hold, 0, true},
			{"a second later", time.Second, list(1, 1, 1, 1, 1, 1, 1, 1, 0, 0), false, Apply, 0, false},
		}},
		{"confirm with nothing held", GuardOptions{}, ten, []step{
			{"confirm", 0, nil, true, Hold, -1, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := NewGuard(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			current := tc.start
			for _, s := range tc.steps {
				var d Decision
				if s.confirm {
					var ok bool
					d, ok = g.Confirm(at(s.at))
					if !ok {
						if s.want == Apply {
							t.Fatalf("%s: nothing to confirm", s.name)
						}
						d.Action = Hold // the test's "nothing happened"
					}
				} else {
					d = g.Offer(current, s.next, at(s.at))
				}
				if d.Action != s.want {
					t.Fatalf("%s: %v (drop %.2f), want %v", s.name, d.Action, d.DropFraction, s.want)
				}
				wantSince := time.Time{}
				if s.since >= 0 {
					wantSince = at(s.since)
				}
				if !d.Since.Equal(wantSince) {
					t.Fatalf("%s: Since = %v, want %v", s.name, d.Since, wantSince)
				}
				if !d.Since.IsZero() && d.HeldFor != at(s.at).Sub(d.Since) {
					t.Fatalf("%s: HeldFor = %v", s.name, d.HeldFor)
				}
				if d.Action == Apply {
					if !s.confirm && !Identical(d.Instances, s.next) {
						t.Fatalf("%s: applied %v, want the offered update", s.name, d.Instances)
					}
					current = d.Instances
				} else if d.Instances != nil {
					t.Fatalf("%s: Hold carries instances", s.name)
				}
				h, held := g.Held()
				if held != s.held {
					t.Fatalf("%s: Held() ok = %v, want %v", s.name, held, s.held)
				}
				if held && (!h.Since.Equal(d.Since) || h.DropFraction <= 0.5 && tc.opts.MaxDropFraction == 0) {
					t.Fatalf("%s: Held() = %+v", s.name, h)
				}
			}
		})
	}
}

func TestGuardConfirmReturnsLatestHeld(t *testing.T) {
	var g Guard // the zero value uses the defaults
	ten := list(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	g.Offer(ten, list(1, 1, 1), at(0))
	g.Offer(ten, list(1, 1), at(time.Second)) // replaces the hold
	d, ok := g.Confirm(at(2 * time.Second))
	if !ok || !Identical(d.Instances, list(1, 1)) || !d.Since.Equal(at(time.Second)) || d.DropFraction != 0.8 {
		t.Fatalf("Confirm = %+v, %v", d, ok)
	}
	if _, ok := g.Confirm(at(3 * time.Second)); ok {
		t.Fatal("second Confirm released something")
	}
}

func TestGuardOptionsValidate(t *testing.T) {
	for _, o := range []GuardOptions{{MaxDropFraction: -0.1}, {MaxDropFraction: 1.01}, {MaxDropFraction: math.NaN()}, {ConfirmAfter: -time.Second}} {
		if _, err := NewGuard(o); err == nil {
			t.Errorf("NewGuard(%+v) accepted", o)
		}
	}
}

// TestGuardConcurrent: Offer, Confirm and Held from several goroutines
// (run under -race).
func TestGuardConcurrent(t *testing.T) {
	var g Guard
	ten := list(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 200 {
				now := at(time.Duration(j) * time.Second)
				switch (i + j) % 3 {
				case 0:
					g.Offer(ten, list(1, 1), now)
				case 1:
					g.Confirm(now)
				default:
					g.Held()
				}
			}
		}()
	}
	wg.Wait()
}
