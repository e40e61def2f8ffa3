package apps

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func fileApp(id string, rate float64, keys ...string) FileApp {
	return FileApp{Spec: Spec{ID: id, Grants: []string{"video"}, Limits: Limits{Rate: rate}}, KeySHA256: keys}
}

func hashOf(plain string) string {
	sum := sha256.Sum256([]byte(plain))
	return fmt.Sprintf("%x", sum)
}

func seed(t *testing.T, s *Store, file ...FileApp) SeedResult {
	t.Helper()
	res, err := s.Seed(ctx, file)
	if err != nil {
		t.Fatalf("Seed: %v", err)
	}
	return res
}

func wantIDs(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// TestSeedPrecedence walks the precedence rule of docs/apps.md one start
// (or reload) at a time.
func TestSeedPrecedence(t *testing.T) {
	var logs bytes.Buffer
	path := filepath.Join(t.TempDir(), "apps.db")
	s := open(t, path, &logs)
	k1, k2 := hashOf("lvk_one"), hashOf("lvk_two")

	// First sight: created from the file, with its keys.
	res := seed(t, s, fileApp("a", 10, k1), fileApp("b", 10))
	wantIDs(t, "Created", res.Created, "a", "b")
	a, _ := s.Current().App("a")
	if a.Source != SourceFile || a.Overridden || a.Limits.Rate != 10 || len(a.Keys) != 1 || a.Keys[0].Source != SourceFile || a.Keys[0].Prefix != "" {
		t.Fatalf("seeded app: %+v", a)
	}
	if _, _, err := s.Current().Authenticate(sha256.Sum256([]byte("lvk_one"))); err != nil {
		t.Errorf("file key: %v", err)
	}

	// Same file again: nothing changes.
	res = seed(t, s, fileApp("a", 10, k1), fileApp("b", 10))
	wantIDs(t, "Unchanged", res.Unchanged, "a", "b")

	// File changed, runtime did not: the file's version is applied; the
	// dropped file key is revoked, the new one added.
	res = seed(t, s, fileApp("a", 20, k2), fileApp("b", 10))
	wantIDs(t, "Updated", res.Updated, "a")
	a, _ = s.Current().App("a")
	if a.Limits.Rate != 20 || a.Overridden || a.PendingFileChange {
		t.Errorf("after a file change: %+v", a)
	}
	if _, _, err := s.Current().Authenticate(sha256.Sum256([]byte("lvk_one"))); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("key dropped from the file still admitted: %v", err)
	}
	if _, _, err := s.Current().Authenticate(sha256.Sum256([]byte("lvk_two"))); err != nil {
		t.Errorf("key added to the file: %v", err)
	}

	// Runtime changed, file did not: the runtime version is kept, quietly.
	rate := Limits{Rate: 99}
	if _, err := s.Patch(ctx, "a", Patch{Limits: &rate}); err != nil {
		t.Fatal(err)
	}
	res = seed(t, s, fileApp("a", 20, k2), fileApp("b", 10))
	wantIDs(t, "Unchanged", res.Unchanged, "a", "b")
	a, _ = s.Current().App("a")
	if a.Limits.Rate != 99 || !a.Overridden || a.PendingFileChange {
		t.Errorf("runtime change reverted or flags wrong: %+v", a)
	}

	// Both changed: the runtime version is kept, with a warning and the
	// pending flag; it survives a reopen.
	logs.Reset()
	res = seed(t, s, fileApp("a", 30, k2), fileApp("b", 10))
	wantIDs(t, "KeptRuntime", res.KeptRuntime, "a")
	a, _ = s.Current().App("a")
	if a.Limits.Rate != 99 || !a.Overridden || !a.PendingFileChange {
		t.Errorf("both changed: %+v", a)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "app=a") {
		t.Errorf("no warning logged: %s", logs.String())
	}
	s.Close()
	s = open(t, path, &logs)
	if a, _ = s.Current().App("a"); a.Limits.Rate != 99 || !a.PendingFileChange {
		t.Errorf("after reopen: %+v", a)
	}

	// Deleted at runtime: a tombstone keeps it deleted while the file's
	// definition is unchanged...
	if err := s.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	res = seed(t, s, fileApp("a", 30, k2), fileApp("b", 10))
	wantIDs(t, "StayedDeleted", res.StayedDeleted, "b")
	if _, ok := s.Current().App("b"); ok {
		t.Error("a deleted app came back from an unchanged file")
	}
	// ...and the file brings it back once its definition changes.
	res = seed(t, s, fileApp("a", 30, k2), fileApp("b", 11))
	wantIDs(t, "Created", res.Created, "b")
	if b, ok := s.Current().App("b"); !ok || b.Limits.Rate != 11 {
		t.Errorf("changed file definition did not recreate b: %+v", b)
	}

	// Deleting an overridden app and reloading takes the file's version:
	// the documented way to drop runtime changes.
	if err := s.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	res = seed(t, s, fileApp("a", 30, k2), fileApp("b", 11))
	wantIDs(t, "Created", res.Created, "a")
	if a, _ = s.Current().App("a"); a.Limits.Rate != 30 || a.Overridden || a.PendingFileChange {
		t.Errorf("after delete and reseed: %+v", a)
	}
}

