package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/config/engine"
)

// effectiveInputs are the parsed configurations the effective tests
// render: every testdata/valid file, ExampleYAML and the data routes'
// file (both data source drivers, a DSN read from its file).
func effectiveInputs(t *testing.T) map[string]*Config {
	t.Helper()
	files, err := filepath.Glob("testdata/valid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no inputs under testdata/valid: %v", err)
	}
	out := map[string]*Config{}
	for _, f := range files {
		c, err := Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out[filepath.Base(f)] = c
	}
	for name, yaml := range map[string]string{"ExampleYAML": ExampleYAML, "data": dataYAML(t, ""),
		"access-block": head + upstreams + routes + "log: {access: {output: stdout, sample_2xx: 0.25, redact_query: [token, sig]}}\n",
		"access-off":   head + upstreams + routes + "log: {access: false}\n"} {
		c, err := Parse([]byte(yaml))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = c
	}
	return out
}

// TestEffectiveRoundTrips: the effective JSON (YAML's subset) parses back
// into the same Config, secrets aside (a redacted DSN read from dsn_file
// is read from the file again; redacted key digests are dropped on both
// sides), so every default shows with the value levee uses and in a form
// the file accepts.
func TestEffectiveRoundTrips(t *testing.T) {
	for name, c := range effectiveInputs(t) {
		t.Run(name, func(t *testing.T) {
			checkRoundTrip(t, c)
		})
	}
}

// checkRoundTrip renders c, parses the rendering back (its redacted
// members dropped) and compares the two Configs, c's key digests cleared
// (they cannot come back).
func checkRoundTrip(t *testing.T, c *Config) {
	t.Helper()
	out, err := Effective(c)
	if err != nil {
		t.Fatalf("Effective: %v", err)
	}
	if !json.Valid(out) {
		t.Fatalf("not JSON:\n%s", out)
	}
	back, err := Parse(dropRedacted(out))
	if err != nil {
		t.Fatalf("the effective config does not parse: %v\n%s", err, out)
	}
	for i := range c.Apps {
		c.Apps[i].APIKeySHA256 = nil
	}
	if got, want := normalise(reflect.ValueOf(back)), normalise(reflect.ValueOf(c)); !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("parsed back:\n%s\nwant:\n%s\neffective:\n%s", g, w, out)
	}
}

// redactedMember matches a member whose value is Redacted or a list of
// them, with its comma; trailingComma a comma left before a closing brace.
var (
	redactedMember = regexp.MustCompile(`\s*"[a-z0-9_]+": (` + regexp.QuoteMeta(`"`+Redacted+`"`) + `|\[(\s*` + regexp.QuoteMeta(`"`+Redacted+`"`) + `,?)+\s*\]),?`)
	trailingComma  = regexp.MustCompile(`,(\s*})`)
)

// dropRedacted deletes every member whose value is redacted, keeping the
// text's order (which a decoded map would lose).
func dropRedacted(doc []byte) []byte {
	return trailingComma.ReplaceAll(redactedMember.ReplaceAll(doc, nil), []byte("$1"))
}

