package gateway

import (
	"bufio"
	"bytes"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/andybalholm/brotli"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"modernc.org/sqlite"
)

// gateRow is the row at which levee_test_gate(id) holds its query until
// the test sends on gateOpen (or 10 s pass); the function is global to
// the sqlite driver, so it is registered once.
const gateRow = 1500

var (
	gateOnce sync.Once
	gateMu   sync.Mutex
	gateOpen chan struct{} // the running test's gate
)

func registerGate(t *testing.T) chan struct{} {
	t.Helper()
	gateOnce.Do(func() {
		sqlite.MustRegisterScalarFunction("levee_test_gate", 1, func(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
			if id, _ := args[0].(int64); id == gateRow {
				gateMu.Lock()
				ch := gateOpen
				gateMu.Unlock()
				if ch != nil {
					select {
					case <-ch:
					case <-time.After(10 * time.Second):
					}
				}
			}
			return int64(1), nil
		})
	})
	ch := make(chan struct{})
	gateMu.Lock()
	gateOpen = ch
	gateMu.Unlock()
	t.Cleanup(func() {
		gateMu.Lock()
		gateOpen = nil
		gateMu.Unlock()
	})
	return ch
}

// TestCompressedNDJSONDataRoute: a data route over SQLite with
// compression answers NDJSON gzip-coded as it streams: the client decodes
// the first rows while the query is still held at row 1500 (by a SQL
// function the test controls), then the rest once it lets the query go
// on, every row once and in order. A small JSON answer on the same route
// is sent as is, and a refusal of the route's own (a bad parameter) is
// plain JSON.
func TestCompressedNDJSONDataRoute(t *testing.T) {
	gate := registerGate(t)
	dbPath := filepath.Join(t.TempDir(), "nums.db")
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const rows = 3000
	if _, err := db.Exec(`CREATE TABLE nums (id INTEGER PRIMARY KEY, pad TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < ?) INSERT INTO nums SELECT i, printf('row %05d %s', i, hex(randomblob(40))) FROM n`, rows); err != nil {
		t.Fatal(err)
	}
	db.Close()
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
data_sources:
  nums: {driver: sqlite, path: %s, max_conns: 2}
routes:
  - name: nums
    match: {path: /v1/nums}
    data:
      source: nums
      sql: SELECT id, pad, levee_test_gate(id) AS g FROM nums WHERE id >= :from ORDER BY id
      params:
        from: {type: int64, required: true, min: 1}
    compression: {encodings: [gzip], min_bytes: 2KiB}
`, dataQuote(t.TempDir()), dataQuote(dbPath)))

	req, _ := http.NewRequest(http.MethodGet, h.base+"/v1/nums?from=1", nil)
	req.Header.Set("Accept", "application/x-ndjson")
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" || strings.Join(resp.Header.Values("Vary"), ", ") != "Accept, Accept-Encoding" {
		t.Fatalf("status %d, Content-Encoding %q, Vary %q", resp.StatusCode, resp.Header.Get("Content-Encoding"), resp.Header.Values("Vary"))
	}
	wire := &countingReader{r: resp.Body}
	zr, err := gzip.NewReader(wire)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	next := 1
	readRow := func() {
		t.Helper()
		if !sc.Scan() {
			t.Fatalf("row %d: %v", next, sc.Err())
		}
		var row struct {
			ID  int64  `json:"id"`
			Pad string `json:"pad"`
		}
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil || row.ID != int64(next) || !strings.HasPrefix(row.Pad, fmt.Sprintf("row %05d ", next)) {
			t.Fatalf("row %d: %q (%v)", next, sc.Text(), err)
		}
		next++
	}
	// The first rows arrive while the query is held at row gateRow.
	readRow()
	firstWire := wire.n.Load()
	for next < 100 {
		readRow()
	}
	t.Logf("first 99 rows decoded with %d coded bytes on the wire while the query is held at row %d", firstWire, gateRow)
	close(gate) // the query goes on
	for next <= rows {
		readRow()
	}
	if sc.Scan() {
		t.Fatalf("a row past the last: %q", sc.Text())
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d NDJSON rows: %d coded bytes on the wire", rows, wire.n.Load())
	resp.Body.Close()
	// Counted once the answer ends: one gzip answer, its wire bytes in
	// levee_response_bytes_total and its body bytes before coding apart.
	waitFor(t, "the compressed answer counted", func() bool {
		return h.metricIs(`levee_compressed_responses_total{encoding="gzip",route="nums"}`, 1)
	})
	in := h.metric(`levee_compressed_input_bytes_total{route="nums"}`)
	out := h.metric(`levee_response_bytes_total{route="nums"}`)
	if out != float64(wire.n.Load()) || in <= 2*out {
		t.Errorf("bytes: %v before coding, %v after; the client read %d", in, out, wire.n.Load())
	}
	t.Logf("metrics: %v bytes before coding, %v on the wire", in, out)

	// A refusal of the data route's own (a bad parameter): plain JSON.
	req, _ = http.NewRequest(http.MethodGet, h.base+"/v1/nums?from=x", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp2, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if resp2.StatusCode != 400 || resp2.Header.Get("Content-Encoding") != "" || !strings.Contains(string(body), `"reason"`) {
		t.Errorf("bad parameter: %d, Content-Encoding %q, %s", resp2.StatusCode, resp2.Header.Get("Content-Encoding"), body)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestCompressedUpstreamAnswer: through levee's own listener, an upstream
// answer of known length (64 KiB of JSON) on a route with compression
// arrives coded by each coding, chunked, with Vary and a weak ETag, and
// decodes to the upstream's bytes; the same route's small answer and a
// client without Accept-Encoding get the bytes as they are.
func TestCompressedUpstreamAnswer(t *testing.T) {
	var big strings.Builder
	for i := 0; big.Len() < 64<<10; i++ {
		fmt.Fprintf(&big, `{"id":%d,"name":"item %d","ok":true},`, i, i*31%977)
	}
	body := []byte(big.String())
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := body
		if r.URL.Path == "/small" {
			b = body[:512]
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.Header().Set("ETag", `"e1"`)
		w.Write(b)
	}))
	defer up.Close()
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  app: {endpoints: [{address: %s}]}
routes:
  - {name: app, upstream: app, compression: {}}
`, up.Listener.Addr().String()))
	tr := &http.Transport{DisableCompression: true} // no gzip of the transport's own
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	get := func(path, ae string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, h.base+path, nil)
		if ae != "" {
			req.Header.Set("Accept-Encoding", ae)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, raw
	}
	for _, coding := range []string{"gzip", "br", "zstd"} {
		resp, raw := get("/big", coding+", identity;q=0.5")
		if resp.Header.Get("Content-Encoding") != coding || resp.ContentLength != -1 || resp.Header.Get("Vary") != "Accept-Encoding" || resp.Header.Get("ETag") != `W/"e1"` {
			t.Fatalf("%s: Content-Encoding %q, length %d, Vary %q, ETag %q", coding, resp.Header.Get("Content-Encoding"), resp.ContentLength, resp.Header.Get("Vary"), resp.Header.Get("ETag"))
		}
		var dec io.Reader
		switch coding {
		case "gzip":
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			dec = zr
		case "br":
			dec = brotli.NewReader(bytes.NewReader(raw))
		case "zstd":
			zr, err := zstd.NewReader(bytes.NewReader(raw), zstd.WithDecoderConcurrency(1))
			if err != nil {
				t.Fatal(err)
			}
			defer zr.Close()
			dec = zr
		}
		got, err := io.ReadAll(dec)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("%s: decoded %d bytes (%v), want the upstream's %d", coding, len(got), err, len(body))
		}
		t.Logf("%-4s: %d bytes -> %d on the wire", coding, len(body), len(raw))
	}
	for _, tc := range []struct{ path, ae string }{{"/small", "gzip"}, {"/big", ""}} {
		resp, raw := get(tc.path, tc.ae)
		if resp.Header.Get("Content-Encoding") != "" || resp.ContentLength != int64(len(raw)) || !bytes.HasPrefix(body, raw) {
			t.Errorf("%s with %q: Content-Encoding %q, length %d, %d bytes", tc.path, tc.ae, resp.Header.Get("Content-Encoding"), resp.ContentLength, len(raw))
		}
	}
}
