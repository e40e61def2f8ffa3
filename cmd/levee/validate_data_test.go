package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// statementCase is one statement of internal/dataquery's
// testdata/statements.json (issue 22): refused (want: a part of the
// error) or accepted.
type statementCase struct {
	Name     string            `json:"name"`
	SQL      string            `json:"sql"`
	Dialects string            `json:"dialects"` // both, postgres or sqlite
	Params   map[string]string `json:"params"`
	Want     string            `json:"want"`
}

func readStatements(t *testing.T) (refused, accepted []statementCase) {
	t.Helper()
	raw, err := os.ReadFile("../../internal/dataquery/testdata/statements.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Refused, Accepted []statementCase }
	if err := json.Unmarshal(raw, &doc); err != nil || len(doc.Refused) == 0 || len(doc.Accepted) == 0 {
		t.Fatalf("statements.json: %v", err)
	}
	return doc.Refused, doc.Accepted
}

// statementsConfig is a file with one data route per statement and
// dialect: routes[i] runs cases[i] (returned) on a PostgreSQL source (not
// contacted by validate) or a SQLite one.
func statementsConfig(t *testing.T, cases []statementCase) (string, []statementCase) {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "local.db")
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `listen: 127.0.0.1:8080
admin: {listen: 127.0.0.1:9901}
data_sources:
  sales: {driver: postgres, dsn: "postgres://levee@127.0.0.1:5432/sales"}
  local: {driver: sqlite, path: %q}
routes:
`, db)
	var order []statementCase
	for _, c := range cases {
		for _, src := range []string{"sales", "local"} {
			if c.Dialects == "postgres" && src == "local" || c.Dialects == "sqlite" && src == "sales" {
				continue
			}
			sql, _ := json.Marshal(c.SQL) // a JSON string is a YAML double-quoted scalar
			fmt.Fprintf(&b, "  - name: r%d\n    match: {path_prefix: /r%d}\n    data:\n      source: %s\n      sql: %s\n",
				len(order), len(order), src, sql)
			for name, typ := range c.Params {
				fmt.Fprintf(&b, "      params: {%s: {type: %s}}\n", name, typ)
			}
			order = append(order, c)
		}
	}
	return writeFile(t, b.String()), order
}

// TestValidateRefusesNonQueries (issue 22): `levee validate` refuses every
// statement that is not one query, naming the route's field path and
// what it found, and accepts the queries. levee run reads the file with
// the same config.Load.
func TestValidateRefusesNonQueries(t *testing.T) {
	refused, accepted := readStatements(t)

	path, order := statementsConfig(t, refused)
	var out, errOut bytes.Buffer
	if code := run([]string{"validate", "-config", path}, &out, &errOut); code != 1 {
		t.Fatalf("validate of %d refused statements: exit %d, want 1\n%s", len(order), code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	if len(lines) != len(order) {
		t.Fatalf("%d error lines for %d routes:\n%s", len(lines), len(order), errOut.String())
	}
	for i, c := range order {
		prefix := fmt.Sprintf("routes[%d].data.sql: ", i)
		if !strings.HasPrefix(lines[i], path+":") || !strings.Contains(lines[i], ": "+prefix) || !strings.Contains(lines[i], c.Want) {
			t.Errorf("%s: %q, want %q and %q", c.Name, lines[i], prefix, c.Want)
		}
	}
	t.Logf("%d refused statements over both dialects: %d lines, e.g. %s", len(order), len(lines), lines[0])

	path, order = statementsConfig(t, accepted)
	out.Reset()
	errOut.Reset()
	if code := run([]string{"validate", "-config", path}, &out, &errOut); code != 0 {
		t.Fatalf("validate of %d accepted statements: exit %d\n%s", len(order), code, errOut.String())
	}
	t.Logf("%d accepted statements over both dialects: valid", len(order))
}
