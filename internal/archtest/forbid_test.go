package archtest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// forbidden are imports and calls a package's non-test code may not make,
// beyond the architecture table's levee imports: the gateway composes
// (config -> options -> wire), so it compares typed values instead of
// reflecting, and declares no metric family (each is declared in the
// package whose stats it reads).
var forbidden = []struct {
	pkg     string
	imports []string // standard or outside import paths
	calls   []string // source text, e.g. "prometheus.NewDesc("
}{
	{pkg: "internal/gateway", imports: []string{"reflect"}, calls: []string{"prometheus.NewDesc("}},
}

func TestForbiddenImportsAndCalls(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range forbidden {
		files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(f.pkg), "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", f.pkg, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			file, err := parser.ParseFile(token.NewFileSet(), path, src, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range file.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range f.imports {
					if p == bad {
						t.Errorf("%s imports %q, which %s may not (compare typed values; see docs/architecture.md)", path, p, f.pkg)
					}
				}
			}
			for _, bad := range f.calls {
				if strings.Contains(string(src), bad) {
					t.Errorf("%s calls %s, which %s may not: declare the family in the package whose stats it reads", path, strings.TrimSuffix(bad, "("), f.pkg)
				}
			}
		}
	}
}
