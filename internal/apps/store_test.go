package apps

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/statedb"
	"github.com/levee-gw/levee/internal/testkit"
)

// ticking returns a Now for timestamps on testkit's Clock that moves one
// second at each reading, so every write has its own time.
func ticking(start time.Time) func() time.Time {
	c := testkit.NewClock(start)
	return func() time.Time {
		c.Advance(time.Second)
		return c.Now()
	}
}

// open opens a store on path (a fresh file in a temp dir when path is "")
// and closes it at cleanup. The log goes to logs when not nil.
func open(t *testing.T, path string, logs *bytes.Buffer) *Store {
	t.Helper()
	if path == "" {
		path = filepath.Join(t.TempDir(), "apps.db")
	}
	// The query timeout is not what these tests test: a long one keeps a
	// write of a thousand apps from timing out on a machine busy with
	// other test processes (TestListCapsPageSize did, at 8.4 s).
	o := Options{Config: statedb.Config{Path: path, Now: ticking(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), QueryTimeout: time.Minute}}
	if logs != nil {
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	s, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

var ctx = context.Background()

func mustCreate(t *testing.T, s *Store, spec Spec) *App {
	t.Helper()
	a, err := s.Create(ctx, spec)
	if err != nil {
		t.Fatalf("Create(%s): %v", spec.ID, err)
	}
	return a
}

func TestCRUD(t *testing.T) {
	s := open(t, "", nil)
	a := mustCreate(t, s, Spec{ID: "safety", Grants: []string{"video", "reports"}, Limits: Limits{Rate: 2.5, Quota: &Quota{Requests: 1000, Per: Duration(24 * time.Hour)}}})
	if a.Name != "safety" || a.Status != StatusActive || a.Source != SourceAPI || a.Limits.Burst != 3 {
		t.Errorf("defaults not applied: %+v", a)
	}
	if strings.Join(a.Grants, ",") != "reports,video" {
		t.Errorf("grants = %v, want sorted", a.Grants)
	}
	if _, err := s.Create(ctx, Spec{ID: "safety"}); !errors.Is(err, ErrExists) {
		t.Errorf("duplicate Create: %v, want ErrExists", err)
	}
	var ve *ValidationError
	if _, err := s.Create(ctx, Spec{ID: "Bad ID"}); !errors.As(err, &ve) || ve.Field != "id" {
		t.Errorf("bad id: %v, want a ValidationError on id", err)
	}
	got, err := s.Get(ctx, "safety")
	if err != nil || got.Limits.Quota.Requests != 1000 || time.Duration(got.Limits.Quota.Per) != 24*time.Hour {
		t.Fatalf("Get = %+v, %v", got, err)
	}
	if _, err := s.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get missing: %v, want ErrNotFound", err)
	}
	name, suspended := "Safety platform", StatusSuspended
	p, err := s.Patch(ctx, "safety", Patch{Name: &name, Status: &suspended, Limits: &Limits{MaxConcurrency: 4}})
	if err != nil || p.Name != name || p.Status != StatusSuspended || p.Limits != (Limits{MaxConcurrency: 4}) || len(p.Grants) != 2 {
		t.Fatalf("Patch = %+v, %v", p, err)
	}
	if !p.Updated.After(p.Created) {
		t.Errorf("Updated %v not after Created %v", p.Updated, p.Created)
	}
	if p.Overridden {
		t.Error("an API app is never Overridden")
	}
	bad := []string{"video", "video"}
	if _, err := s.Patch(ctx, "safety", Patch{Grants: &bad}); !errors.As(err, &ve) || ve.Field != "grants[1]" {
		t.Errorf("duplicate grant: %v", err)
	}
	rl := map[string]RouteLimit{"other": {Rate: 1}}
	if _, err := s.Patch(ctx, "safety", Patch{RouteLimits: &rl}); !errors.As(err, &ve) || ve.Field != "route_limits.other" {
		t.Errorf("route limit outside grants: %v", err)
	}
	if _, err := s.Patch(ctx, "nope", Patch{Name: &name}); !errors.Is(err, ErrNotFound) {
		t.Errorf("Patch missing: %v", err)
	}
	if err := s.Delete(ctx, "safety"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "safety"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	if s.Current().Len() != 0 {
		t.Errorf("snapshot still holds %d apps after Delete", s.Current().Len())
	}
}

func TestValidation(t *testing.T) {
	q := func(n int64, per time.Duration) *Quota { return &Quota{Requests: n, Per: Duration(per)} }
	for _, tc := range []struct {
		spec  Spec
		field string
	}{
		{Spec{ID: ""}, "id"},
		{Spec{ID: strings.Repeat("a", 65)}, "id"},
		{Spec{ID: "a", Name: "tab\there"}, "name"},
		{Spec{ID: "a", Name: strings.Repeat("n", MaxNameLen+1)}, "name"},
		{Spec{ID: "a", Status: "paused"}, "status"},
		{Spec{ID: "a", Grants: []string{"Video"}}, "grants[0]"},
		{Spec{ID: "a", Limits: Limits{Rate: -1}}, "limits.rate"},
		{Spec{ID: "a", Limits: Limits{Rate: 2e9}}, "limits.rate"},
		{Spec{ID: "a", Limits: Limits{Burst: 5}}, "limits.burst"},
		{Spec{ID: "a", Limits: Limits{Rate: 1, Burst: -1}}, "limits.burst"},
		{Spec{ID: "a", Limits: Limits{Quota: q(0, time.Hour)}}, "limits.quota"}, // requests, rows and bytes are each optional, one is needed,
		{Spec{ID: "a", Limits: Limits{Quota: q(1, time.Millisecond)}}, "limits.quota.per"},
		{Spec{ID: "a", Limits: Limits{Quota: q(1, 400*24*time.Hour)}}, "limits.quota.per"},
		{Spec{ID: "a", Limits: Limits{MaxConcurrency: MaxConcurrency + 1}}, "limits.max_concurrency"},
		{Spec{ID: "a", Grants: []string{"v"}, RouteLimits: map[string]RouteLimit{"v": {Rate: -2}}}, "route_limits.v.rate"},
	} {
		tc.spec.Normalize()
		var ve *ValidationError
		if err := tc.spec.Validate(); !errors.As(err, &ve) || ve.Field != tc.field {
			t.Errorf("%+v: %v, want a ValidationError on %s", tc.spec, err, tc.field)
		}
	}
	ok := Spec{ID: "a", Grants: []string{"v"}, Limits: Limits{Rate: 0.5}, RouteLimits: map[string]RouteLimit{"v": {Rate: 10}}}
	ok.Normalize()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	if ok.Limits.Burst != 1 || ok.RouteLimits["v"].Burst != 10 {
		t.Errorf("burst defaults: %+v", ok)
	}
}

// TestKeysPlaintextOnce: CreateKey returns the plaintext once; the
// database holds only its SHA-256 (checked with SQL and on the raw file),
// the snapshot admits it at once, and revoking it stops that at once.
func TestKeysPlaintextOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apps.db")
	s := open(t, path, nil)
	mustCreate(t, s, Spec{ID: "app"})
	nk, err := s.CreateKey(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(nk.Plaintext, "lvk_") || len(nk.Plaintext) != 47 || !strings.HasPrefix(nk.Plaintext, nk.Prefix) || len(nk.Prefix) != 8 {
		t.Fatalf("key %q prefix %q", nk.Plaintext, nk.Prefix)
	}
	sum := sha256.Sum256([]byte(nk.Plaintext))
	if nk.SHA256 != hex.EncodeToString(sum[:]) || nk.ID != nk.SHA256[:12] {
		t.Errorf("hash %s id %s", nk.SHA256, nk.ID)
	}
	a, _, err := s.Current().Authenticate(sum)
	if err != nil || a.ID != "app" {
		t.Fatalf("Authenticate = %v, %v", a, err)
	}
	got, _ := s.Get(ctx, "app")
	if len(got.Keys) != 1 || got.Keys[0].ID != nk.ID || !got.Keys[0].Active() {
		t.Errorf("keys = %+v", got.Keys)
	}

	raw, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var dump strings.Builder
	rows, err := raw.Query(`SELECT app_id, id, prefix, sha256, source FROM app_keys`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var app, id, prefix, sha, source string
		if err := rows.Scan(&app, &id, &prefix, &sha, &source); err != nil {
			t.Fatal(err)
		}
		n++
		fmt.Fprintln(&dump, app, id, prefix, sha, source)
		if sha != nk.SHA256 || prefix != nk.Prefix {
			t.Errorf("stored row %s %s %s %s", app, id, prefix, sha)
		}
	}
	rows.Close()
	if n != 1 || strings.Contains(dump.String(), nk.Plaintext) {
		t.Errorf("%d key rows; plaintext stored: %v", n, strings.Contains(dump.String(), nk.Plaintext))
	}
	s.Close()
	for _, f := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(nk.Plaintext)) || bytes.Contains(b, []byte(nk.Plaintext[4:])) {
			t.Errorf("%s contains the plaintext key", f)
		}
	}

	s = open(t, path, nil)
	if _, err := s.RevokeKey(ctx, "app", "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("revoke unknown key: %v", err)
	}
	k, err := s.RevokeKey(ctx, "app", nk.ID)
	if err != nil || k.Active() {
		t.Fatalf("RevokeKey = %+v, %v", k, err)
	}
	if _, _, err := s.Current().Authenticate(sum); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("revoked key authenticates: %v", err)
	}
	if _, err := s.RevokeKey(ctx, "app", nk.ID); !errors.Is(err, ErrConflict) {
		t.Errorf("second revoke: %v, want ErrConflict", err)
	}
	if _, err := s.CreateKey(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("CreateKey for a missing app: %v", err)
	}
}

