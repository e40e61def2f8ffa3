package archtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakefileNamesExist: every test the Makefile's load step names
// (LOAD_TEST_NAMES) and every fuzz target it runs (FUZZ_TARGETS) is
// declared in the package it is run from, so a test renamed or removed does
// not silently drop out of `make test` (a `-run` pattern matching nothing
// passes).
func TestMakefileNamesExist(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]map[string]bool{} // package dir -> test and fuzz function names
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)\w+)\(`)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range decl.FindAllSubmatch(b, -1) {
			if declared[dir] == nil {
				declared[dir] = map[string]bool{}
			}
			declared[dir][string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	anywhere := func(name string) bool {
		for _, names := range declared {
			if names[name] {
				return true
			}
		}
		return false
	}
	block := func(variable string) []string {
		_, rest, ok := strings.Cut(string(mk), "\n"+variable+" := \\\n")
		if !ok {
			t.Fatalf("Makefile has no %s block", variable)
		}
		var lines []string
		for _, line := range strings.Split(rest, "\n") {
			line = strings.TrimSpace(line)
			more := strings.HasSuffix(line, "\\")
			if line = strings.TrimSpace(strings.TrimSuffix(line, "\\")); line != "" {
				lines = append(lines, line)
			}
			if !more {
				break
			}
		}
		return lines
	}
	// The packages the load step runs the names in: the ./dirs on its
	// `-run '^($(LOAD_TESTS))$$'` lines.
	loadDirs := map[string]bool{}
	for _, line := range strings.Split(string(mk), "\n") {
		if !strings.Contains(line, "$(LOAD_TESTS)") || !strings.Contains(line, "-run") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if strings.HasPrefix(f, "./") {
				loadDirs[filepath.Clean(strings.TrimPrefix(f, "./"))] = true
			}
		}
	}
	for _, name := range block("LOAD_TEST_NAMES") {
		ran := false
		for dir := range loadDirs {
			ran = ran || declared[dir][name]
		}
		switch {
		case !anywhere(name):
			t.Errorf("Makefile LOAD_TEST_NAMES names %s, which no test file declares", name)
		case !ran:
			t.Errorf("Makefile LOAD_TEST_NAMES names %s, which none of the load step's packages declares", name)
		}
	}
	for _, target := range block("FUZZ_TARGETS") {
		pkg, name, ok := strings.Cut(target, ":")
		name, _, _ = strings.Cut(name, ":")
		if !ok {
			t.Errorf("Makefile FUZZ_TARGETS entry %q is not package:Target:executions", target)
			continue
		}
		if dir := filepath.Clean(strings.TrimPrefix(pkg, "./")); !declared[dir][name] {
			t.Errorf("Makefile FUZZ_TARGETS runs %s in %s, which declares no such fuzz target", name, pkg)
		}
	}
}
