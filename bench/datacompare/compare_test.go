//go:build datacompare

package datacompare

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/levee-gw/levee/internal/loadgen"
	"github.com/levee-gw/levee/internal/testsvc"
)

// Sizes and durations, overridable from the environment for a quick look
// (DATACOMPARE_ROUNDS=1 ...).
var (
	rounds       = envInt("DATACOMPARE_ROUNDS", 3)
	pgRows       = envInt("DATACOMPARE_PG_ROWS", 1_000_000)
	sqliteRows   = envInt("DATACOMPARE_SQLITE_ROWS", 500_000)
	lookupFor    = time.Duration(envInt("DATACOMPARE_LOOKUP_SECONDS", 10)) * time.Second
	slowFor      = time.Duration(envInt("DATACOMPARE_SLOW_SECONDS", 10)) * time.Second
	slowRate     = envInt("DATACOMPARE_SLOW_RATE", 400) // 10x the pool's 40/s
	profileDir   = os.Getenv("DATACOMPARE_PROFILE")     // when set: one more levee run per scenario under the CPU profiler
	only         = os.Getenv("DATACOMPARE_ONLY")        // when set: only these scenarios (comma-separated: stream,lookup,slow,sqlite)
	lookupClient = 64
)

const customers = 50_000 // every customer has exactly pgRows/customers rows (20 for 1M)

