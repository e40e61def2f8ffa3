package dataapis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// outcome is what one call did, comparable across the two stores: its
// error's class and the API it returned, without timestamps.
func outcome(a *API, err error) string {
	class := "ok"
	var ie *InvalidError
	switch {
	case err == nil:
	case errors.As(err, &ie):
		class = "invalid"
	case errors.Is(err, ErrNotFound):
		class = "not_found"
	case errors.Is(err, ErrExists):
		class = "exists"
	case errors.Is(err, ErrConflict):
		class = "conflict"
	default:
		class = "error: " + err.Error()
	}
	if a == nil || err != nil {
		return class
	}
	var vs []string
	for _, v := range a.Versions {
		vs = append(vs, fmt.Sprintf("%d/%s/%s", v.Version, v.Source, v.Definition))
	}
	return fmt.Sprintf("%s %s %s pub=%d latest=%d src=%s over=%v pending=%v [%s]", class, a.Name, a.State, a.Published, a.Latest,
		a.Source, a.Overridden, a.PendingFileChange, strings.Join(vs, " "))
}

// snapshotOf is a snapshot, comparable.
func snapshotOf(s *Snapshot) string {
	var sv []string
	for _, x := range s.Serving {
		sv = append(sv, fmt.Sprintf("%s@%d:%s", x.Name, x.Version, x.Definition))
	}
	return fmt.Sprintf("%v %v %v", sv, s.Count, s.Runtime)
}

// TestModelFollowsStore: the in-memory Model (the shared store's rules,
// cluster.etcd) and the SQLite Store, given the same 600 random calls
// (create, new version, publish, rollback, offline, delete, seed, over
// four names and small version numbers, so every refusal and the
// eviction at MaxVersions happen), return the same outcome for each, and
// the same snapshot after each.
func TestModelFollowsStore(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "data-apis.db"))
	m := NewModel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewPCG(29, 1))
	names := []string{"a", "b", "c", "d"}
	quiet := func(string, ...any) {}
	seen := map[string]int{}
	for i := range 600 {
		name := names[rng.IntN(len(names))]
		v := rng.IntN(6)
		d := def(rng.IntN(80))
		var got, want string
		var op string
		switch k := rng.IntN(20); {
		case k < 3:
			op = "create"
			want = outcome(s.Create(ctx, name, d))
			got = outcome(m.Create(name, d, now))
		case k < 9:
			op = "version"
			want = outcome(s.AddVersion(ctx, name, d))
			got = outcome(m.AddVersion(name, d, now))
		case k < 12:
			op = fmt.Sprintf("publish %d", v)
			want = outcome(s.Publish(ctx, name, v))
			got = outcome(m.Transition(name, v, false, now))
		case k < 14:
			op = fmt.Sprintf("rollback %d", v)
			want = outcome(s.Rollback(ctx, name, v))
			got = outcome(m.Transition(name, v, true, now))
		case k < 16:
			op = "offline"
			want = outcome(s.Offline(ctx, name))
			got = outcome(m.Offline(name, now))
		case k < 17:
			op = "delete"
			want = outcome(nil, s.Delete(ctx, name))
			got = outcome(nil, m.Delete(name))
		default:
			op = "seed"
			var file []FileAPI
			for _, n := range names {
				if rng.IntN(2) == 0 {
					file = append(file, FileAPI{Name: n, Definition: def(rng.IntN(3))})
				}
			}
			sr, serr := s.Seed(ctx, file)
			mr, merr := m.Seed(file, now, quiet)
			want = fmt.Sprintf("%v %v", serr, sr.LogArgs())
			got = fmt.Sprintf("%v %v", merr, mr.LogArgs())
		}
		seen[strings.Fields(op)[0]+" "+strings.Fields(want)[0]]++
		if got != want {
			t.Fatalf("call %d, %s %s:\n model %s\n store %s", i, op, name, got, want)
		}
		if g, w := snapshotOf(m.Snapshot()), snapshotOf(s.Current()); g != w {
			t.Fatalf("call %d, %s %s: snapshots differ:\n model %s\n store %s", i, op, name, g, w)
		}
	}
	for _, n := range names {
		a, aerr := s.Get(ctx, n)
		b, berr := m.Get(n)
		if g, w := outcome(b, berr), outcome(a, aerr); g != w {
			t.Errorf("Get %s: model %s, store %s", n, g, w)
		}
	}
	ps, _ := s.List(ctx, "", 2)
	if pm := m.List("", 2); !reflect.DeepEqual(len(pm.APIs), len(ps.APIs)) || pm.Next != ps.Next {
		t.Errorf("List: model %d next %q, store %d next %q", len(pm.APIs), pm.Next, len(ps.APIs), ps.Next)
	}
	t.Logf("outcomes covered: %v", seen)
	for _, must := range []string{"create ok", "create exists", "version ok", "version not_found", "publish ok", "publish not_found",
		"rollback ok", "rollback conflict", "offline ok", "offline conflict", "delete ok", "seed <nil>"} {
		if seen[must] == 0 {
			t.Errorf("the random calls never covered %q", must)
		}
	}
}

