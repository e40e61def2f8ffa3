package dataquery

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// statementCase is one statement of testdata/statements.json: refused
// (want: a part of the error) or accepted (want "").
type statementCase struct {
	Name     string            `json:"name"`
	SQL      string            `json:"sql"`
	Dialects string            `json:"dialects"` // both, postgres or sqlite
	Params   map[string]string `json:"params"`   // name: type, each optional
	Want     string            `json:"want"`
}

func (c statementCase) dialects() []Dialect {
	switch c.Dialects {
	case "postgres":
		return []Dialect{Postgres}
	case "sqlite":
		return []Dialect{SQLite}
	}
	return []Dialect{Postgres, SQLite}
}

func (c statementCase) params(t testing.TB) []Param {
	var ps []Param
	for name, typ := range c.Params {
		k, err := ParseKind(typ)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		ps = append(ps, Param{Name: name, Type: k})
	}
	return ps
}

// statements reads testdata/statements.json.
func statements(t testing.TB) (refused, accepted []statementCase) {
	t.Helper()
	raw, err := os.ReadFile("testdata/statements.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Refused, Accepted []statementCase }
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Refused) < 40 || len(doc.Accepted) < 30 {
		t.Fatalf("testdata/statements.json: %d refused, %d accepted", len(doc.Refused), len(doc.Accepted))
	}
	for _, c := range doc.Refused {
		if c.Want == "" {
			t.Fatalf("testdata/statements.json: refused %q says no error", c.Name)
		}
	}
	for _, c := range doc.Accepted {
		if c.Want != "" {
			t.Fatalf("testdata/statements.json: accepted %q wants an error", c.Name)
		}
	}
	return doc.Refused, doc.Accepted
}

// TestStatementCheck: CompileSQL refuses every statement that is not one
// query, saying what it found and where, and accepts the queries.
func TestStatementCheck(t *testing.T) {
	refused, accepted := statements(t)
	for _, tc := range append(refused, accepted...) {
		for _, d := range tc.dialects() {
			_, err := CompileSQL(tc.SQL, tc.params(t), nil, d)
			switch {
			case tc.Want == "" && err != nil:
				t.Errorf("%s (%v): %q refused: %v", tc.Name, d, tc.SQL, err)
			case tc.Want != "" && err == nil:
				t.Errorf("%s (%v): %q accepted, want %q", tc.Name, d, tc.SQL, tc.Want)
			case tc.Want != "" && !strings.Contains(err.Error(), tc.Want):
				t.Errorf("%s (%v): %q: %v, want %q", tc.Name, d, tc.SQL, err, tc.Want)
			}
		}
	}
}

// TestTrailingSemicolonDropped: the one ';' allowed at the end, and the
// comments after it, are not part of the bound statement, so a paged
// statement wraps as a subquery.
func TestTrailingSemicolonDropped(t *testing.T) {
	for _, d := range []Dialect{Postgres, SQLite} {
		q := mustSQL(t, ordersSQL+" ; -- the end", []Param{{Name: "customer_id", Type: Int64, Required: true}}, ordersPage(), d)
		for _, paged := range []bool{false, true} {
			b, err := q.Bind(query(t, "customer_id=3"), paged)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(b.SQL, ";") || strings.Contains(b.SQL, "the end") {
				t.Errorf("%v paged %v: %q", d, paged, b.SQL)
			}
		}
	}
}
