//go:build !race

package gateway

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testsvc"
)

// TestDataSelectSpeed (issue 29, "Speed"): select= of 2 of 10 columns
// over 100,000 rows of a real PostgreSQL, as one JSON answer, against all
// ten columns, in the same run: alternating, 5 rounds each, medians
// compared against the target, 1.5x (measured 5.45x on a busy
// 2-core machine: the margin is wide), and logged.
func TestDataSelectSpeed(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, `
CREATE TABLE wide (id int8 PRIMARY KEY, total numeric(12,2) NOT NULL, customer text, region text, status text,
  created_at timestamptz, updated_at timestamptz, note text, score float8, flags text);
INSERT INTO wide SELECT g, g * 1.25, 'customer number ' || g, (ARRAY['north','south','east','west'])[g % 4 + 1],
  'shipped and delivered', '2025-01-01T00:00:00Z'::timestamptz + g * interval '1 minute',
  '2025-06-01T00:00:00Z'::timestamptz + g * interval '1 second', 'a note of some forty characters, row ' || g,
  g / 7.0, 'alpha,beta,gamma'
FROM generate_series(1, 100000) g;
ANALYZE wide;`)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  sales: {driver: postgres, dsn: %s, max_conns: 2, statement_timeout: 30s}
routes:
  - name: wide
    match: {path_prefix: /v1/wide}
    data:
      source: sales
      table: wide
      columns: [id, total, customer, region, status, created_at, updated_at, note, score, flags]
      order: [id]
      limits: {max_rows: 100000, max_bytes: 256MiB}
      formats: [json]
      send_timeout: 60s
`, dataQuote(t.TempDir()), dataQuote(pg.DSN)))

	fetch := func(path string) (time.Duration, int64) {
		start := time.Now()
		resp, err := h.client.Get(h.base + path)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || resp.Trailer.Get("Levee-Truncated") != "" {
			t.Fatalf("GET %s: %d %v truncated %q", path, resp.StatusCode, err, resp.Trailer.Get("Levee-Truncated"))
		}
		return time.Since(start), n
	}
	fetch("/v1/wide?select=id") // warm: the columns, the pool, the table in cache
	fetch("/v1/wide")
	var all, two []time.Duration
	var allBytes, twoBytes int64
	for range 5 {
		d, n := fetch("/v1/wide")
		all, allBytes = append(all, d), n
		d, n = fetch("/v1/wide?select=id,total")
		two, twoBytes = append(two, d), n
	}
	slices.Sort(all)
	slices.Sort(two)
	ratio := float64(all[2]) / float64(two[2])
	t.Logf("100,000 rows as JSON: all 10 columns median %v (%.1f MiB), select=id,total median %v (%.1f MiB): %.2fx faster",
		all[2].Round(time.Millisecond), float64(allBytes)/(1<<20), two[2].Round(time.Millisecond), float64(twoBytes)/(1<<20), ratio)
	if ratio < 1.5 {
		t.Errorf("select= of 2 columns is %.2fx faster than all 10, want at least 1.5x", ratio)
	}
}
