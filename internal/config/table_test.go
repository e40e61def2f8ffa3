package config

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/levee-gw/levee/internal/config/engine"
)

// tableSamples returns every valid sample file (testdata/valid and
// ExampleYAML) by name: together they set every block of the file.
func tableSamples(t *testing.T) map[string][]byte {
	t.Helper()
	files, err := filepath.Glob("testdata/valid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/valid files: %v", err)
	}
	db := filepath.Join(t.TempDir(), "demo.db")
	if err := os.WriteFile(db, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{"ExampleYAML": []byte(ExampleYAML), "defaults": []byte(defaultsSample + "    path: " + db + "\n")}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(f)] = b
	}
	return out
}

// defaultsSample sets every optional block with only what it requires,
// so each field with a default is omitted somewhere (the samples under
// testdata/valid set most of them to show them). The sqlite path is
// appended.
const defaultsSample = `listen: ":8080"
admin: {listen: "127.0.0.1:9901"}
memory: {limit: 1GiB}
cluster:
  redis: {address: "127.0.0.1:6379"}
  etcd: {endpoints: ["127.0.0.1:2379"]}
log: {access: {}}
tracing: {endpoint: "http://127.0.0.1:4318"}
upstreams:
  api:
    endpoints: [{address: "127.0.0.1:9000", zone: a}]
    health_check: {http: {}}
    outlier_detection: {}
    zones: {local: a}
routes:
  - {name: api, upstream: api}
  - name: orders
    match: {path_prefix: /orders}
    data:
      source: local
      sql: SELECT id FROM orders WHERE id = :id ORDER BY id
      params: {id: {type: int64}}
      page: {keyset: [id]}
      limits: {}
apps:
  - {id: one}
data_sources:
  local:
    driver: sqlite
`

// loaderDefaultExceptions are the fields whose omitted value the loader
// does not take from the table's def, and why (the table's doc says so).
var loaderDefaultExceptions = map[string]string{
	// A data source's limits default to an adaptive limit up to
	// max_conns whose queue_timeout is 500ms (dataSourceLimits).
	"data_sources.*.limits.queue_timeout": "500ms in front of a data source",
}

// TestEngineBoundsAreConfigs: the engine's bounds that stand for one of
// config's are equal to it (the engine imports no levee package).
func TestEngineBoundsAreConfigs(t *testing.T) {
	if engine.MaxSuggestKeyLen != maxNameLen {
		t.Errorf("engine.MaxSuggestKeyLen is %d, the longest name (limits.MaxIDLen) %d", engine.MaxSuggestKeyLen, maxNameLen)
	}
}

// tableField is one field of one block, as the tables describe it.
type tableField struct {
	b *engine.Block
	f *engine.Field
}

// TestFieldTableDrivesDefaultsReloadAndDocs: a field's default, reload
// rule and docs row come from its table entry. Nothing is mutated in the
// tables; for every field of every table:
//   - defaults: in each sample file, every field the file omits (or sets
//     to null) holds, after Parse, the table's def (walking the parsed
//     Config beside the YAML), and every field with a def is seen omitted
//     in some sample, so none is left unchecked;
//   - reload: changing one field of a parsed Config (a fresh parse, so
//     nothing is shared) is refused by ReloadRefusals, the rule the
//     gateway's reload applies, exactly when the table marks it or the
//     block holding it restart (or, engine.RestartOnOff, when the block is set
//     or omitted), with the table's path and message;
//   - docs: the generated field reference has the field's row, with the
//     table's doc, default and reload rule.
func TestFieldTableDrivesDefaultsReloadAndDocs(t *testing.T) {
	samples := tableSamples(t)
	checked := map[tableField]bool{}
	for name, data := range samples {
		cfg, err := Parse(data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		root, _ := engine.Decode(data)
		checkDefaults(t, name, rootBlock, reflect.ValueOf(cfg).Elem(), root, "", "", nil, checked)
	}
	var missing []string
	eachTableField(func(path string, b *engine.Block, f *engine.Field) {
		if f.Def != nil && loaderDefaultExceptions[path] == "" && !checked[tableField{b, f}] {
			missing = append(missing, path)
		}
	})
	if len(missing) > 0 {
		t.Errorf("fields with a default that no sample omits (add one to testdata/valid): %v", missing)
	}
	t.Logf("defaults: %d fields with a table default checked against the loader", len(checked))

	// The marks themselves are the documented contract (docs/
	// configuration.md, "Reload"): a mark dropped from a table must fail
	// here, not only change what the rule derives.
	marks := map[string]string{}
	eachTableField(func(path string, b *engine.Block, f *engine.Field) {
		if f.Reload != engine.ReloadApplied {
			marks[path] = f.Reload.Describe()
		}
	})
	wantMarks := map[string]string{"listen": "restart", "listeners": "restart", "tls": "restart to set or omit", "admin.listen": "restart",
		"server.underscores_in_headers": "restart", "memory": "restart", "cluster": "restart", "rollback": "restart",
		"server.proxy_protocol": "restart", "server.trusted_proxies": "restart", "server.trusted_proxies_header": "restart",
		"tls.acme": "restart", "listeners[].tls.acme": "restart"}
	if !reflect.DeepEqual(marks, wantMarks) {
		t.Errorf("the tables mark %v as needing a restart, docs/configuration.md says %v", marks, wantMarks)
	}
	marked := 0
	for name, data := range samples {
		marked += checkReloadRule(t, name, data)
	}
	t.Logf("reload: %d changes checked against the table's rule", marked)

	checkDocsRows(t)
}

// eachTableField calls fn for every field of every block reachable from
// the root, with its path in the docs' form (map keys "*", list items
// "[]"). A block reached twice (retry, limits) is visited at each place.
func eachTableField(fn func(path string, b *engine.Block, f *engine.Field)) {
	engine.Walk(rootBlock, func(path string, b *engine.Block, f *engine.Field) bool {
		fn(path, b, f)
		return true
	})
}

// yamlKeyValue returns the value node of key k in mapping n, nil when
// absent (or n is not a mapping).
func yamlKeyValue(n *yaml.Node, k string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			return n.Content[i+1]
		}
	}
	return nil
}

