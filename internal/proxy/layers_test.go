package proxy

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"sort"
	"strings"
	"testing"
)

// TestAttemptCallsOnlyDown holds the request path's layering
// (docs/contributing.md, "A step of the request path"): the attempt, the
// retry decision, the exchange's answers and the responder call no
// function of handler.go and no method of the Handler, and ServeHTTP stays
// a short sequence of steps. By name, over the package's own files: a
// helper there that shares a name with a Handler method would be a false
// alarm, to be renamed.
func TestAttemptCallsOnlyDown(t *testing.T) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]*ast.File{}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = f
	}
	up := map[string]string{} // the names the lower layers must not call, and why
	for name, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			switch {
			case fd.Recv != nil && receiverIs(fd.Recv, "Handler"):
				up[fd.Name.Name] = "a Handler method (" + name + ")"
			case name == "handler.go":
				up[fd.Name.Name] = "declared in handler.go"
			}
			if name == "handler.go" && fd.Name.Name == "ServeHTTP" {
				start, end := fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line
				if n := end - start + 1; n >= 60 {
					t.Errorf("ServeHTTP is %d lines, want under 60: a step belongs in admit.go", n)
				}
			}
		}
	}
	var found []string
	for _, name := range []string{"attempt.go", "retry.go", "failover.go", "exchange.go", "copy.go", "relay.go", "clientbody.go"} {
		f, ok := files[name]
		if !ok {
			t.Fatalf("%s is gone: update this test's list of the attempt's files", name)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			c, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			var id *ast.Ident
			switch fn := c.Fun.(type) {
			case *ast.Ident:
				id = fn
			case *ast.SelectorExpr:
				id = fn.Sel
			}
			if id != nil {
				if why, bad := up[id.Name]; bad {
					found = append(found, fset.Position(c.Pos()).String()+": "+id.Name+", "+why)
				}
			}
			return true
		})
	}
	sort.Strings(found)
	for _, f := range found {
		t.Errorf("calls back up: %s", f)
	}
	if len(up) < 5 {
		t.Fatalf("found only %d Handler methods and handler.go functions: the test reads the wrong files", len(up))
	}
}

func receiverIs(recv *ast.FieldList, typ string) bool {
	if len(recv.List) != 1 {
		return false
	}
	x := recv.List[0].Type
	if s, ok := x.(*ast.StarExpr); ok {
		x = s.X
	}
	id, ok := x.(*ast.Ident)
	return ok && id.Name == typ
}
