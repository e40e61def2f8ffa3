package valuekind

import "testing"

// TestTable holds the table's invariants: unique names, parameter kinds
// first, each with a sample and a schema, and every filter form a
// parameter kind.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	params := true
	for _, s := range All() {
		if seen[s.Name] {
			t.Errorf("kind %q twice", s.Name)
		}
		seen[s.Name] = true
		if s.Param && !params {
			t.Errorf("parameter kind %q after a column-only kind", s.Name)
		}
		params = s.Param
		if s.Param && (s.Sample == "" || len(s.ParamSchema) == 0) {
			t.Errorf("parameter kind %q: sample %q, schema %v", s.Name, s.Sample, s.ParamSchema)
		}
		if !s.Param && s.Sample != "" {
			t.Errorf("column-only kind %q has a sample", s.Name)
		}
		if s.Filter != "" {
			if f, ok := Lookup(s.Filter); !ok || !f.Param {
				t.Errorf("kind %q filters as %q, not a parameter kind", s.Name, s.Filter)
			}
		}
		if s.Value == "" {
			t.Errorf("kind %q: no Go value type", s.Name)
		}
	}
	if got := len(ParamNames()); got != 7 {
		t.Errorf("%d parameter kinds, want 7 (dataquery.Kind's)", got)
	}
	if _, ok := Lookup("int32"); ok {
		t.Error("Lookup(int32) found a kind")
	}
}
