package apps

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// view is what both stores must agree on for one app (timestamps and
// generated keys aside).
func view(a *App) string {
	keys := make([]string, 0, len(a.Keys))
	for _, k := range a.Keys {
		id := k.ID
		if k.Source == SourceAPI {
			id = "api" // generated: different in each store
		}
		keys = append(keys, fmt.Sprintf("%s/%s/%v", id, k.Source, k.Active()))
	}
	slices.Sort(keys)
	return fmt.Sprintf("%s %s %s %v %+v %v %s overridden=%v pending=%v keys=%v", a.ID, a.Name, a.Status, a.Grants, a.Limits,
		a.RouteLimits, a.Source, a.Overridden, a.PendingFileChange, keys)
}

// errClass names the store error class the admin API maps to a status.
func errClass(err error) string {
	var ve *ValidationError
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &ve):
		return "invalid " + ve.Field
	case errors.Is(err, ErrNotFound):
		return "not found"
	case errors.Is(err, ErrExists):
		return "exists"
	case errors.Is(err, ErrConflict):
		return "conflict"
	}
	return err.Error()
}

// TestStateMatchesStore: random sequences of creates, patches, deletes,
// key creations and revocations and file seedings give the same apps and
// the same error classes through the SQLite Store and through State (the
// rules cluster mode's etcd store applies), step by step.
func TestStateMatchesStore(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		s := open(t, "", nil)
		st := NewState()
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		ids := []string{"a", "b", "c"}
		fileKeys := []string{HashKey("k1"), HashKey("k2"), HashKey("k3")}
		for step := range 60 {
			id := ids[rng.IntN(len(ids))]
			var e1, e2 error
			var what string
			switch rng.IntN(6) {
			case 0:
				spec := Spec{ID: id, Grants: []string{"r1"}}
				_, e1 = s.Create(ctx, spec)
				_, e2 = st.Create(spec, now)
				what = "create " + id
			case 1:
				name := fmt.Sprint("n", rng.IntN(3))
				status := []Status{StatusActive, StatusSuspended}[rng.IntN(2)]
				p := Patch{Name: &name, Status: &status}
				_, e1 = s.Patch(ctx, id, p)
				_, e2 = st.Patch(id, p, now)
				what = "patch " + id
			case 2:
				e1, e2 = s.Delete(ctx, id), st.Delete(id)
				what = "delete " + id
			case 3:
				_, e1 = s.CreateKey(ctx, id)
				nk, err := NewAPIKey(now)
				if err != nil {
					t.Fatal(err)
				}
				e2 = st.AddKey(id, nk, now)
				what = "key " + id
			case 4:
				a, ok := s.Current().App(id)
				if !ok || len(a.Keys) == 0 {
					continue
				}
				k := a.Keys[rng.IntN(len(a.Keys))]
				if k.Source == SourceAPI {
					continue // generated ids differ between the stores
				}
				_, e1 = s.RevokeKey(ctx, id, k.ID)
				_, e2 = st.RevokeKey(id, k.ID, now)
				what = "revoke " + id + " " + k.ID
			case 5:
				var file []FileApp
				for i, fid := range ids[:1+rng.IntN(len(ids))] {
					fa := FileApp{Spec: Spec{ID: fid, Name: fmt.Sprint("file", rng.IntN(2)), Grants: []string{"r1"}}}
					if rng.IntN(2) == 0 {
						fa.KeySHA256 = []string{fileKeys[i]}
					}
					file = append(file, fa)
				}
				r1, err1 := s.Seed(ctx, file)
				r2, err2 := st.Seed(file, now, func(string, ...any) {})
				e1, e2 = err1, err2
				if fmt.Sprint(r1.Created, r1.Updated, r1.Unchanged, r1.KeptRuntime, r1.StayedDeleted, r1.Removed) !=
					fmt.Sprint(r2.Created, r2.Updated, r2.Unchanged, r2.KeptRuntime, r2.StayedDeleted, r2.Removed) {
					t.Fatalf("seed %d step %d: seeding results differ: %+v vs %+v", seed, step, r1, r2)
				}
				what = fmt.Sprint("seed ", len(file))
			}
			if errClass(e1) != errClass(e2) {
				t.Fatalf("seed %d step %d %s: SQLite %v, State %v", seed, step, what, e1, e2)
			}
			snap, err := st.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			var got, want []string
			for _, a := range s.Current().Apps() {
				want = append(want, view(a))
			}
			for _, a := range snap.Apps() {
				got = append(got, view(a))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d step %d %s:\nSQLite %v\nState  %v", seed, step, what, want, got)
			}
		}
	}
}