// TestEffectiveRedacts: a DSN (inline or from its file, with its
// password) and API key digests never appear; the redaction keeps the
// count of digests, and the paths (dsn_file, token files) show.
func TestEffectiveRedacts(t *testing.T) {
	const digest = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	yaml := dataYAML(t, `
apps:
  - {id: acme, api_key_sha256: [`+digest+`, `+strings.Repeat("a", 64)+`], grants: [orders-v1]}
`)
	yaml = strings.Replace(yaml, "data_sources:\n", "data_sources:\n  inline: {driver: postgres, dsn: \"postgres://u:hunter2@127.0.0.1/x\"}\n", 1)
	c, err := Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Effective(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"hunter2", "postgres://", digest, strings.Repeat("a", 64)} {
		if strings.Contains(string(out), leak) {
			t.Errorf("the effective config shows %q:\n%s", leak, out)
		}
	}
	var doc struct {
		DataSources map[string]map[string]any `json:"data_sources"`
		Apps        []map[string]any          `json:"apps"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.DataSources["inline"]["dsn"]; got != Redacted {
		t.Errorf("inline dsn = %v, want %q", got, Redacted)
	}
	if got := doc.DataSources["sales"]["dsn"]; got != Redacted {
		t.Errorf("dsn read from dsn_file = %v, want %q", got, Redacted)
	}
	if got, _ := doc.DataSources["sales"]["dsn_file"].(string); !strings.HasSuffix(got, "sales.dsn") {
		t.Errorf("dsn_file = %q, want its path", got)
	}
	if _, ok := doc.DataSources["local"]["dsn"]; ok {
		t.Errorf("sqlite source shows a dsn: %v", doc.DataSources["local"])
	}
	if got := doc.Apps[0]["api_key_sha256"]; !reflect.DeepEqual(got, []any{Redacted, Redacted}) {
		t.Errorf("api_key_sha256 = %v, want two %q", got, Redacted)
	}
}

// TestEffectiveOrder: members follow the field tables, map entries the
// file's order where the Config keeps it.
func TestEffectiveOrder(t *testing.T) {
	c, err := Parse([]byte(ExampleYAML))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Effective(c)
	if err != nil {
		t.Fatal(err)
	}
	var prev int
	for _, k := range rootBlock.Keys {
		i := strings.Index(string(out), "\n  \""+k+"\":")
		if i < 0 {
			continue
		}
		if i < prev {
			t.Errorf("root key %q out of the table's order:\n%s", k, out)
		}
		prev = i
	}
	prev = 0
	for _, name := range c.UpstreamOrder {
		i := strings.Index(string(out), "\n    \""+name+"\": {")
		if i < prev {
			t.Errorf("upstream %q at %d, before the one declared earlier (%d)", name, i, prev)
		}
		prev = i
	}
}

// fill sets every pointer, list and map of v (recursively) to a
// non-empty value of one element, and every bool to true, so that every
// field of the tables has something to render.
func fill(v reflect.Value, depth int) {
	if depth > 12 {
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), depth+1)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), depth+1)
			}
		}
	case reflect.Slice:
		if v.Len() == 0 {
			v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		}
		fill(v.Index(0), depth+1)
	case reflect.Map:
		if v.Len() == 0 {
			v.Set(reflect.MakeMap(v.Type()))
			e := reflect.New(v.Type().Elem()).Elem()
			fill(e, depth+1)
			v.SetMapIndex(reflect.ValueOf("x").Convert(v.Type().Key()), e)
		}
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(1)
	case reflect.Uint32, reflect.Uint, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float64:
		v.SetFloat(0.5)
	}
}

// TestEffectiveCoversEveryField: with every part of a Config set, each
// field of every table is rendered, under its table name (so a new field
// whose Go name does not follow its file name, or whose Go form differs,
// fails here until effective.go learns it).
func TestEffectiveCoversEveryField(t *testing.T) {
	var c Config
	fill(reflect.ValueOf(&c).Elem(), 0)
	c.UpstreamOrder, c.DataSourceOrder = nil, nil // a stale order is ignored
	c.Memory.Off = false                          // off renders as "off", not the block
	// A proxied route besides the data route fill made: each renders
	// fields the other leaves out.
	proxied := c.Routes[0]
	proxied.Data = nil
	c.Routes = append(c.Routes, proxied)
	// And one matched by prefix: another path kind leaves path_prefix out.
	byPrefix := proxied
	byPrefix.Match.Path, byPrefix.Match.PathTemplate, byPrefix.Match.PathRegex = "", "", ""
	c.Routes = append(c.Routes, byPrefix)
	out, err := Effective(&c)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatal(err)
	}
	// rendered collects the paths present, list items as [] and map
	// entries as .*.
	rendered := map[string]bool{}
	var collect func(v any, path string)
	collect = func(v any, path string) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				p := engine.Key(path, k)
				if k == "x" {
					p = engine.Key(path, "*")
				}
				rendered[p] = true
				collect(e, p)
			}
		case []any:
			for _, e := range v {
				collect(e, path+"[]")
			}
		}
	}
	collect(doc, "")
	var missing []string
	var walk func(b *engine.Block, path string)
	walk = func(b *engine.Block, path string) {
		for _, f := range b.Fields {
			fp := engine.Key(path, f.Name)
			if !rendered[fp] {
				missing = append(missing, fp)
				continue
			}
			switch {
			case f.Kind == engine.KindBlock:
				walk(f.Sub, fp)
			case f.Kind == engine.KindMap && f.Sub != nil:
				walk(f.Sub, engine.Key(fp, "*"))
			case f.Kind == engine.KindList && f.Item.Kind == engine.KindBlock:
				walk(f.Item.Sub, fp+"[]")
			case f.Kind == engine.KindEither:
				listed := map[*engine.Block]bool{} // one item or a list of them renders as the list
				for _, form := range f.Either {
					if form.Kind == engine.KindList && form.Item.Kind == engine.KindBlock {
						listed[form.Item.Sub] = true
						walk(form.Item.Sub, fp+"[]")
					}
				}
				for _, form := range f.Either {
					if form.Sub != nil && !listed[form.Sub] {
						walk(form.Sub, fp)
					}
				}
			}
		}
	}
	walk(rootBlock, "")
	if len(missing) > 0 {
		t.Errorf("fields not rendered: %s\n%s", strings.Join(missing, ", "), out)
	}
}

// secretish matches field names that suggest a credential.
var secretish = regexp.MustCompile(`token|password|passwd|secret|dsn|key|credential|bearer|private`)

// TestSecretFieldsMarked: every field whose name suggests a secret says
// whether it is one (secret) or why not (notSecret), so a new credential
// field cannot reach GET /api/v1/config unredacted by oversight; and no
// field says both.
func TestSecretFieldsMarked(t *testing.T) {
	var unmarked, secrets []string
	seen := map[*engine.Block]bool{}
	var walk func(b *engine.Block, path string)
	var walkField func(f *engine.Field, path string)
	walkField = func(f *engine.Field, path string) {
		if f.Secret && f.NotSecret != "" {
			t.Errorf("%s is marked both secret and notSecret", path)
		}
		if f.Secret {
			secrets = append(secrets, path)
		}
		if f.Name != "" && secretish.MatchString(f.Name) && !f.Secret && f.NotSecret == "" {
			unmarked = append(unmarked, path)
		}
		if f.Sub != nil {
			walk(f.Sub, path)
		}
		if f.Item != nil {
			walkField(f.Item, path+"[]")
		}
		for i := range f.Either {
			walkField(&f.Either[i], path)
		}
	}
	walk = func(b *engine.Block, path string) {
		if seen[b] {
			return
		}
		seen[b] = true
		for i := range b.Fields {
			walkField(&b.Fields[i], engine.Key(path, b.Fields[i].Name))
		}
	}
	walk(rootBlock, "")
	if len(unmarked) > 0 {
		t.Errorf("fields whose names suggest a secret, marked neither secret nor notSecret (fields.go): %s", strings.Join(unmarked, ", "))
	}
	slices.Sort(secrets)
	want := []string{"apps[].api_key_sha256", "data_sources.dsn"}
	for _, w := range want {
		if !slices.Contains(secrets, w) {
			t.Errorf("%s is not marked secret; secret fields: %v", w, secrets)
		}
	}
}

// FuzzEffectiveRoundTrips: whatever configuration Parse accepts, its
// effective rendering parses back into the same Config (secrets aside,
// as in TestEffectiveRoundTrips), so GET /api/v1/config never shows a
// value levee would read differently.
func FuzzEffectiveRoundTrips(f *testing.F) {
	files, _ := filepath.Glob("testdata/valid/*.yaml")
	for _, in := range files {
		data, err := os.ReadFile(in)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(ExampleYAML))
	f.Add([]byte(head + upstreams + routes + "log: {access: {output: stdout, sample_2xx: 0.25, redact_query: [token, sig]}}\n"))
	f.Add([]byte(head + upstreams + routes + "log: {level: warn, access: false}\n"))
	f.Add([]byte(head + upstreams + routes + "    auth: none\n    anonymous_limits: {rate: 0.000001, burst: 1000}\napps:\n" +
		"  - {id: a, grants: [api], api_key_sha256: [" + strings.Repeat("ab", 32) + "], limits: {rate: 0.0000001, burst: 1001, quota: {requests: 1000000000001, per: 999ms}}, route_limits: {api: {rate: 0.5, burst: 500000001}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if c, err := Parse(data); err == nil {
			checkRoundTrip(t, c)
		}
	})
}
