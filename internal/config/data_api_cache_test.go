package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestDataAPICache: a definition parsed once is served from the cache
// while the data sources are the same (also under another configuration
// parsed from a changed file), as the very route ParseDataAPI returns;
// a change of the data sources drops every entry; Sweep keeps only what
// was asked for since the last Sweep; errors are not cached.
func TestDataAPICache(t *testing.T) {
	base := dataYAML(t, "")
	a := mustParseConfig(t, base)
	def := `{"match": {"path_prefix": "/x"}, "data": {"source": "local", "table": "customers", "columns": ["id", "name"]}}`
	other := `{"match": {"path_prefix": "/y"}, "data": {"source": "sales", "sql": "SELECT 1 AS one"}}`
	var dc DataAPICache
	want, err := ParseDataAPI(a, "x", []byte(def))
	if err != nil {
		t.Fatal(err)
	}
	check := func(step string, c *Config, name, d string, hits, misses uint64) *Route {
		t.Helper()
		r, err := dc.Parse(c, name, []byte(d))
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if st := dc.Stats(); st.Hits != hits || st.Misses != misses {
			t.Fatalf("%s: %+v, want %d hits and %d misses", step, st, hits, misses)
		}
		return r
	}
	if r := check("first parse", a, "x", def, 0, 1); !reflect.DeepEqual(r, want) {
		t.Fatalf("first parse:\n%+v\nwant\n%+v", r, want)
	}
	if r := check("again", a, "x", def, 1, 1); !reflect.DeepEqual(r, want) {
		t.Fatalf("from the cache:\n%+v\nwant\n%+v", r, want)
	}
	check("another API", a, "y", other, 1, 2)
	check("the same definition under another name", a, "z", def, 1, 3)

	// Another configuration with the same data sources (a reload that
	// changed something else): served from the cache.
	b := mustParseConfig(t, strings.Replace(base, "127.0.0.1:9901", "127.0.0.1:9902", 1))
	if r := check("same sources, new configuration", b, "x", def, 2, 3); !reflect.DeepEqual(r, want) {
		t.Fatalf("under b:\n%+v\nwant\n%+v", r, want)
	}

	// Sweep: y and z were not asked for since the sweep before: dropped.
	dc.Sweep() // x, y, z were all asked for: kept
	check("x after a sweep", b, "x", def, 3, 3)
	dc.Sweep() // y and z not asked for since: dropped
	if st := dc.Stats(); st.Entries != 1 {
		t.Fatalf("after two sweeps: %d entries, want 1 (x)", st.Entries)
	}
	check("y after it was swept", b, "y", other, 3, 4)

	// Changed data sources: every entry dropped, parsed again.
	c := mustParseConfig(t, strings.Replace(base, "max_conns: 8", "max_conns: 9", 1))
	if r := check("changed sources", c, "x", def, 3, 5); r.Name != "x" {
		t.Fatalf("changed sources: %+v", r)
	}
	if st := dc.Stats(); st.Entries != 1 {
		t.Fatalf("after a change of sources: %d entries, want 1 (x, parsed again)", st.Entries)
	}

	// Errors are not cached, and a name a file route takes is refused.
	bad := `{"match": {"path_prefix": "/x"}, "data": {"source": "nope", "table": "t", "columns": ["id"]}}`
	for range 2 {
		if _, err := dc.Parse(c, "x", []byte(bad)); err == nil || !strings.Contains(err.Error(), "unknown data source") {
			t.Fatalf("a bad definition: %v", err)
		}
	}
	if st := dc.Stats(); st.Entries != 1 || st.Misses != 7 {
		t.Fatalf("after two bad definitions: %+v, want 1 entry and 7 misses", st)
	}
	var nilCache *DataAPICache
	if r, err := nilCache.Parse(a, "x", []byte(def)); err != nil || !reflect.DeepEqual(r, want) {
		t.Fatalf("a nil cache: %v", err)
	}
	nilCache.Sweep()
}

// TestDataAPICacheDependsOnSources: what a cached parse depends on in the
// configuration (config.DataAPICache's comment) is checked at every
// lookup: a definition cached under one configuration is refused under
// another whose data source it names is gone, or whose file route takes
// its name, as ParseDataAPI refuses it.
func TestDataAPICacheDependsOnSources(t *testing.T) {
	base := dataYAML(t, "")
	a := mustParseConfig(t, base)
	def := `{"match": {"path_prefix": "/x"}, "data": {"source": "local", "table": "customers", "columns": ["id", "name"]}}`
	var dc DataAPICache
	if _, err := dc.Parse(a, "x", []byte(def)); err != nil {
		t.Fatal(err)
	}
	// The source renamed: the cached route must not serve.
	gone := mustParseConfig(t, strings.Replace(strings.Replace(base, "  local:\n", "  other:\n", 1), "source: local", "source: other", 1))
	if _, err := dc.Parse(gone, "x", []byte(def)); err == nil || !strings.Contains(err.Error(), `unknown data source "local"`) {
		t.Fatalf("source gone: %v, want unknown data source", err)
	}
	// Back to a: parsed again (the entries went with the change).
	if _, err := dc.Parse(a, "x", []byte(def)); err != nil {
		t.Fatal(err)
	}
	// A file route named x that is not a data route: refused, cached or not.
	taken := mustParseConfig(t, base+"  - {name: x, match: {path_prefix: /web}, upstream: web}\nupstreams:\n  web: {endpoints: [{address: 127.0.0.1:1}]}\n")
	if _, err := dc.Parse(taken, "x", []byte(def)); err == nil || !strings.Contains(err.Error(), "not a data route") {
		t.Fatalf("a file route takes the name: %v", err)
	}
	// The sources' values decide, not their identity: the same file
	// parsed twice shares the cache.
	again := mustParseConfig(t, base)
	before := dc.Stats().Hits
	if _, err := dc.Parse(again, "x", []byte(def)); err != nil || dc.Stats().Hits != before+1 {
		t.Fatalf("same sources parsed again: %v, %+v", err, dc.Stats())
	}
}

func mustParseConfig(t *testing.T, y string) *Config {
	t.Helper()
	c, err := Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return c
}
