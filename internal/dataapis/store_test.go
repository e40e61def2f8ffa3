package dataapis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

func open(t *testing.T, path string) *Store {
	t.Helper()
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := Open(context.Background(), Options{Path: path, Now: func() time.Time { clock = clock.Add(time.Second); return clock }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func def(n int) []byte {
	return fmt.Appendf(nil, `{"data":{"sql":"SELECT %d AS n","source":"db"},"match":{"path_prefix":"/n"}}`, n)
}

// serving returns what the snapshot serves as name@version strings.
func serving(s *Store) []string {
	var out []string
	for _, sv := range s.Current().Serving {
		out = append(out, fmt.Sprintf("%s@%d", sv.Name, sv.Version))
	}
	return out
}

// TestLifecycle walks one API through every state, checking what serves
// after each call, and that only the published version survives a
// reopen.
func TestLifecycle(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "data-apis.db")
	s := open(t, path)
	a, err := s.Create(ctx, "orders", def(1))
	if err != nil || a.State != Draft || a.Latest != 1 || a.Published != 0 || a.Source != SourceAPI || len(a.Versions) != 1 {
		t.Fatalf("create: %+v, %v", a, err)
	}
	if got := serving(s); got != nil {
		t.Fatalf("a draft serves: %v", got)
	}
	if _, err := s.Create(ctx, "orders", def(1)); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	if _, err := s.Offline(ctx, "orders"); !errors.Is(err, ErrConflict) {
		t.Fatalf("offline of a draft: %v", err)
	}
	if _, err := s.Rollback(ctx, "orders", 0); !errors.Is(err, ErrConflict) {
		t.Fatalf("rollback of a draft: %v", err)
	}
	if _, err := s.Publish(ctx, "orders", 9); !errors.Is(err, ErrNotFound) {
		t.Fatalf("publish of a missing version: %v", err)
	}
	if a, err = s.Publish(ctx, "orders", 1); err != nil || a.State != Published || a.Published != 1 {
		t.Fatalf("publish: %+v, %v", a, err)
	}
	if a, err = s.AddVersion(ctx, "orders", def(2)); err != nil || a.Latest != 2 || a.Published != 1 {
		t.Fatalf("add version: %+v, %v", a, err)
	}
	if got := serving(s); !slices.Equal(got, []string{"orders@1"}) {
		t.Fatalf("after an update: %v, want orders@1 until a publish", got)
	}
	if _, err = s.Publish(ctx, "orders", 0); err != nil {
		t.Fatal(err)
	}
	if got := serving(s); !slices.Equal(got, []string{"orders@2"}) {
		t.Fatalf("after publish: %v", got)
	}
	if _, err := s.Rollback(ctx, "orders", 2); !errors.Is(err, ErrConflict) {
		t.Fatalf("rollback to the published version: %v", err)
	}
	if a, err = s.Rollback(ctx, "orders", 0); err != nil || a.Published != 1 {
		t.Fatalf("rollback: %+v, %v", a, err)
	}
	if a, err = s.Offline(ctx, "orders"); err != nil || a.State != Offline || a.Published != 1 {
		t.Fatalf("offline: %+v, %v", a, err)
	}
	if got := serving(s); got != nil {
		t.Fatalf("offline serves: %v", got)
	}
	if _, err := s.Publish(ctx, "orders", 2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Create(ctx, "draft", def(3)); err != nil {
		t.Fatal(err)
	}
	if c := s.Current().Count; c[Published] != 1 || c[Draft] != 1 || c[Offline] != 0 {
		t.Fatalf("counts %v", c)
	}
	s.Close()
	s = open(t, path)
	if got := serving(s); !slices.Equal(got, []string{"orders@2"}) {
		t.Fatalf("after reopening: %v", got)
	}
	if v, d, err := s.Resolve(ctx, "orders", 0, true); err != nil || v != 1 || string(d) != string(def(1)) {
		t.Fatalf("resolving a rollback: %d %s, %v", v, d, err)
	}
	p, err := s.List(ctx, "", 1)
	if err != nil || len(p.APIs) != 1 || p.APIs[0].Name != "draft" || p.Next != "draft" || p.APIs[0].Versions != nil {
		t.Fatalf("list: %+v, %v", p, err)
	}
	if err := s.Delete(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "orders"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	if got := serving(s); got != nil {
		t.Fatalf("deleted serves: %v", got)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, %v", fi.Mode(), err)
	}
	if v, err := s.SchemaVersion(ctx); err != nil || v != len(migrations) {
		t.Errorf("schema version %d, %v", v, err)
	}
}

// TestVersionEviction: an API keeps at most MaxVersions; the oldest that
// is not the published one goes first.
func TestVersionEviction(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "d.db"))
	if _, err := s.Create(ctx, "a", def(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publish(ctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	var a *API
	var err error
	for i := 2; i <= MaxVersions+2; i++ {
		if a, err = s.AddVersion(ctx, "a", def(i)); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.Versions) != MaxVersions || a.Latest != MaxVersions+2 {
		t.Fatalf("%d versions, latest %d", len(a.Versions), a.Latest)
	}
	if a.Versions[0].Version != 1 || a.Versions[1].Version != 4 {
		t.Fatalf("kept %d, %d first; want the published 1, then 4 (2 and 3 evicted)", a.Versions[0].Version, a.Versions[1].Version)
	}
	if _, err := s.Publish(ctx, "a", 2); !errors.Is(err, ErrNotFound) {
		t.Fatalf("publishing an evicted version: %v", err)
	}
}

// TestInvalidRefused: the store's own checks.
func TestInvalidRefused(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "d.db"))
	var ie *InvalidError
	if _, err := s.Create(ctx, "Bad Name", def(1)); !errors.As(err, &ie) || ie.Problems[0].Field != "name" {
		t.Fatalf("bad name: %v", err)
	}
	if _, err := s.Create(ctx, "x", []byte(`[1]`)); !errors.As(err, &ie) || ie.Problems[0].Field != "definition" {
		t.Fatalf("not an object: %v", err)
	}
	if _, err := s.AddVersion(ctx, "missing", def(1)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("add version to a missing API: %v", err)
	}
}

// TestSeedPrecedence: the file seeds, runtime changes win (docs/apps.md).
func TestSeedPrecedence(t *testing.T) {
	ctx := context.Background()
	s := open(t, filepath.Join(t.TempDir(), "d.db"))
	seed := func(apis ...FileAPI) SeedResult {
		t.Helper()
		res, err := s.Seed(ctx, apis)
		if err != nil || len(res.Failed) > 0 {
			t.Fatalf("seed: %v %v", err, res.Failed)
		}
		return res
	}
	f := func(name string, n int) FileAPI { return FileAPI{Name: name, Definition: def(n)} }
	if res := seed(f("a", 1), f("b", 1), f("c", 1)); len(res.Created) != 3 {
		t.Fatalf("first sight: %+v", res)
	}
	if got := serving(s); !slices.Equal(got, []string{"a@1", "b@1", "c@1"}) {
		t.Fatalf("file routes serve: %v", got)
	}
	// b changed at runtime; c deleted at runtime.
	if _, err := s.AddVersion(ctx, "b", def(20)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Publish(ctx, "b", 2); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	res := seed(f("a", 1), f("b", 1), f("c", 1))
	if !slices.Equal(res.Unchanged, []string{"a", "b"}) || !slices.Equal(res.StayedDeleted, []string{"c"}) {
		t.Fatalf("unchanged file: %+v", res)
	}
	if got := serving(s); !slices.Equal(got, []string{"a@1", "b@2"}) {
		t.Fatalf("after an unchanged seed: %v (the runtime version must stay)", got)
	}
	// The file changes all three.
	res = seed(f("a", 2), f("b", 2), f("c", 2))
	if !slices.Equal(res.Updated, []string{"a"}) || !slices.Equal(res.KeptRuntime, []string{"b"}) || !slices.Equal(res.Created, []string{"c"}) {
		t.Fatalf("changed file: %+v", res)
	}
	if got := serving(s); !slices.Equal(got, []string{"a@2", "b@2", "c@1"}) {
		t.Fatalf("after a changed seed: %v", got)
	}
	b, _ := s.Get(ctx, "b")
	if !b.Overridden || !b.PendingFileChange || b.Source != SourceFile {
		t.Fatalf("b: %+v", b)
	}
	// An API created at runtime under a name the file then uses is kept.
	if _, err := s.Create(ctx, "d", def(1)); err != nil {
		t.Fatal(err)
	}
	res = seed(f("a", 2), f("b", 2), f("c", 2), f("d", 1))
	if !slices.Equal(res.KeptRuntime, []string{"b", "d"}) {
		t.Fatalf("runtime d: %+v", res)
	}
	// Dropped from the file: a and c go (unchanged at runtime), b stays.
	res = seed(f("d", 1))
	if !slices.Equal(res.Removed, []string{"a", "c"}) || !slices.Contains(res.KeptRuntime, "b") {
		t.Fatalf("dropped: %+v", res)
	}
	if got := serving(s); !slices.Equal(got, []string{"b@2"}) {
		t.Fatalf("after dropping: %v", got)
	}
	// A tombstone lasts only while the file lists the name.
	seed(f("e", 1))
	if err := s.Delete(ctx, "e"); err != nil {
		t.Fatal(err)
	}
	if res := seed(f("e", 1)); !slices.Equal(res.StayedDeleted, []string{"e"}) {
		t.Fatalf("tombstoned: %+v", res)
	}
	seed()
	if res := seed(f("e", 1)); !slices.Equal(res.Created, []string{"e"}) {
		t.Fatalf("after the file dropped and listed it again: %+v", res)
	}
}
