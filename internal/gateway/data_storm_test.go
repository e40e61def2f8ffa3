//go:build !race

package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

// TestDataStormReplayed is the second outage replayed against a data API
// (issue 16): a 50 ms query on a PostgreSQL source with a pool of 4, two
// good apps calling at a steady rate, and one app in a retry loop from 64
// connections that sends its next request the moment the last is
// answered. The good apps: at least 99 % success, p99 at most 3x their
// unloaded p99. The storm: refused (429 consumer_limit or 503 from
// admission, with Retry-After), the refusals' p99 under 20 ms. Nobody gets
// a 504. The database never sees more than 4 connections from levee, and
// levee's resident memory grows less than 64 MiB.
func TestDataStormReplayed(t *testing.T) {
	if testing.Short() {
		t.Skip("a 15 s load test")
	}
	const (
		goodRate  = 10 // requests/s per good app: 20/s of a pool that serves 80/s
		stormRate = 5000
		baseline  = 3 * time.Second
		storm     = 8 * time.Second
	)
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, `CREATE TABLE accounts (id int8 PRIMARY KEY, owner text NOT NULL);
INSERT INTO accounts SELECT g, 'owner ' || g FROM generate_series(1, 1000) g;`)
	keys := map[string]string{}
	var apps strings.Builder
	for _, app := range []string{"good1", "good2", "storm"} {
		keys[app] = "lvk_" + app + "-0123456789abcdefghijklmnop"
		fmt.Fprintf(&apps, "  - {id: %s, api_key_sha256: [%s], grants: [accounts]}\n", app, keyHash(keys[app]))
	}
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  bank:
    driver: postgres
    dsn: %s
    max_conns: 4
routes:
  - name: accounts
    match: {path_prefix: /v1/accounts}
    auth: api_key
    data:
      source: bank
      sql: SELECT id, owner, pg_sleep(0.05)::text AS waited FROM accounts WHERE id = :id
      params:
        id: {type: int64, required: true, min: 1}
apps:
%s`, dataQuote(t.TempDir()), dataQuote(pg.DSN), apps.String()))
	addr := h.g.Addr().String()
	good := func(app string, d time.Duration) openLoop {
		return openLoop{Addr: addr, Path: "/v1/accounts?id=7", Rate: goodRate, Total: goodRate * int(d/time.Second), Timeout: 5 * time.Second,
			Workers: 8, Header: []string{"X-Api-Key: " + keys[app]}}
	}

	base := runOpenLoopChild(t, []openLoop{good("good1", baseline), good("good2", baseline)}, func() {})
	baseP99 := [2]time.Duration{p99OK(t, "good1 baseline", base[0]), p99OK(t, "good2 baseline", base[1])}

	most := sampleLeveeConns(t, pg.DSN) // levee's connections to the database while the storm runs
	rssBefore := rssBaseline(t)
	goodLoad := startLoadChild(t, []openLoop{good("good1", storm), good("good2", storm)})
	stormLoad := startLoadChild(t, []openLoop{{Addr: addr, Path: "/v1/accounts?id=9", Rate: stormRate, Total: stormRate * int(storm/time.Second),
		Timeout: 5 * time.Second, Workers: 64, Header: []string{"X-Api-Key: " + keys["storm"]}}})
	stormLoad.start()
	goodLoad.start()
	shots := append(goodLoad.wait(), stormLoad.wait()...)
	rssAfter := rssBytes(t)
	maxConns := most()

	for i, app := range []string{"good1", "good2"} {
		ok, statuses := 0, map[string]int{}
		for _, s := range shots[i] {
			if s.Status == 200 {
				ok++
			} else {
				statuses[fmt.Sprintf("%d %s %s", s.Status, s.Reason, s.Err)]++
			}
		}
		success := float64(ok) / float64(len(shots[i]))
		p99 := p99OK(t, app+" during the storm", shots[i])
		t.Logf("%s: %d of %d succeeded (%.2f%%), p99 %v vs unloaded %v (ratio %.2f); other answers %v", app, ok, len(shots[i]), 100*success,
			p99, baseP99[i], float64(p99)/float64(baseP99[i]), statuses)
		if success < 0.99 {
			t.Errorf("%s: success %.2f%%, want at least 99%%", app, 100*success)
		}
		if p99 > 3*baseP99[i] {
			t.Errorf("%s: p99 %v during the storm, want at most 3x its unloaded %v", app, p99, baseP99[i])
		}
	}
	var refused []time.Duration
	served, other := 0, map[string]int{}
	for _, s := range shots[2] {
		switch {
		case s.Status == 200:
			served++
		case s.Status == 429 || s.Status == 503:
			refused = append(refused, s.Latency)
			other[fmt.Sprintf("%d %s", s.Status, s.Reason)]++
		default:
			other[fmt.Sprintf("%d %s %s", s.Status, s.Reason, s.Err)]++
		}
	}
	t.Logf("storm: %d sent, %d served, %d refused (p50 %v, p99 %v); answers %v", len(shots[2]), served, len(refused),
		percentile(refused, 50), percentile(refused, 99), other)
	t.Logf("levee's connections to the database: at most %d (max_conns 4)", maxConns)
	t.Logf("levee's RSS: %.1f MiB before the storm, %.1f MiB after (+%.1f MiB)", float64(rssBefore)/(1<<20), float64(rssAfter)/(1<<20),
		float64(rssAfter-rssBefore)/(1<<20))
	for _, shots := range shots {
		for _, s := range shots {
			if s.Status == 504 || s.TimedOut {
				t.Fatalf("an answer was %d (timed out: %v) after %v: nobody may wait out a full pool", s.Status, s.TimedOut, s.Latency)
			}
		}
	}
	if len(refused) < len(shots[2])/2 {
		t.Errorf("storm: only %d of %d refused", len(refused), len(shots[2]))
	}
	for k := range other {
		if !strings.HasPrefix(k, "429 consumer_limit") && !strings.HasPrefix(k, "503 queue_") && !strings.HasPrefix(k, "503 concurrency_limit") {
			t.Errorf("storm got %q: want only 200, 429 consumer_limit or 503 from admission", k)
		}
	}
	if p := percentile(refused, 99); p >= 20*time.Millisecond {
		t.Errorf("storm's refusals: p99 %v, want under 20 ms", p)
	}
	if maxConns > 4 {
		t.Errorf("the database saw %d connections from levee, max_conns is 4", maxConns)
	}
	if rssAfter-rssBefore >= 64<<20 {
		t.Errorf("levee's RSS grew %d MiB during the storm, want under 64", (rssAfter-rssBefore)>>20)
	}
}
