package config

import (
	"github.com/levee-gw/levee/internal/config/engine"
	"go/ast"
	goparser "go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestWalkerNamesFields checks that every field name the readers write as
// a literal (f["x"], bad["x"], delete(f, "x"), engine.Key(path, "x"),
// firstKey(n, "x"), b.Field("x")) is the name of a field in some table,
// so that a rule across fields cannot drift from the table by a typo.
func TestWalkerNamesFields(t *testing.T) {
	names := map[string]bool{}
	seen := map[*engine.Block]bool{}
	var walk func(b *engine.Block)
	walk = func(b *engine.Block) {
		if seen[b] {
			return
		}
		seen[b] = true
		for _, f := range b.Fields {
			names[f.Name] = true
			if f.Sub != nil {
				walk(f.Sub)
			}
			if f.Item != nil && f.Item.Sub != nil {
				walk(f.Item.Sub)
			}
			for _, form := range f.Either {
				if form.Sub != nil {
					walk(form.Sub)
				}
			}
		}
	}
	walk(rootBlock)

	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		af, err := goparser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		lit := func(e ast.Expr) {
			if bl, ok := e.(*ast.BasicLit); ok && bl.Kind == token.STRING {
				s, _ := strconv.Unquote(bl.Value)
				checked++
				if !names[s] {
					t.Errorf("%s: %q names no field of the tables in fields.go", fset.Position(bl.Pos()), s)
				}
			}
		}
		ast.Inspect(af, func(n ast.Node) bool {
			switch e := n.(type) {
			case *ast.IndexExpr:
				if id, ok := e.X.(*ast.Ident); ok && (id.Name == "f" || id.Name == "bad") {
					lit(e.Index)
				}
			case *ast.CallExpr:
				var name string
				switch fn := e.Fun.(type) {
				case *ast.Ident:
					name = fn.Name
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				}
				switch {
				case (name == "key" || name == "Key" || name == "firstKey" || name == "delete") && len(e.Args) == 2:
					lit(e.Args[1]) // engine.Key(path, "x") since the engine moved out
				case (name == "field" || name == "Field") && len(e.Args) == 1:
					lit(e.Args[0])
				}
			}
			return true
		})
	}
	t.Logf("%d names checked", checked)
	if checked < 50 {
		t.Errorf("checked only %d names; the patterns no longer match the readers", checked)
	}
}