// checkDefaults walks struct sv as block b beside its YAML mapping n
// (nil: the block is omitted, every field at its default), checking each
// omitted field with a def against it.
func checkDefaults(t *testing.T, sample string, b *engine.Block, sv reflect.Value, n *yaml.Node, path, docPath string, omit []string, checked map[tableField]bool) {
	t.Helper()
	for i := range b.Fields {
		f := &b.Fields[i]
		if slices.Contains(omit, f.Name) {
			continue // this use of the block has no such field
		}
		p, dp := engine.Key(path, f.Name), engine.Key(docPath, f.Name)
		v, ok, err := fieldValue(f, sv, p)
		if err != nil || !ok || !v.IsValid() {
			continue
		}
		node := yamlKeyValue(n, f.Name)
		if engine.IsNull(node) && f.Def != nil && loaderDefaultExceptions[dp] == "" && f.Kind != engine.KindBlock {
			got := v.Interface()
			if bv, isBlock := got.(engine.BlockValue); isBlock {
				got = bv.V.Interface()
			}
			if f.Kind == engine.KindEither {
				// log.access: true at its default means the block is on.
				if _, isStruct := got.(AccessLog); isStruct {
					got = true
				}
			}
			if !reflect.DeepEqual(got, f.Def) {
				t.Errorf("%s: %s omitted is %#v (%T) after Parse; the table's default is %#v (%T)", sample, p, got, got, f.Def, f.Def)
			}
			checked[tableField{b, f}] = true
		}
		if bv, isBlock := v.Interface().(engine.BlockValue); isBlock && f.Kind == engine.KindEither {
			checkDefaults(t, sample, bv.B, bv.V, node, p, dp, nil, checked)
			continue
		}
		switch {
		case f.Kind == engine.KindBlock && v.Kind() == reflect.Struct:
			checkDefaults(t, sample, f.Sub, v, node, p, dp, f.Omit, checked)
		case f.Kind == engine.KindMap && f.Sub != nil && v.Kind() == reflect.Map: // a map of values (headers.set) has no block
			for _, k := range v.MapKeys() {
				e := v.MapIndex(k)
				for e.Kind() == reflect.Pointer {
					e = e.Elem()
				}
				checkDefaults(t, sample, f.Sub, e, yamlKeyValue(node, k.String()), engine.Key(p, k.String()), dp+".*", f.Omit, checked)
			}
		case f.Kind == engine.KindList && f.Item != nil && f.Item.Kind == engine.KindBlock && v.Kind() == reflect.Slice:
			for j := range v.Len() {
				var itemNode *yaml.Node
				if node != nil && node.Kind == yaml.SequenceNode && j < len(node.Content) {
					itemNode = node.Content[j]
				}
				e := v.Index(j)
				for e.Kind() == reflect.Pointer {
					e = e.Elem()
				}
				checkDefaults(t, sample, f.Item.Sub, e, itemNode, engine.Index(p, j), dp+"[]", f.Item.Omit, checked)
			}
		}
	}
}

