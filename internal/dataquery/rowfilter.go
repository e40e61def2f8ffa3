package dataquery

import "fmt"

// MaxRowFilters bounds a table-mode route's row filters.
const MaxRowFilters = 8

// compileRowFilters checks spec.RowFilters and compiles each into an
// equality on its column (see TableSpec).
func (t *TableQuery) compileRowFilters(spec TableSpec, d Dialect) error {
	if len(spec.RowFilters) > MaxRowFilters {
		return fmt.Errorf("row filters: %d, at most %d", len(spec.RowFilters), MaxRowFilters)
	}
	for _, name := range spec.RowFilters {
		ci, ok := t.columns[name]
		_, isFilter := t.findex[name]
		switch {
		case !ok:
			return fmt.Errorf("row filter %q is not one of the columns", clip(name))
		case name == "limit" || name == "cursor" || reservedKey(name):
			return fmt.Errorf("row filter %q is a query key of its own and cannot be a row filter's column", name)
		case isFilter:
			return fmt.Errorf("row filter %q is also a filter: a bound column cannot be filtered by the request", name)
		}
		if _, dup := t.rindex[name]; dup {
			return fmt.Errorf("row filter %q listed twice", name)
		}
		c := spec.Columns[ci]
		f := tableFilter{name: name, quoted: d.QuoteIdent(name), dbCheck: dbCheckOf(d, c.DBType), ops: 1 << OpEq}
		f.rule, _ = newRule("", c.Kind, false, 0, 0, "", "")
		if t.rindex == nil {
			t.rindex = map[string]int{}
		}
		t.rindex[name] = len(t.rows)
		t.rows = append(t.rows, f)
	}
	return nil
}