// TestModelEviction: the Model evicts as the Store does at MaxVersions,
// and FitEntry evicts the oldest versions but the published and latest
// ones until an entry fits, refusing one that cannot.
func TestModelEviction(t *testing.T) {
	now := time.Now()
	m := NewModel()
	if _, err := m.Create("a", def(0), now); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Transition("a", 1, false, now); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= MaxVersions+5; i++ {
		if _, err := m.AddVersion("a", def(i), now); err != nil {
			t.Fatal(err)
		}
	}
	e := m.APIs["a"]
	if len(e.Versions) != MaxVersions || e.Versions[0].Version != 1 || e.Versions[1].Version != 8 {
		t.Fatalf("after %d versions: %d kept, first %d, second %d", MaxVersions+6, len(e.Versions), e.Versions[0].Version, e.Versions[1].Version)
	}
	big := func(n int) []byte {
		return fmt.Appendf(nil, `{"data":{"sql":"SELECT %d AS n -- %s","source":"db"},"match":{"path_prefix":"/n"}}`, n, strings.Repeat("x", 300<<10))
	}
	c := copyEntry(e)
	c.Versions = append(c.Versions, Version{Version: 100, Definition: big(1)}, Version{Version: 101, Definition: big(2)})
	c.Latest = 101
	b, err := FitEntry(c, 1<<20)
	if err != nil || len(b) > 1<<20 {
		t.Fatalf("FitEntry: %d bytes, %v", len(b), err)
	}
	if c.Versions[0].Version != 1 || c.version(101) == nil {
		t.Fatalf("FitEntry evicted the published or the latest version: %v", c.Versions[0].Version)
	}
	c.Versions = []Version{{Version: 1, Definition: big(3)}, {Version: 2, Definition: big(4)}, {Version: 3, Definition: big(5)}, {Version: 4, Definition: big(6)}}
	c.Published, c.Latest = 1, 4
	var ie *InvalidError
	if _, err := FitEntry(c, 1<<20); err != nil {
		t.Fatalf("four versions of 300 KiB: %v", err)
	}
	c.Versions, c.Latest = []Version{{Version: 1, Definition: big(3)}, {Version: 2, Definition: big(4)}}, 2
	if _, err := FitEntry(c, 500<<10); !errors.As(err, &ie) {
		t.Fatalf("the published and the latest over the limit: %v, want an InvalidError", err)
	}
}

// TestFleetKeepsPreviousVersion: a published version this node cannot
// parse is replaced by the version it served before (counted once), or
// serves nothing when there is none; a version that parses serves.
func TestFleetKeepsPreviousVersion(t *testing.T) {
	bad := map[int]bool{}
	parse := func(name string, d []byte) error {
		for v := range bad {
			if strings.Contains(string(d), fmt.Sprintf("SELECT %d ", v)) {
				return errors.New("no such data source")
			}
		}
		return nil
	}
	snap := func(v int) *Snapshot {
		return &Snapshot{Serving: []Serving{{Name: "a", Version: v, Definition: def(v)}}}
	}
	f := Fleet{Node: "n1"}
	bad[1] = true
	out, sts := f.Resolve(snap(1), parse)
	if len(out.Serving) != 0 || sts[0].State != NodeFailed || sts[0].Version != 0 {
		t.Fatalf("a first version that does not parse: %v %+v", out.Serving, sts)
	}
	delete(bad, 1)
	out, sts = f.Resolve(snap(2), parse)
	if len(out.Serving) != 1 || out.Serving[0].Version != 2 || sts[0].State != NodeServing {
		t.Fatalf("version 2: %v %+v", out.Serving, sts)
	}
	bad[3] = true
	for range 2 {
		out, sts = f.Resolve(snap(3), parse)
		if len(out.Serving) != 1 || out.Serving[0].Version != 2 || sts[0].State != NodePrevious || sts[0].Version != 2 ||
			sts[0].Published != 3 || !strings.Contains(sts[0].Error, "no such data source") || sts[0].Node != "n1" {
			t.Fatalf("version 3 does not parse: %v %+v", out.Serving, sts)
		}
	}
	if got := f.Failures()["a"]; got != 2 { // version 1 once, version 3 once
		t.Fatalf("failures %d, want 2", got)
	}
	out, _ = f.Resolve(&Snapshot{}, parse)
	if len(out.Serving) != 0 || len(f.last) != 0 {
		t.Fatalf("an API no longer published is remembered: %v", f.last)
	}
}
