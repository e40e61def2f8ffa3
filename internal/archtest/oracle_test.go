package archtest

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOraclesOnlyInTests: a package the architecture table describes as
// "imported by tests only" (test oracles and service starters, such as
// internal/openapi/openapitest and internal/testsvc) is allowed in no
// package's imports, so no production file can import it (the table is
// an allow-list for non-test files).
func TestOraclesOnlyInTests(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var testOnly []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(sc.Text(), "|")
		if strings.HasPrefix(sc.Text(), "| `") && len(cells) >= 5 && strings.Contains(cells[2], "imported by tests only") {
			testOnly = append(testOnly, strings.Trim(strings.TrimSpace(cells[1]), "`"))
		}
	}
	if !containsString(testOnly, "internal/openapi/openapitest") {
		t.Fatalf("the table does not describe internal/openapi/openapitest as imported by tests only: %v", testOnly)
	}
	for pkg, set := range allowedImports(t, root) {
		for _, o := range testOnly {
			if set[o] {
				t.Errorf("docs/architecture.md lets %s import %s, which is imported by tests only", pkg, o)
			}
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