// TestSeedUnlisted: a file app the file drops is removed unless it was
// changed at runtime; API apps are never touched.
func TestSeedUnlisted(t *testing.T) {
	s := open(t, "", nil)
	seed(t, s, fileApp("plain", 1), fileApp("changed", 1))
	mustCreate(t, s, Spec{ID: "api"})
	if _, err := s.CreateKey(ctx, "changed"); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.Current().App("changed"); !c.Overridden {
		t.Error("a key created at runtime does not mark a file app Overridden")
	}
	res := seed(t, s)
	wantIDs(t, "Removed", res.Removed, "plain")
	wantIDs(t, "KeptRuntime", res.KeptRuntime, "changed")
	if _, ok := s.Current().App("api"); !ok {
		t.Error("seeding removed an API app")
	}
	if c, ok := s.Current().App("changed"); !ok || !c.PendingFileChange {
		t.Errorf("changed app: %+v", c)
	}
}

// TestSeedAPIAppWins: the file naming an id created through the API does
// not overwrite it.
func TestSeedAPIAppWins(t *testing.T) {
	s := open(t, "", nil)
	mustCreate(t, s, Spec{ID: "x", Limits: Limits{Rate: 5}})
	res := seed(t, s, fileApp("x", 50))
	wantIDs(t, "KeptRuntime", res.KeptRuntime, "x")
	if x, _ := s.Current().App("x"); x.Limits.Rate != 5 || x.Source != SourceAPI || !x.PendingFileChange {
		t.Errorf("API app: %+v", x)
	}
}

// TestSeedContainsFailures: one bad file app fails alone.
func TestSeedContainsFailures(t *testing.T) {
	s := open(t, "", nil)
	k := hashOf("lvk_shared")
	res := seed(t, s, fileApp("first", 1, k), fileApp("second", 1, k), fileApp("bad", -1), fileApp("third", 1, "ABC"))
	wantIDs(t, "Created", res.Created, "first")
	for _, id := range []string{"second", "bad", "third"} {
		var ve *ValidationError
		if !errors.As(res.Failed[id], &ve) {
			t.Errorf("Failed[%s] = %v, want a ValidationError", id, res.Failed[id])
		}
	}
	if s.Current().Len() != 1 {
		t.Errorf("%d apps, want 1", s.Current().Len())
	}
}

// TestCreateReplacesTombstone: creating a deleted file app's id through
// the API makes it an API app that the file no longer manages.
func TestCreateReplacesTombstone(t *testing.T) {
	s := open(t, "", nil)
	seed(t, s, fileApp("a", 1))
	_ = s.Delete(ctx, "a")
	mustCreate(t, s, Spec{ID: "a", Limits: Limits{Rate: 7}})
	res := seed(t, s, fileApp("a", 1))
	wantIDs(t, "KeptRuntime", res.KeptRuntime, "a")
	if a, _ := s.Current().App("a"); a.Limits.Rate != 7 || a.Source != SourceAPI {
		t.Errorf("%+v", a)
	}
}

// TestFileDefinitionLeavesTheFileAlone: the gateway's seed and the cluster
// store's re-seed (its watch loop) build definitions from the same file
// apps at once; normalising must not write to the file's map (under -race
// beside another suite this was a data race, and concurrent map writes
// can end the process).
func TestFileDefinitionLeavesTheFileAlone(t *testing.T) {
	fa := FileApp{Spec: Spec{ID: "acme", Grants: []string{"b", "a"},
		RouteLimits: map[string]RouteLimit{"a": {Rate: 10}, "b": {Rate: 100}}}}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec, _, _, err := fileDefinition(fa)
			if err != nil {
				t.Error(err)
				return
			}
			if spec.RouteLimits["a"].Burst == 0 || spec.Grants[0] != "a" {
				t.Errorf("definition not normalised: %+v", spec)
			}
		}()
	}
	wg.Wait()
	if fa.RouteLimits["a"].Burst != 0 || fa.RouteLimits["b"].Burst != 0 || fa.Grants[0] != "b" {
		t.Errorf("the file's app was changed: %+v", fa.Spec)
	}
}
