package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/config"
)

// fileLines returns the request ids of the access log lines in path, with
// how often each appears.
func fileLines(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" {
			continue
		}
		var m struct {
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: line %q: %v", path, line, err)
		}
		out[m.RequestID]++
	}
	return out
}

// okGet sends GET path with request id id and wants a 200.
func okGet(t *testing.T, h *harness, path, id string, hdr ...string) {
	t.Helper()
	resp := h.get(path, append([]string{"X-Request-Id", id}, hdr...)...)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s (%s) = %d", path, id, resp.StatusCode)
	}
}

// tryGet is okGet for a goroutine other than the test's.
func tryGet(h *harness, path, id string) error {
	req, err := http.NewRequest(http.MethodGet, h.base+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Request-Id", id)
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("GET %s (%s) = %d", path, id, resp.StatusCode)
	}
	return nil
}

func reload(t *testing.T, h *harness, yaml string) {
	t.Helper()
	h.writeConfig(yaml)
	if err := h.g.Reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
}

// TestAccessLogReload: log.access changes on reload, without a restart.
// Off, then on to a file: the requests after the reload are logged there.
// A reload that keeps log.access keeps the log (its file stays open: lines
// follow the file after a rename) and SIGUSR1's reopen still works. A file
// that cannot be opened fails the reload naming the field and the old log
// keeps serving. Changed to a second file under load: every request's
// line is written exactly once, the ones queued before the swap to the
// first file, the ones after the reload to the second. Off again: no
// more lines.
func TestAccessLogReload(t *testing.T) {
	be, _ := backend(t, "ok")
	dir := t.TempDir()
	fileA, fileB := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	conf := func(access, extraRoute string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: %s}
upstreams:
  ok: {endpoints: [{address: %s}]}
routes:
  - {name: ok, match: {path_prefix: /}, upstream: ok}
%s`, access, hostPort(be), extraRoute)
	}
	h := start(t, conf("false", ""))
	okGet(t, h, "/x", "off-1")

	onA := fmt.Sprintf("{output: %s, sample_2xx: 1, redact_query: [token]}", fileA)
	reload(t, h, conf(onA, ""))
	okGet(t, h, "/x?token=s3cret", "on-1")
	waitFor(t, "on-1 in a.log", func() bool { return fileLines(t, fileA)["on-1"] == 1 })
	if b, _ := os.ReadFile(fileA); strings.Contains(string(b), "s3cret") || strings.Contains(string(b), "off-1") {
		t.Errorf("a.log after the reload: %s", b)
	}

	// Same log.access, another route: the log is kept, file and all.
	if err := os.Rename(fileA, fileA+".moved"); err != nil {
		t.Fatal(err)
	}
	reload(t, h, conf(onA, "  - {name: other, match: {path_prefix: /other/}, upstream: ok}"))
	okGet(t, h, "/x", "kept-1")
	waitFor(t, "kept-1 in the moved a.log (still open)", func() bool { return fileLines(t, fileA+".moved")["kept-1"] == 1 })
	h.g.ReopenAccessLog() // what SIGUSR1 does
	waitFor(t, "a reopened a.log", func() bool {
		okGet(t, h, "/x", "reopened")
		return fileLines(t, fileA)["reopened"] > 0
	})

	// A file that cannot be opened (validation passes: /proc exists):
	// the reload fails naming the field, the old log keeps serving.
	h.writeConfig(conf("{output: /proc/levee-no-such-access.log}", ""))
	if err := h.g.Reload(); err == nil || !strings.Contains(err.Error(), "log.access.output") {
		t.Fatalf("reload to an output that cannot be opened: %v, want an error naming log.access.output", err)
	}
	okGet(t, h, "/x", "still-a")
	waitFor(t, "still-a in a.log", func() bool { return fileLines(t, fileA)["still-a"] == 1 })

	// To b.log, under load from 4 clients.
	var (
		sent                  sync.Map // id -> true when its answer came before the reload began
		swapping              atomic.Bool
		stop                  = make(chan struct{})
		wg                    sync.WaitGroup
		beforeCount, allCount atomic.Int64
	)
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("load-%d-%d", c, i)
				if err := tryGet(h, "/x", id); err != nil {
					t.Error(err) // not Fatal: not the test's goroutine
					return
				}
				before := !swapping.Load()
				sent.Store(id, before)
				allCount.Add(1)
				if before {
					beforeCount.Add(1)
				}
			}
		}()
	}
	waitFor(t, "200 requests before the reload", func() bool { return allCount.Load() >= 200 })
	swapping.Store(true)
	reload(t, h, conf(fmt.Sprintf("{output: %s, sample_2xx: 1}", fileB), ""))
	okGet(t, h, "/x", "on-b")
	waitFor(t, "100 requests after the reload", func() bool { return allCount.Load() >= beforeCount.Load()+100 })
	close(stop)
	wg.Wait()
	waitFor(t, "every request's line in a.log or b.log", func() bool {
		a, b := fileLines(t, fileA), fileLines(t, fileB)
		n := 0
		sent.Range(func(k, _ any) bool {
			n += a[k.(string)] + b[k.(string)]
			return true
		})
		return n >= int(allCount.Load()) && b["on-b"] == 1
	})
	a, b := fileLines(t, fileA), fileLines(t, fileB)
	inA, inB := 0, 0
	sent.Range(func(k, v any) bool {
		id := k.(string)
		if a[id]+b[id] != 1 {
			t.Errorf("%s: %d lines in a.log, %d in b.log, want exactly one", id, a[id], b[id])
		}
		if v.(bool) && a[id] != 1 {
			t.Errorf("%s, answered before the reload, is not in a.log", id)
		}
		inA += a[id]
		inB += b[id]
		return true
	})
	if a["on-b"] != 0 {
		t.Error("a request after the reload was logged to the old file")
	}
	t.Logf("under load: %d requests, %d answered before the reload; %d lines in a.log, %d in b.log", allCount.Load(), beforeCount.Load(), inA, inB)

	// Off: nothing more is written (Shutdown writes whatever is queued).
	reload(t, h, conf("false", ""))
	okGet(t, h, "/x", "off-2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.g.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if a, b := fileLines(t, fileA), fileLines(t, fileB); a["off-2"]+b["off-2"] != 0 {
		t.Error("a request after the log was turned off was logged")
	}
}

// TestTracingReload: tracing changes on reload. Off, then on with
// sampling 1: the spans of a request reach the receiver carrying the
// incoming trace id. The endpoint changed to a second receiver: spans go
// there, none to the first. Off again: none anywhere. Every tracer counts
// into the same levee_tracing_spans_exported_total.
func TestTracingReload(t *testing.T) {
	rc1, rc2 := newOTLPReceiver(t), newOTLPReceiver(t)
	be := newParentRecorder(t)
	conf := func(tracing string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
%s
upstreams:
  web: {endpoints: [{address: %s}]}
routes:
  - {name: web, match: {path_prefix: /}, upstream: web}
`, tracing, hostPort(be.srv))
	}
	on := func(rc *otlpReceiver) string {
		return fmt.Sprintf("tracing: {endpoint: %s, sampling: 1, service_name: levee-test, timeout: 5s}", rc.srv.URL)
	}
	const (
		tid0, tid1, tid2, tid3 = "10000000000000000000000000000001", "10000000000000000000000000000002", "10000000000000000000000000000003", "10000000000000000000000000000004"
		sid                    = "00f067aa0ba902b7"
	)
	h := start(t, conf(""))
	get := func(tid string) {
		t.Helper()
		okGet(t, h, "/t", "req-"+tid, "Traceparent", "00-"+tid+"-"+sid+"-01")
	}
	get(tid0)

	reload(t, h, conf(on(rc1)))
	get(tid1)
	server, attempts := split(t, waitSpans(t, rc1, tid1, 2))
	if hex := fmt.Sprintf("%x", server.ParentSpanId); hex != sid || len(attempts) != 1 {
		t.Errorf("server span's parent %s (want the caller's %s), %d attempt spans", hex, sid, len(attempts))
	}

	reload(t, h, conf(on(rc2)))
	get(tid2)
	split(t, waitSpans(t, rc2, tid2, 2))
	waitFor(t, "4 spans counted exported", func() bool { return h.metricIs("levee_tracing_spans_exported_total", 4) })

	reload(t, h, conf(""))
	get(tid3)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.g.Shutdown(ctx); err != nil { // exports whatever is queued
		t.Fatal(err)
	}
	for name, rc := range map[string]*otlpReceiver{"first": rc1, "second": rc2} {
		ids := rc.traceIDs()
		want := map[*otlpReceiver]string{rc1: tid1, rc2: tid2}[rc]
		if len(ids) != 1 || !ids[want] {
			t.Errorf("the %s receiver got traces %v, want only %s", name, ids, want)
		}
	}
}