// want says whether scenario runs (DATACOMPARE_ONLY).
func want(scenario string) bool {
	return only == "" || slices.Contains(strings.Split(only, ","), scenario)
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// say prints a timestamped line, as the other bench/results-* files do.
func say(format string, args ...any) {
	fmt.Printf("[%s] %s\n", time.Now().UTC().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// TestDataCompare runs every scenario, rounds times each, alternating which
// server goes first, and prints each run and the medians.
func TestDataCompare(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	levee := filepath.Join(root, "bin", "levee")
	if _, err := os.Stat(levee); err != nil {
		t.Fatalf("%s: %v (make build, or make bench-data which builds it)", levee, err)
	}
	tmp := t.TempDir()
	baseline := filepath.Join(tmp, "baseline")
	if out, err := exec.Command("go", "build", "-o", baseline, "./baseline").CombinedOutput(); err != nil {
		t.Fatalf("building the baseline: %v: %s", err, out)
	}
	commit, _ := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output()
	load, _ := os.ReadFile("/proc/loadavg")
	gover, _ := exec.Command("go", "version").Output()
	say("=== datacompare %s UTC, levee %s", time.Now().UTC().Format("2006-01-02 15:04:05"), strings.TrimSpace(string(commit)))
	say("machine: %d cores (GOMAXPROCS default), loadavg %s", numCPU(), strings.TrimSpace(string(load)))
	say("tools: %s", strings.TrimSpace(string(gover)))
	say("settings: rounds=%d pg_rows=%d sqlite_rows=%d lookups=%d clients x %v slow=%d/s x %v", rounds, pgRows, sqliteRows, lookupClient, lookupFor, slowRate, slowFor)

	pg := testsvc.StartPostgres(t)
	start := time.Now()
	pg.Exec(t, fmt.Sprintf(`CREATE TABLE orders (id int8 PRIMARY KEY, customer_id int8 NOT NULL, total numeric(12,2) NOT NULL, created_at timestamptz NOT NULL);
INSERT INTO orders SELECT g, g %% %d, (g / 100.0)::numeric(12,2), timestamptz '2025-01-01' + g * interval '1 second' FROM generate_series(1, %d) g;
CREATE INDEX ON orders (customer_id, created_at DESC, id DESC);
VACUUM ANALYZE orders;`, customers, pgRows))
	pg.Exec(t, "SELECT count(*) FROM orders") // warm the cache
	say("postgres: %d rows loaded in %v", pgRows, time.Since(start).Round(time.Millisecond))
	sqlitePath := filepath.Join(tmp, "orders.db")
	writeSQLite(t, sqlitePath)

	cfgPath := filepath.Join(tmp, "levee.yaml")
	env := &bench{t: t, levee: levee, baseline: baseline, cfgPath: cfgPath, dsn: pg.DSN, sqlite: sqlitePath, stateDir: filepath.Join(tmp, "state")}

	results := map[string][]map[string]float64{} // "scenario/server" -> one metrics map per round
	record := func(key string, m map[string]float64) { results[key] = append(results[key], m) }

	for r := 0; r < rounds; r++ {
		say("--- round %d/%d (%s first)", r+1, rounds, map[bool]string{true: "levee", false: "baseline"}[r%2 == 0])
		order := []string{"levee", "baseline"}
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, who := range order {
			if !want("stream") {
				break
			}
			record("stream/"+who, env.stream(who, false))
			if who == "baseline" {
				record("stream/baseline-text", env.streamText())
			}
		}
		for _, who := range order {
			if !want("lookup") {
				break
			}
			record("lookup/"+who, env.lookups(who, true, false))
		}
		for _, who := range order {
			if !want("lookup") {
				break
			}
			record("lookup-one-address/"+who, env.lookups(who, false, false))
		}
		for _, who := range order {
			if !want("slow") {
				break
			}
			if who == "levee" {
				record("slow/levee-issue-limits", env.slow("levee", "/v1/slow-a", false))
				record("slow/levee-static-8", env.slow("levee", "/v1/slow-b", false))
				record("slow/levee-static-8-no-queue", env.slow("levee", "/v1/slow-c", false))
			} else {
				record("slow/baseline", env.slow("baseline", "/slow", false))
			}
		}
		for _, who := range order {
			if !want("sqlite") {
				break
			}
			record("sqlite/"+who, env.sqliteScan(who, false))
		}
	}
	if profileDir != "" {
		say("--- profiling levee (one more run of each scenario, not counted)")
		env.stream("levee", true)
		env.lookups("levee", true, true)
		env.slow("levee", "/v1/slow-a", true)
		env.sqliteScan("levee", true)
	}
	load, _ = os.ReadFile("/proc/loadavg")
	say("=== medians over %d rounds (min..max); loadavg now %s", rounds, strings.TrimSpace(string(load)))
	keys := make([]string, 0, len(results))
	for k := range results {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var names []string
		for n := range results[k][0] {
			names = append(names, n)
		}
		sort.Strings(names)
		var b strings.Builder
		for _, n := range names {
			med, lo, hi := spread(results[k], n)
			fmt.Fprintf(&b, " %s=%s (%s..%s)", n, num(med), num(lo), num(hi))
		}
		say("%-26s%s", k, b.String())
	}
	ratio := func(scn, metric, a, b string) {
		if results[scn+"/"+a] == nil {
			return
		}
		ma, _, _ := spread(results[scn+"/"+a], metric)
		mb, _, _ := spread(results[scn+"/"+b], metric)
		say("ratio %s %s %s/%s = %.2fx", scn, metric, a, b, ma/mb)
	}
	ratio("stream", "rows_per_s", "levee", "baseline")
	ratio("stream", "rows_per_s", "levee", "baseline-text")
	ratio("lookup", "req_per_s", "levee", "baseline")
	ratio("lookup", "p50_ms", "levee", "baseline")
	ratio("lookup", "p99_ms", "levee", "baseline")
	ratio("lookup-one-address", "req_per_s", "levee", "baseline")
	ratio("sqlite", "rows_per_s", "levee", "baseline")
}

func numCPU() int {
	b, _ := os.ReadFile("/proc/cpuinfo")
	return bytes.Count(b, []byte("\nprocessor")) + 1
}

func num(v float64) string {
	switch {
	case v == float64(int64(v)) && v < 1e15 && v > -1e15:
		return strconv.FormatInt(int64(v), 10)
	case v >= 100 || v <= -100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// spread returns the median, min and max of one metric over rounds.
func spread(ms []map[string]float64, name string) (med, lo, hi float64) {
	var vs []float64
	for _, m := range ms {
		vs = append(vs, m[name])
	}
	if len(vs) == 0 {
		return 0, 0, 0
	}
	sort.Float64s(vs)
	n := len(vs)
	med = vs[n/2]
	if n%2 == 0 {
		med = (vs[n/2-1] + vs[n/2]) / 2
	}
	return med, vs[0], vs[n-1]
}

func writeSQLite(t *testing.T, path string) {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	if _, err := db.Exec(fmt.Sprintf(`CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL, total NUMERIC NOT NULL, created_at TIMESTAMP NOT NULL);
		WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < %d)
		INSERT INTO orders SELECT x, x %% %d, x / 100.0, strftime('%%Y-%%m-%%dT%%H:%%M:%%SZ', 1735689600 + x, 'unixepoch') FROM c`, sqliteRows, customers)); err != nil {
		t.Fatal(err)
	}
	say("sqlite: %d rows written in %v", sqliteRows, time.Since(start).Round(time.Millisecond))
}

type bench struct {
	t                 *testing.T
	levee, baseline   string
	cfgPath, stateDir string
	dsn, sqlite       string
}

// server is one running levee or baseline process.
type server struct {
	name      string
	cmd       *exec.Cmd
	addr      string // where the data routes are served
	admin     string // levee's admin listener; "" for the baseline
	done      chan struct{}
	stderrBuf *bytes.Buffer
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// leveeConfig is levee's configuration: one PostgreSQL source per scenario
// (each capped at 8 connections) so that no scenario's pool is another's,
// and the SQLite file. The routes' SQL is the baseline's, with :name.
func (b *bench) leveeConfig(listen, admin string) string {
	q := func(s string) string { j, _ := json.Marshal(s); return string(j) }
	return fmt.Sprintf(`listen: %s
admin: {listen: %s}
state_dir: %s
log: {access: false}
data_sources:
  bulk: {driver: postgres, dsn: %s, max_conns: 8}
  lookups:
    driver: postgres
    dsn: %s
    max_conns: 8
    limits: {max_concurrency: 8, max_queue: 64, queue_timeout: 2s}
  slowa:
    driver: postgres
    dsn: %s
    max_conns: 8
    limits: {max_concurrency: adaptive, max_queue: 16, queue_timeout: 50ms}
  slowb:
    driver: postgres
    dsn: %s
    max_conns: 8
    limits: {max_concurrency: 8, max_queue: 16, queue_timeout: 50ms}
  slowc:
    driver: postgres
    dsn: %s
    max_conns: 8
    limits: {max_concurrency: 8, max_queue: 0}
  lite: {driver: sqlite, path: %s, max_conns: 2}
routes:
  - name: stream
    match: {path_prefix: /v1/stream, methods: [GET]}
    data:
      source: bulk
      sql: SELECT id, customer_id, total, created_at FROM orders
      formats: [ndjson]
      limits: {max_rows: 10000000, max_bytes: 1GiB}
      statement_timeout: 5m
  - name: lookup
    match: {path_prefix: /v1/lookup, methods: [GET]}
    data:
      source: lookups
      sql: SELECT id, customer_id, total, created_at FROM orders WHERE customer_id = :customer_id ORDER BY created_at DESC, id DESC LIMIT 20
      params:
        customer_id: {type: int64, required: true, min: 0}
      formats: [json]
  - name: slow-a
    match: {path_prefix: /v1/slow-a, methods: [GET]}
    data:
      source: slowa
      sql: SELECT id, pg_sleep(0.2)::text AS slept FROM orders WHERE id = :id
      params:
        id: {type: int64, required: true, min: 1}
  - name: slow-b
    match: {path_prefix: /v1/slow-b, methods: [GET]}
    data:
      source: slowb
      sql: SELECT id, pg_sleep(0.2)::text AS slept FROM orders WHERE id = :id
      params:
        id: {type: int64, required: true, min: 1}
  - name: slow-c
    match: {path_prefix: /v1/slow-c, methods: [GET]}
    data:
      source: slowc
      sql: SELECT id, pg_sleep(0.2)::text AS slept FROM orders WHERE id = :id
      params:
        id: {type: int64, required: true, min: 1}
  - name: sqlite
    match: {path_prefix: /v1/sqlite, methods: [GET]}
    data:
      source: lite
      sql: SELECT id, customer_id, total, created_at FROM orders
      formats: [ndjson]
      limits: {max_rows: 10000000, max_bytes: 1GiB}
      statement_timeout: 5m
`, listen, admin, q(b.stateDir), q(b.dsn), q(b.dsn), q(b.dsn), q(b.dsn), q(b.dsn), q(b.sqlite))
}

// start starts a fresh process of who ("levee" or "baseline") and waits
// until it answers; the caller stops it.
func (b *bench) start(who string) *server {
	t := b.t
	s := &server{name: who, addr: freeAddr(t), done: make(chan struct{}), stderrBuf: &bytes.Buffer{}}
	var ready string
	if who == "levee" {
		s.admin = freeAddr(t)
		if err := os.WriteFile(b.cfgPath, []byte(b.leveeConfig(s.addr, s.admin)), 0o644); err != nil {
			t.Fatal(err)
		}
		s.cmd = exec.Command(b.levee, "run", "-config", b.cfgPath)
		ready = "http://" + s.admin + "/readyz"
	} else {
		s.cmd = exec.Command(b.baseline, "-listen", s.addr, "-pg", b.dsn, "-pool", "8", "-sqlite", b.sqlite)
		ready = "http://" + s.addr + "/healthz"
	}
	s.cmd.Stdout = io.Discard
	s.cmd.Stderr = s.stderrBuf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode < 300 {
				return s
			}
		}
		select {
		case <-s.done:
			t.Fatalf("%s exited at start: %s", who, s.stderrBuf)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			t.Fatalf("%s not ready within 20 s: %v: %s", who, err, s.stderrBuf)
		}
	}
}

func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// rss is the process's resident set in bytes (/proc/PID/status VmRSS).
func (s *server) rss() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpu is the process's user+system CPU time (/proc/PID/stat utime+stime,
// in clock ticks of 10 ms).
func (s *server) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')')
	f := strings.Fields(string(b[i+2:])) // f[0] is field 3 (state)
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// memStats is a Go runtime's heap in use and its cumulative allocations.
type memStats struct{ heapInuse, allocBytes, mallocs int64 }

// mem reads levee's go_memstats_{heap_inuse_bytes,alloc_bytes_total,
// mallocs_total} from its /metrics, or the baseline's runtime.MemStats
// from /heap.
func (s *server) mem() memStats {
	url := "http://" + s.addr + "/heap"
	if s.admin != "" {
		url = "http://" + s.admin + "/metrics"
	}
	resp, err := http.Get(url)
	if err != nil {
		return memStats{}
	}
	defer resp.Body.Close()
	var m memStats
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 16<<20))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if s.admin == "" {
			_, _ = fmt.Sscan(line, &m.heapInuse, &m.allocBytes, &m.mallocs)
			return m
		}
		for name, dst := range map[string]*int64{"go_memstats_heap_inuse_bytes ": &m.heapInuse,
			"go_memstats_alloc_bytes_total ": &m.allocBytes, "go_memstats_mallocs_total ": &m.mallocs} {
			if v, ok := strings.CutPrefix(line, name); ok {
				f, _ := strconv.ParseFloat(v, 64)
				*dst = int64(f)
			}
		}
	}
	return m
}