// checkReloadRule changes, one at a time, each field of the struct blocks
// of sample (parsed afresh for each change) and checks ReloadRefusals
// against the table's marks. It returns the number of changes checked.
func checkReloadRule(t *testing.T, sample string, data []byte) int {
	t.Helper()
	base, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	if errs := ReloadRefusals(base, base); len(errs) > 0 {
		t.Errorf("%s: a reload to the same config is refused: %v", sample, errs)
	}
	count := 0
	// visit walks block b of struct value v (in a fresh parse, reached
	// by the same steps), changing each field; mark is the nearest
	// enclosing restart block's path ("" when none).
	var visit func(b *engine.Block, steps []string, path, mark string)
	visit = func(b *engine.Block, steps []string, path, mark string) {
		for i := range b.Fields {
			f := &b.Fields[i]
			p := engine.Key(path, f.Name)
			next, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			place, ok := goPlace(next, append(steps, f.Name))
			if !ok || !changeValue(place) {
				continue
			}
			count++
			var want FieldError
			switch {
			case mark != "":
				want = FieldError{Path: mark, Message: engine.ReloadRestartMessage}
			case f.Reload == engine.Restart:
				want = FieldError{Path: p, Message: engine.ReloadRestartMessage}
			case f.Reload == engine.RestartOnOff && place.Kind() == reflect.Pointer:
				want = FieldError{Path: p, Message: engine.ReloadOnOffMessage}
			}
			got := ReloadRefusals(base, next)
			switch {
			case want.Path == "" && len(got) != 0:
				t.Errorf("%s: changing %s (a reload field in its table) is refused: %v", sample, p, got)
			case want.Path != "" && (len(got) != 1 || got[0] != want):
				t.Errorf("%s: changing %s gives %v, want [%v] (its table entry)", sample, p, got, want)
			}
			if f.Kind == engine.KindBlock && f.Sub != nil {
				sub := mark
				if sub == "" && f.Reload == engine.Restart {
					sub = p
				}
				if inner, ok := goPlace(base, append(steps, f.Name)); ok && deref(inner).Kind() == reflect.Struct {
					visit(f.Sub, append(append([]string(nil), steps...), f.Name), p, sub)
				}
			}
		}
	}
	visit(rootBlock, nil, "", "")
	return count
}

// goPlace follows the file's names from c's root to an addressable Go
// value (a struct field), through pointers that are set; ok is false when
// a step has no Go field of that name or crosses a nil pointer.
func goPlace(c *Config, steps []string) (reflect.Value, bool) {
	v := reflect.ValueOf(c).Elem()
	for i, s := range steps {
		if i > 0 {
			v = deref(v)
			if !v.IsValid() || v.Kind() != reflect.Struct {
				return reflect.Value{}, false
			}
		}
		fv, found := engine.GoField(v, s)
		if !found {
			return reflect.Value{}, false
		}
		v = fv
	}
	return v, true
}

// deref follows v's pointers; an invalid Value for a nil one.
func deref(v reflect.Value) reflect.Value {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	return v
}

// changeValue changes v in place to another value of its type: a pointer
// to a block is set or cleared (so a block's presence changes), a scalar
// gets another value. false when v is of a kind not changed here (maps,
// slices, whole structs: their fields are changed one by one).
func changeValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		} else {
			v.Set(reflect.Zero(v.Type()))
		}
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Int, reflect.Int64:
		if v.Type() == reflect.TypeFor[time.Duration]() {
			v.SetInt(v.Int() + int64(time.Second))
		} else {
			v.SetInt(v.Int() + 1)
		}
	case reflect.Uint32:
		v.SetUint(v.Uint() + 1)
	case reflect.Float64:
		v.SetFloat(v.Float()/2 + 0.01)
	default:
		return false
	}
	return true
}

// checkDocsRows checks that the generated field reference has one row per
// field with the table's doc, default and reload rule.
func checkDocsRows(t *testing.T) {
	t.Helper()
	ref := string(FieldReference())
	rows := map[string]string{}
	for _, line := range strings.Split(ref, "\n") {
		if strings.HasPrefix(line, "| `") {
			name, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
			if _, dup := rows[name]; dup {
				t.Errorf("field reference: %s has two rows", name)
			}
			rows[name] = line
		}
	}
	n := 0
	var restarts []string
	eachTableField(func(path string, b *engine.Block, f *engine.Field) {
		rule := f.Reload.Describe()
		for _, r := range restarts {
			if strings.HasPrefix(path, r+".") || strings.HasPrefix(path, r+"[") {
				rule = "restart (all of `" + r + "`)"
				break // the outermost, as the generator says (tls.acme inside listeners)
			}
		}
		if f.Reload == engine.Restart {
			restarts = append(restarts, path)
		}
		row, ok := rows[path]
		if !ok {
			t.Errorf("field reference: no row for %s", path)
			return
		}
		n++
		for _, want := range []string{engine.DocCell(f.Doc), engine.DefaultCell(f), rule} {
			if !strings.Contains(row, want) {
				t.Errorf("field reference: the row of %s lacks %q from its table:\n%s", path, want, row)
			}
		}
	})
	if n != len(rows) {
		t.Errorf("field reference: %d rows, %d table fields", len(rows), n)
	}
	t.Logf("docs: %d rows checked against their table entries", n)
}
