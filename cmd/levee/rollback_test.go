package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// TestCrashLoopStartsFromLastGood (issue 28 item 2): levee runs a good
// configuration past the rollback window (its content becomes the last
// good one), stops; the file is replaced by another valid one and levee is
// killed with SIGKILL before the window three times in a row; the fourth
// start serves the last good configuration, says so in its log and the
// admin API, pins the file's content, and refuses it on SIGHUP.
func TestCrashLoopStartsFromLastGood(t *testing.T) {
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "good") }))
	defer good.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	state := t.TempDir()
	conf := func(addr string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
rollback: {window: 1s, crash_starts: 3, crash_within: 2m}
upstreams:
  u: {endpoints: [{address: %s}]}
routes:
  - {name: all, match: {path_prefix: /}, upstream: u}
`, state, strings.TrimPrefix(addr, "http://"))
	}
	cfg := writeFile(t, conf(good.URL))
	// exited waits for p to end, leaving its result for startProcess's
	// cleanup (which would otherwise wait 10 s for it).
	exited := func(p *process) {
		err := <-p.done
		p.done <- err
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second} // a SIGTERM drains at once
	get := func(p *process, path string) (int, string) {
		resp, err := client.Get(path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	rollbacks := func(p *process) map[string]any {
		_, body := get(p, "http://"+p.admin+"/api/v1/rollbacks")
		var v map[string]any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Fatalf("GET /api/v1/rollbacks: %s", body)
		}
		return v
	}

	began := time.Now()
	p := startProcess(t, "run", "-config", cfg)
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		if s, b := get(p, "http://"+p.data+"/"); s != 200 || b != "good" {
			t.Fatalf("good configuration: %d %q", s, b)
		}
		v := rollbacks(p)
		return v["good_config_digest"] != nil && v["good_config_digest"] != "", fmt.Sprintf("%v", v)
	})
	t.Logf("good configuration judged good after %v", time.Since(began).Round(time.Millisecond))
	p.cmd.Process.Signal(syscall.SIGTERM)
	exited(p)
	t.Logf("stopped after %v", time.Since(began).Round(time.Millisecond))

	if err := os.WriteFile(cfg, []byte(conf(closed)), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		p := startProcess(t, "run", "-config", cfg)
		if strings.Contains(p.log(), "ROLLBACK") {
			t.Fatalf("start %d already rolled back:\n%s", i+1, p.log())
		}
		if err := p.cmd.Process.Kill(); err != nil { // SIGKILL: no drain, no record of the stop
			t.Fatal(err)
		}
		exited(p)
	}
	t.Logf("3 starts killed after %v", time.Since(began).Round(time.Millisecond))
	p = startProcess(t, "run", "-config", cfg)
	for i := 0; i < 10; i++ {
		if s, b := get(p, "http://"+p.data+"/"); s != 200 || b != "good" {
			t.Fatalf("after the crash loop, request %d: %d %q (the file's configuration serves)\n%s", i, s, b, p.log())
		}
	}
	if !strings.Contains(p.log(), "crash loop") || !strings.Contains(p.log(), "ROLLBACK: levee starts from its last good configuration") {
		t.Errorf("the log does not say it starts from the last good configuration after a crash loop:\n%s", p.log())
	}
	v := rollbacks(p)
	pins, _ := v["pins"].([]any)
	if v["serving_good"] != true || len(pins) != 1 {
		t.Fatalf("rollbacks after the crash loop: %v", v)
	}
	t.Logf("after 3 killed starts: %v", v["why"])
	p.cmd.Process.Signal(syscall.SIGHUP)
	testkit.Eventually(t, 10*time.Second, func() (bool, string) {
		return strings.Contains(p.log(), "rolled back as bad"), "no refusal of the pinned file in the log"
	})
	if s, b := get(p, "http://"+p.data+"/"); s != 200 || b != "good" {
		t.Fatalf("after SIGHUP of the pinned file: %d %q", s, b)
	}
	if _, err := os.Stat(filepath.Join(state, "rollback", "good.yaml")); err != nil {
		t.Error(err)
	}
}