func TestKeyBounds(t *testing.T) {
	s := open(t, "", nil)
	mustCreate(t, s, Spec{ID: "app"})
	var ids []string
	for range MaxActiveKeys {
		nk, err := s.CreateKey(ctx, "app")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, nk.ID)
	}
	if _, err := s.CreateKey(ctx, "app"); !errors.Is(err, ErrConflict) {
		t.Fatalf("key %d: %v, want ErrConflict", MaxActiveKeys+1, err)
	}
	// Revoke and replace more than MaxRevokedKeys keys: the oldest
	// revoked ones are dropped, the active ones kept.
	for i := range MaxRevokedKeys + 4 {
		if _, err := s.RevokeKey(ctx, "app", ids[i]); err != nil {
			t.Fatal(err)
		}
		nk, err := s.CreateKey(ctx, "app")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, nk.ID)
	}
	a, _ := s.Get(ctx, "app")
	active, revoked := 0, 0
	for _, k := range a.Keys {
		if k.Active() {
			active++
		} else {
			revoked++
		}
	}
	if active != MaxActiveKeys || revoked != MaxRevokedKeys {
		t.Errorf("active %d revoked %d, want %d and %d", active, revoked, MaxActiveKeys, MaxRevokedKeys)
	}
}

func TestSuspendedAppKey(t *testing.T) {
	s := open(t, "", nil)
	mustCreate(t, s, Spec{ID: "app", Status: StatusSuspended})
	nk, _ := s.CreateKey(ctx, "app")
	sum := sha256.Sum256([]byte(nk.Plaintext))
	if a, _, err := s.Current().Authenticate(sum); !errors.Is(err, ErrSuspended) || a == nil || a.ID != "app" {
		t.Errorf("Authenticate = %v, %v; want ErrSuspended", a, err)
	}
	if _, _, err := s.Current().Authenticate(sha256.Sum256([]byte("lvk_other"))); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("unknown key: %v", err)
	}
}

