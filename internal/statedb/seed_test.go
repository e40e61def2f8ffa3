package statedb

import "testing"

// TestDecide: the precedence rule of docs/apps.md, case by case.
func TestDecide(t *testing.T) {
	const h, other = "hash-now", "hash-before"
	tests := []struct {
		name string
		e    Entry
		want Action
	}{
		{"first sight", Entry{}, Create},
		{"tombstone, same definition", Entry{Tombstone: h}, StayDeleted},
		{"tombstone, changed definition", Entry{Tombstone: other}, Create},
		{"unchanged, untouched", Entry{Exists: true, FromFile: true, FileHash: h}, Unchanged},
		{"unchanged, changed at runtime", Entry{Exists: true, FromFile: true, FileHash: h, Overridden: true}, Unchanged},
		{"changed, untouched", Entry{Exists: true, FromFile: true, FileHash: other}, Apply},
		{"changed, changed at runtime", Entry{Exists: true, FromFile: true, FileHash: other, Overridden: true}, KeepRuntime},
		{"created at runtime", Entry{Exists: true}, KeepRuntime},
	}
	for _, tt := range tests {
		if got := Decide(tt.e, h); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
	var r SeedResult
	for _, a := range []Action{Create, StayDeleted, Unchanged, Apply, KeepRuntime} {
		r.Record(a, "x")
	}
	if len(r.Created)+len(r.StayedDeleted)+len(r.Unchanged)+len(r.Updated)+len(r.KeptRuntime) != 5 || len(r.Removed) != 0 {
		t.Errorf("Record: %+v", r)
	}
}
