// Package archtest checks that the imports between levee's packages follow
// the table in docs/architecture.md, so the documented layering cannot
// silently rot.
package archtest

import (
	"bufio"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/levee-gw/levee/"

// allowedImports parses the "may import" column of the architecture table.
func allowedImports(t *testing.T, root string) map[string]map[string]bool {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	allowed := map[string]map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			continue
		}
		pkg := strings.Trim(strings.TrimSpace(cells[1]), "`")
		set := map[string]bool{}
		for _, dep := range strings.Split(cells[3], ",") {
			dep = strings.Trim(strings.TrimSpace(dep), "`")
			if dep == "" || dep == "(none)" {
				continue
			}
			// Short names are internal packages; a name that is a
			// directory at the module root (the public client) is itself.
			if st, err := os.Stat(filepath.Join(root, dep)); err == nil && st.IsDir() && dep != "internal" {
				set[dep] = true
			} else {
				set["internal/"+dep] = true
			}
		}
		allowed[pkg] = set
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return allowed
}

func TestImportsFollowArchitectureTable(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	allowed := allowedImports(t, root)
	if len(allowed) < 5 {
		t.Fatalf("architecture table not found or too small: %v", allowed)
	}
	seen := map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == "testdata" || strings.HasPrefix(name, ".") || name == "bin" || name == "bench" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		seen[pkg] = true
		set, ok := allowed[pkg]
		if !ok {
			t.Errorf("%s: package %s is missing from the table in docs/architecture.md", path, pkg)
			return nil
		}
		file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, imp := range file.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !strings.HasPrefix(p, module) {
				continue
			}
			dep := strings.TrimPrefix(p, module)
			if !set[dep] {
				t.Errorf("%s imports %s, which docs/architecture.md does not allow for %s", path, dep, pkg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var stale []string
	for pkg := range allowed {
		if !seen[pkg] && pkg != "internal/archtest" {
			stale = append(stale, pkg)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("docs/architecture.md lists packages that do not exist: %v", stale)
	}
}