func TestListPagination(t *testing.T) {
	s := open(t, "", nil)
	for i := range 25 {
		mustCreate(t, s, Spec{ID: fmt.Sprintf("app-%02d", i)})
	}
	var seen []string
	after, pages := "", 0
	for {
		p, err := s.List(ctx, after, 10)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, a := range p.Apps {
			seen = append(seen, a.ID)
		}
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if pages != 3 || len(seen) != 25 || seen[0] != "app-00" || seen[24] != "app-24" {
		t.Errorf("%d pages, %d apps: %v", pages, len(seen), seen)
	}
	p, _ := s.List(ctx, "", 0)
	if len(p.Apps) != 25 || p.Next != "" {
		t.Errorf("default page: %d apps, next %q", len(p.Apps), p.Next)
	}
	p, _ = s.List(ctx, "", MaxPageSize*10)
	if len(p.Apps) != 25 {
		t.Errorf("huge limit: %d apps", len(p.Apps))
	}
	p, _ = s.List(ctx, "app-24", 5)
	if len(p.Apps) != 0 || p.Next != "" {
		t.Errorf("past the end: %+v", p)
	}
}

// TestListCapsPageSize: a limit above MaxPageSize returns MaxPageSize
// apps and a cursor.
func TestListCapsPageSize(t *testing.T) {
	if testing.Short() {
		t.Skip("creates MaxPageSize+1 apps")
	}
	s := open(t, "", nil)
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for i := range MaxPageSize + 1 {
			if err := insertApp(ctx, tx, Spec{ID: fmt.Sprintf("a%04d", i), Name: "a", Status: StatusActive}, SourceAPI, "", time.Now()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := s.List(ctx, "", MaxPageSize+50)
	if err != nil || len(p.Apps) != MaxPageSize || p.Next != fmt.Sprintf("a%04d", MaxPageSize-1) {
		t.Fatalf("%d apps, next %q, %v", len(p.Apps), p.Next, err)
	}
}

// TestReopenPersists: state survives closing and reopening the file, and
// the snapshot is rebuilt from it.
func TestReopenPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apps.db")
	s := open(t, path, nil)
	mustCreate(t, s, Spec{ID: "one", Grants: []string{"video"}, RouteLimits: map[string]RouteLimit{"video": {Rate: 10, Burst: 20}}})
	nk, _ := s.CreateKey(ctx, "one")
	s.Close()
	s = open(t, path, nil)
	a, ok := s.Current().App("one")
	if !ok || a.RouteLimits["video"] != (RouteLimit{Rate: 10, Burst: 20}) || len(a.Keys) != 1 || a.Keys[0].ID != nk.ID {
		t.Fatalf("after reopen: %+v", a)
	}
	if _, _, err := s.Current().Authenticate(sha256.Sum256([]byte(nk.Plaintext))); err != nil {
		t.Errorf("key after reopen: %v", err)
	}
}

// TestMigrationsFromEmpty: a new file gets every migration and the
// current version; a file from a newer levee is refused.
func TestMigrationsFromEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apps.db")
	s := open(t, path, nil)
	if v, err := s.SchemaVersion(ctx); err != nil || v != len(migrations) {
		t.Fatalf("version %d, %v; want %d", v, err, len(migrations))
	}
	var mode string
	if err := s.st.DB.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Errorf("journal_mode %q, %v", mode, err)
	}
	if _, err := s.st.DB.Exec(`UPDATE schema_version SET version = ?`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(ctx, Options{Config: statedb.Config{Path: path}})
	if err == nil || !strings.Contains(err.Error(), "newer than this levee knows") {
		t.Fatalf("newer schema: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v, %v", fi.Mode(), err)
	}
}

// TestOnChangeOrdered: every committed write calls OnChange with a
// snapshot that already shows it.
func TestOnChangeOrdered(t *testing.T) {
	var got []int
	s, err := Open(ctx, Options{Config: statedb.Config{Path: filepath.Join(t.TempDir(), "apps.db")}, OnChange: func(s *Snapshot) { got = append(got, s.Len()) }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustCreate(t, s, Spec{ID: "a"})
	mustCreate(t, s, Spec{ID: "b"})
	_ = s.Delete(ctx, "a")
	if fmt.Sprint(got) != "[1 2 1]" {
		t.Errorf("OnChange lengths %v, want [1 2 1]", got)
	}
}

func TestDeadline(t *testing.T) {
	s := open(t, "", nil)
	c, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Create(c, Spec{ID: "a"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Create with a cancelled context: %v", err)
	}
	if _, err := s.List(c, "", 1); err == nil {
		t.Error("List with a cancelled context succeeded")
	}
}