// TestSameAccessLogCoversFields: a reload rebuilds the access log exactly
// when log.access changes, so sameAccessLog must see a change to any of
// AccessLog's fields and to Access (a field added to config.AccessLog and
// not compared fails here); the log level is not the access log's.
func TestSameAccessLogCoversFields(t *testing.T) {
	base := config.Log{Level: "info", Access: true,
		AccessLog: config.AccessLog{Output: "stderr", Sample2xx: 0.5, RedactQuery: []string{"token"}}}
	if !sameAccessLog(base, base) {
		t.Fatal("the same log settings compare unequal")
	}
	eachFieldChanged(t, base.AccessLog, nil, func(name string, a config.AccessLog) {
		l := base
		l.AccessLog = a
		if sameAccessLog(base, l) {
			t.Errorf("changing log.access's %s leaves the access log the same", name)
		}
	})
	off := base
	off.Access = false
	if sameAccessLog(base, off) {
		t.Error("turning the access log off leaves it the same")
	}
	lvl := base
	lvl.Level = "debug"
	if !sameAccessLog(base, lvl) {
		t.Error("changing log.level rebuilds the access log")
	}
}

// TestAccessLogReloadBeforeStart: a reload between New and Start that
// changes log.access retires the log New built (never run) and Start runs
// the new one: requests are logged to the second file only.
func TestAccessLogReloadBeforeStart(t *testing.T) {
	be, _ := backend(t, "ok")
	dir := t.TempDir()
	fileA, fileB := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	conf := func(file string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: {output: %s}}
upstreams:
  ok: {endpoints: [{address: %s}]}
routes:
  - {name: ok, match: {path_prefix: /}, upstream: ok}
`, file, hostPort(be))
	}
	h := &harness{t: t, cfgPath: filepath.Join(dir, "levee.yaml"), logs: &lockedBuffer{}}
	h.writeConfig(conf(fileA))
	g, err := New(Options{Load: func() (*config.Config, error) { return config.Load(h.cfgPath) }, LogOutput: h.logs})
	if err != nil {
		t.Fatal(err)
	}
	h.writeConfig(conf(fileB))
	if err := g.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	h.g, h.base, h.client = g, "http://"+g.Addr().String(), &http.Client{Timeout: 30 * time.Second}
	t.Cleanup(func() {
		h.client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := g.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	okGet(t, h, "/x", "after-start")
	waitFor(t, "after-start in b.log", func() bool { return fileLines(t, fileB)["after-start"] == 1 })
	if n := len(fileLines(t, fileA)); n != 0 {
		t.Errorf("a.log, replaced before Start, holds %d lines", n)
	}
}