func (s *server) heap() int64 { return s.mem().heapInuse }

// sampler records the peak RSS every 10 ms and the peak Go heap every
// 200 ms until stopped.
type sampler struct {
	peakRSS, peakHeap int64
	stopCh            chan struct{}
	once              sync.Once
	wg                sync.WaitGroup
}

func sample(s *server) *sampler {
	p := &sampler{stopCh: make(chan struct{})}
	p.wg.Go(func() {
		for {
			p.peakRSS = max(p.peakRSS, s.rss())
			select {
			case <-p.stopCh:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	p.wg.Go(func() {
		for {
			p.peakHeap = max(p.peakHeap, s.heap())
			select {
			case <-p.stopCh:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	return p
}

// stop ends the sampling; it may be called more than once.
func (p *sampler) stop() { p.once.Do(func() { close(p.stopCh) }); p.wg.Wait() }

// profile takes a CPU profile of levee for d into profileDir/name.pprof.
func profile(t *testing.T, s *server, name string, d time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", s.admin, int(d/time.Second)))
		if err != nil {
			t.Errorf("profile: %v", err)
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(filepath.Join(profileDir, name+".pprof"))
		if err != nil {
			t.Errorf("profile: %v", err)
			return
		}
		defer f.Close()
		_, _ = io.Copy(f, resp.Body)
		say("profile written: %s", f.Name())
	}()
	return func() { <-done }
}

// streamOnce GETs path as NDJSON and counts rows (lines) and bytes; an
// error line or a wrong count fails the test.
func streamOnce(t *testing.T, url string, want int) (rows, n int64, took time.Duration) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Accept", "application/x-ndjson")
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}, Timeout: 5 * time.Minute}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	buf := make([]byte, 64<<10)
	var last []byte
	for {
		k, err := resp.Body.Read(buf)
		rows += int64(bytes.Count(buf[:k], []byte{'\n'}))
		n += int64(k)
		if k > 0 {
			last = append(last[:0], buf[max(0, k-200):k]...)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("GET %s: after %d rows: %v", url, rows, err)
		}
	}
	took = time.Since(start)
	if rows != int64(want) || bytes.Contains(last, []byte(`"error"`)) {
		t.Fatalf("GET %s: %d rows, want %d; ends %q", url, rows, want, last)
	}
	return rows, n, took
}

// scan runs one full NDJSON stream against a fresh process.
func (b *bench) scan(who, scenario, leveePath, basePath string, want int, prof bool) map[string]float64 {
	s := b.start(who)
	defer s.stop()
	path := basePath
	if who == "levee" {
		path = leveePath
	}
	rss0, mem0, cpu0 := s.rss(), s.mem(), s.cpu()
	heap0 := mem0.heapInuse
	var wait func()
	if prof {
		wait = profile(b.t, s, "levee-"+scenario, 3*time.Second)
	}
	p := sample(s)
	defer p.stop() // also when streamOnce fails the test
	rows, n, took := streamOnce(b.t, "http://"+s.addr+path, want)
	p.stop()
	cpu := s.cpu() - cpu0
	mem1 := s.mem()
	if wait != nil {
		wait()
		return nil
	}
	m := map[string]float64{
		"rows_per_s":      float64(rows) / took.Seconds(),
		"secs":            took.Seconds(),
		"bytes_per_row":   float64(n) / float64(rows),
		"rss_start_MiB":   float64(rss0) / (1 << 20),
		"rss_growth_MiB":  float64(max(0, p.peakRSS-rss0)) / (1 << 20),
		"heap_start_MiB":  float64(heap0) / (1 << 20),
		"heap_growth_MiB": float64(max(0, p.peakHeap-heap0)) / (1 << 20),
		"cpu_s":           cpu.Seconds(),
		"cpu_ns_per_row":  float64(cpu.Nanoseconds()) / float64(rows),
		// Both include the heap samples' own scrapes (levee's /metrics).
		"alloc_B_per_row": float64(mem1.allocBytes-mem0.allocBytes) / float64(rows),
		"allocs_per_row":  float64(mem1.mallocs-mem0.mallocs) / float64(rows),
	}
	say("%s %-8s %d rows %.1f MiB in %v: %.0f rows/s | RSS %.1f MiB +%.1f MiB peak | Go heap %.1f MiB +%.1f MiB peak | CPU %.2fs = %.0f ns/row | %.2f allocs %.0f B/row",
		scenario, who, rows, float64(n)/(1<<20), took.Round(time.Millisecond), m["rows_per_s"], m["rss_start_MiB"], m["rss_growth_MiB"],
		m["heap_start_MiB"], m["heap_growth_MiB"], m["cpu_s"], m["cpu_ns_per_row"], m["allocs_per_row"], m["alloc_B_per_row"])
	return m
}

func (b *bench) stream(who string, prof bool) map[string]float64 {
	return b.scan(who, "stream", "/v1/stream", "/stream", pgRows, prof)
}

// streamText is the baseline with total::text (PostgreSQL renders the
// numeric): the fastest bare program, a second yardstick.
func (b *bench) streamText() map[string]float64 {
	return b.scan("baseline", "stream-text", "", "/stream-text", pgRows, false)
}

func (b *bench) sqliteScan(who string, prof bool) map[string]float64 {
	return b.scan(who, "sqlite", "/v1/sqlite", "/sqlite", sqliteRows, prof)
}

// lookups runs 64 closed-loop clients, each on its own customer, for
// lookupFor after a 2 s warm-up. With spread, each client connects from its
// own loopback address (127.0.0.2, 127.0.0.3, ...), so levee sees 64
// consumers (without apps a consumer is the client address), as 64 apps
// would be; without, all 64 come from 127.0.0.1: one consumer holding 64
// connections, whose standing queue levee's admission sheds by design
// (docs/admission.md, controlled delay and the short-wait bound).
func (b *bench) lookups(who string, spread, prof bool) map[string]float64 {
	s := b.start(who)
	defer s.stop()
	prefix := "/lookup?customer_id="
	if who == "levee" {
		prefix = "/v1/lookup?customer_id="
	}
	run := func(d time.Duration) []loadgen.Shot {
		per := make([][]loadgen.Shot, lookupClient)
		var wg sync.WaitGroup
		for k := range lookupClient {
			path := prefix + strconv.Itoa(1+k*701%customers)
			wg.Go(func() {
				if spread {
					per[k] = closedFrom(net.IPv4(127, 0, 0, byte(2+k)), s.addr, path, d)
					return
				}
				per[k] = loadgen.Closed{Addr: s.addr, Path: path, Clients: 1, Duration: d,
					Timeout: 5 * time.Second, Header: []string{"Accept: application/json"}}.Run()
			})
		}
		wg.Wait()
		return slices.Concat(per...)
	}
	run(2 * time.Second)
	var wait func()
	if prof {
		wait = profile(b.t, s, "levee-lookup", lookupFor-time.Second)
	}
	rss0, cpu0 := s.rss(), s.cpu()
	shots := run(lookupFor)
	cpu := s.cpu() - cpu0
	rss1 := s.rss()
	if wait != nil {
		wait()
		return nil
	}
	var ok []time.Duration
	other := map[string]int{}
	for _, sh := range shots {
		if sh.Status == 200 {
			ok = append(ok, sh.Latency)
		} else {
			other[fmt.Sprintf("%d %s%s", sh.Status, sh.Reason, sh.Err)]++
		}
	}
	if len(ok) == 0 {
		b.t.Fatalf("lookup %s: none of %d answered 200: %v", who, len(shots), other)
	}
	m := map[string]float64{
		"req_per_s":     float64(len(ok)) / lookupFor.Seconds(),
		"p50_ms":        ms(loadgen.Percentile(ok, 50)),
		"p99_ms":        ms(loadgen.Percentile(ok, 99)),
		"not_200":       float64(len(shots) - len(ok)),
		"cpu_us_per_ok": float64(cpu.Microseconds()) / float64(len(ok)),
		"rss_MiB":       float64(rss1) / (1 << 20),
	}
	say("lookup %-8s %d clients from %s %v: %.0f req/s (200s), p50 %.2f ms p99 %.2f ms, other answers %v | CPU %.2fs = %.0f us/200 | RSS %.1f -> %.1f MiB",
		who, lookupClient, map[bool]string{true: "64 addresses", false: "one address"}[spread], lookupFor, m["req_per_s"], m["p50_ms"], m["p99_ms"],
		other, cpu.Seconds(), m["cpu_us_per_ok"], float64(rss0)/(1<<20), m["rss_MiB"])
	return m
}

// closedFrom is one closed-loop client connecting from the local address
// from: loadgen's Closed with one client, which cannot choose its source
// address. It reads answers with a Content-Length only, as loadgen does.
func closedFrom(from net.IP, addr, path string, d time.Duration) []loadgen.Shot {
	req := loadgen.Request(path, []string{"Accept: application/json"})
	begin := time.Now()
	end := begin.Add(d)
	var out []loadgen.Shot
	var c net.Conn
	var br *bufio.Reader
	var body []byte
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for t := time.Now(); t.Before(end); t = time.Now() {
		sh := loadgen.Shot{Due: t.Sub(begin)}
		deadline := t.Add(5 * time.Second)
		var err error
		if c == nil {
			dl := net.Dialer{Deadline: deadline, LocalAddr: &net.TCPAddr{IP: from}}
			if c, err = dl.Dial("tcp", addr); err == nil {
				br = bufio.NewReaderSize(c, 8192)
			}
		}
		if err == nil {
			sh.Status, body, err = exchange(c, br, req, deadline, body)
		}
		sh.Latency = time.Since(t)
		if err != nil {
			sh.Status, sh.Err = 0, err.Error()
			if c != nil {
				c.Close()
				c = nil
			}
		} else if sh.Status != 200 {
			sh.Reason = loadgen.JSONReason(body)
		}
		if t.Add(sh.Latency).Before(end) {
			out = append(out, sh)
		}
	}
	return out
}

// exchange writes req and reads one answer with a Content-Length body.
func exchange(c net.Conn, br *bufio.Reader, req []byte, deadline time.Time, body []byte) (int, []byte, error) {
	if err := c.SetDeadline(deadline); err != nil {
		return 0, body, err
	}
	if _, err := c.Write(req); err != nil {
		return 0, body, err
	}
	line, err := br.ReadSlice('\n')
	if err != nil || len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.1 ")) {
		return 0, body, fmt.Errorf("bad status line %q: %v", line, err)
	}
	status, err := strconv.Atoi(string(line[9:12]))
	if err != nil {
		return 0, body, err
	}
	length := -1
	for n := 0; n < 100; n++ {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return 0, body, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			break
		}
		if name, value, _ := bytes.Cut(line, []byte(":")); bytes.EqualFold(name, []byte("Content-Length")) {
			length, _ = strconv.Atoi(string(bytes.TrimSpace(value)))
		}
	}
	if length < 0 || length > 1<<20 {
		return 0, body, fmt.Errorf("status %d: no usable Content-Length", status)
	}
	body = slices.Grow(body[:0], length)[:length]
	_, err = io.ReadFull(br, body)
	return status, body, err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// slow offers slowRate requests/s of a 200 ms query to a pool of 8 (40/s
// of capacity) for slowFor, open loop, and reports the goodput and the
// refusals' latency.
func (b *bench) slow(who, path string, prof bool) map[string]float64 {
	s := b.start(who)
	defer s.stop()
	var wait func()
	if prof {
		wait = profile(b.t, s, "levee-slow", slowFor-time.Second)
	}
	total := slowRate * int(slowFor/time.Second)
	shots := loadgen.Open{Addr: s.addr, Path: path + "?id=7", Rate: slowRate, Total: total, Timeout: 5 * time.Second, Workers: 256,
		Header: []string{"Accept: application/json"}}.Run()
	if wait != nil {
		wait()
		return nil
	}
	// Goodput counts the answers that ended within the offered window: the
	// baseline's queue drains for up to the 5 s timeout after it.
	var ok, refused, timedOut []time.Duration
	okLate, okSecondHalf := 0, 0
	byReason := map[string][]time.Duration{}
	other := map[string]int{}
	for _, sh := range shots {
		switch {
		case sh.Status == 200:
			ok = append(ok, sh.Latency)
			switch end := sh.Due + sh.Latency; {
			case end > slowFor:
				okLate++
			case end > slowFor/2:
				okSecondHalf++
			}
		case sh.Status == 429 || sh.Status == 503:
			refused = append(refused, sh.Latency)
			k := fmt.Sprintf("%d %s", sh.Status, sh.Reason)
			byReason[k] = append(byReason[k], sh.Latency)
		case sh.TimedOut:
			timedOut = append(timedOut, sh.Latency)
		default:
			other[fmt.Sprintf("%d %s%s", sh.Status, sh.Reason, sh.Err)]++
		}
	}
	m := map[string]float64{
		"goodput_per_s":             float64(len(ok)-okLate) / slowFor.Seconds(),
		"goodput_2nd_half_per_s":    float64(okSecondHalf) / (slowFor / 2).Seconds(),
		"ok_p50_ms":                 ms(loadgen.Percentile(ok, 50)),
		"ok_p99_ms":                 ms(loadgen.Percentile(ok, 99)),
		"refused":                   float64(len(refused)),
		"refused_p50_ms":            ms(loadgen.Percentile(refused, 50)),
		"refused_p99_ms":            ms(loadgen.Percentile(refused, 99)),
		"refused_queue_full_p99_ms": ms(loadgen.Percentile(byReason["503 queue_full"], 99)),
		"timed_out":                 float64(len(timedOut)),
	}
	// The first second holds the limiter's start (the adaptive limit's
	// first minRTT probe, a queue not yet standing so waiters get the whole
	// queue_timeout): the steady state is what follows.
	over5, over5Early := 0, 0
	var steady []time.Duration
	steadyBy := map[string][]time.Duration{}
	for _, sh := range shots {
		if sh.Status != 429 && sh.Status != 503 {
			continue
		}
		if sh.Latency > 5*time.Millisecond {
			over5++
			if sh.Due < time.Second {
				over5Early++
			}
		}
		if sh.Due >= time.Second {
			steady = append(steady, sh.Latency)
			k := fmt.Sprintf("%d %s", sh.Status, sh.Reason)
			steadyBy[k] = append(steadyBy[k], sh.Latency)
		}
	}
	m["refused_over_5ms"] = float64(over5)
	m["refused_p99_after_1s_ms"] = ms(loadgen.Percentile(steady, 99))
	m["refused_queue_full_p99_after_1s_ms"] = ms(loadgen.Percentile(steadyBy["503 queue_full"], 99))
	m["refused_queue_timeout_p99_after_1s_ms"] = ms(loadgen.Percentile(steadyBy["503 queue_timeout"], 99))
	var reasons strings.Builder
	for _, k := range slices.Sorted(maps.Keys(byReason)) {
		ds := byReason[k]
		fmt.Fprintf(&reasons, " %s: %d (p50 %.2f ms, p99 %.2f ms);", k, len(ds), ms(loadgen.Percentile(ds, 50)), ms(loadgen.Percentile(ds, 99)))
	}
	say("slow %-8s %-12s %d/s x %v: goodput %.1f/s (second half %.1f/s; %d more ended after the window) p50 %.0f ms p99 %.0f ms | refused %d: p50 %.2f ms p99 %.2f ms;%s timed out (5 s) %d | other %v",
		who, path, slowRate, slowFor, m["goodput_per_s"], m["goodput_2nd_half_per_s"], okLate, m["ok_p50_ms"], m["ok_p99_ms"], len(refused), m["refused_p50_ms"], m["refused_p99_ms"],
		reasons.String(), len(timedOut), other)
	say("slow %-8s %-12s refusals over 5 ms: %d of %d (%d of them due in the first second); after the first second: p99 %.2f ms (queue_full %.2f ms, queue_timeout %.2f ms)",
		who, path, over5, len(refused), over5Early, m["refused_p99_after_1s_ms"], m["refused_queue_full_p99_after_1s_ms"], m["refused_queue_timeout_p99_after_1s_ms"])
	return m
}
