package archtest

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// maxFileLines is the length past which a file under internal/ must say
// why it stays whole. Longer files are usually several topics; split them
// along a seam into files of one topic each (docs/contributing.md).
const maxFileLines = 600

// overLongMarker is what a long file's header says, followed by the reason:
// "Over 600 lines: ...". The header is any comment before the file's first
// declaration other than its imports.
const overLongMarker = "over 600 lines"

// noExemptionDir holds no file over maxFileLines, header or not, tests
// included:
// internal/config is laid out one file per YAML block (issue 23), so a
// file that long is two blocks or an engine part in the wrong place.
const noExemptionDir = "internal/config/"

// TestLongFilesSayWhy: every Go file under internal/ has at most
// maxFileLines lines, or a header comment stating why it stays whole.
func TestLongFilesSayWhy(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := bytes.Count(src, []byte("\n"))
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if lines <= maxFileLines {
			return nil
		}
		if strings.HasPrefix(rel, noExemptionDir) {
			t.Errorf("%s: %d lines (over %d); %s is laid out one file per YAML block and takes no exemption: split it", rel, lines, maxFileLines, noExemptionDir)
			return nil
		}
		if !saysWhy(t, path, src) {
			t.Errorf("%s: %d lines (over %d) and no header comment saying %q and why it stays whole; split it by topic or state the reason", rel, lines, maxFileLines, "Over 600 lines: ...")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// saysWhy reports whether a comment before the file's first non-import
// declaration holds overLongMarker.
func saysWhy(t *testing.T, path string, src []byte) bool {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return true
	}
	end := f.End()
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.IMPORT {
			continue
		}
		end = d.Pos()
		if g, ok := d.(*ast.GenDecl); ok && g.Doc != nil {
			end = g.Doc.Pos()
		} else if fd, ok := d.(*ast.FuncDecl); ok && fd.Doc != nil {
			end = fd.Doc.Pos()
		}
		break
	}
	for _, c := range f.Comments {
		if c.Pos() < end && strings.Contains(strings.ToLower(c.Text()), overLongMarker) {
			return true
		}
	}
	return false
}
