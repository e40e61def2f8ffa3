package gateway

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReloadReusesDataAPIs: a reload that changes no data route parses
// no published definition again (the parse cache, config.DataAPICache)
// and keeps the table it swapped in after seeding (the seed published
// nothing new); a reload that changes a data route rebuilds with the new
// version, a publish through the admin API serves at once, and a data
// source's change parses every definition again under the new source.
// What serves is checked over real sockets after each step.
func TestReloadReusesDataAPIs(t *testing.T) {
	dbPath, _ := sqliteOrders(t)
	web, _ := backend(t, "web")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "levee.yaml")
	state := filepath.Join(dir, "state")
	write := func(maxConns string, routes ...string) {
		t.Helper()
		y := lifecycleYAML(dbPath, state, hostPort(web), strings.Join(routes, ""))
		y = strings.Replace(y, "max_conns: 2", "max_conns: "+maxConns, 1)
		if err := os.WriteFile(cfgPath, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("2", fileVersionRoute("a", "/v1/a", 1), fileVersionRoute("b", "/v1/b", 1), fileVersionRoute("c", "/v1/c", 1))
	in := launch(t, cfgPath, "")
	defer func() { in.stop() }()
	g := in.g
	reload := func() {
		t.Helper()
		in.expectAPI("POST", "/api/v1/reload", "", 200, "")
	}
	served := func(step string, want map[string]int) {
		t.Helper()
		for path, v := range want {
			if got, reason := in.served(path); got != v {
				t.Fatalf("%s: %s serves version %d (%s), want %d", step, path, got, reason, v)
			}
		}
	}
	served("start", map[string]int{"/v1/a": 1, "/v1/b": 1, "/v1/c": 1})
	st0, reused0 := g.dataAPIs.parsed.Stats(), g.dataAPIs.reusedTables.Load()

	// Nothing changed in the data routes (a new web route): served from
	// the cache, the swapped table kept.
	write("2", fileVersionRoute("a", "/v1/a", 1), fileVersionRoute("b", "/v1/b", 1), fileVersionRoute("c", "/v1/c", 1),
		"  - {name: web2, match: {path_prefix: /web2}, upstream: web}\n")
	reload()
	st1 := g.dataAPIs.parsed.Stats()
	if st1.Misses != st0.Misses || st1.Hits < st0.Hits+3 || st1.Entries != 3 {
		t.Fatalf("a reload that changed no data route: cache %+v (before %+v), want 3 hits and no miss", st1, st0)
	}
	if n := g.dataAPIs.reusedTables.Load(); n != reused0+1 {
		t.Fatalf("the swapped table was not kept: %d reuses, want %d", n, reused0+1)
	}
	served("unchanged", map[string]int{"/v1/a": 1, "/v1/b": 1, "/v1/c": 1})
	resp, err := http.Get("http://" + g.Addr().String() + "/web2/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the new web route: %d", resp.StatusCode)
	}

	// b changes: seeding publishes its version 2, the table is rebuilt
	// (not kept), one definition is parsed, and c's is swept when c goes.
	write("2", fileVersionRoute("a", "/v1/a", 1), fileVersionRoute("b", "/v1/b", 2))
	reload()
	st2 := g.dataAPIs.parsed.Stats()
	if n := g.dataAPIs.reusedTables.Load(); n != reused0+1 {
		t.Fatalf("a reload that changed a data route kept the old table (%d reuses)", n)
	}
	if st2.Misses != st1.Misses+1 || st2.Entries != 2 {
		t.Fatalf("after b changed and c went: cache %+v (before %+v), want one miss and 2 entries", st2, st1)
	}
	served("b changed", map[string]int{"/v1/a": 1, "/v1/b": 2})
	if got, reason := in.served("/v1/c"); got != 0 || reason != "no_route" {
		t.Fatalf("c was dropped from the file but serves version %d", got)
	}

	// A publish through the admin API serves at once.
	in.expectAPI("POST", "/api/v1/data-apis", `{"name": "d", `+versionDef("/v1/d", 5)[1:], 201, "")
	in.expectAPI("POST", "/api/v1/data-apis/d/publish", "", 200, "")
	served("published d", map[string]int{"/v1/a": 1, "/v1/b": 2, "/v1/d": 5})

	// The data source changes: every definition is parsed again.
	st3 := g.dataAPIs.parsed.Stats()
	write("3", fileVersionRoute("a", "/v1/a", 1), fileVersionRoute("b", "/v1/b", 2))
	reload()
	if st4 := g.dataAPIs.parsed.Stats(); st4.Misses < st3.Misses+3 || st4.Entries != 3 {
		t.Fatalf("after the data source changed: cache %+v (before %+v), want a, b and d parsed again", st4, st3)
	}
	served("source changed", map[string]int{"/v1/a": 1, "/v1/b": 2, "/v1/d": 5})
}
