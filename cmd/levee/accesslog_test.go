package main

import (
	"fmt"
	"io"
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

// TestSIGUSR1ReopensAccessLog: with the access log in a file, logrotate's
// move-then-signal works: after the file is renamed and levee gets
// SIGUSR1, new lines go to a new file at the configured path and the
// renamed one keeps the earlier lines.
func TestSIGUSR1ReopensAccessLog(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer up.Close()
	logPath := filepath.Join(t.TempDir(), "access.log")
	cfg := writeFile(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log:
  access: {output: %s}
upstreams:
  u: {endpoints: [{address: %s}]}
routes:
  - {name: all, match: {path_prefix: /}, upstream: u}
`, logPath, strings.TrimPrefix(up.URL, "http://")))
	p := startProcess(t, "run", "-config", cfg)
	get := func(id string) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+p.data+"/", nil)
		req.Header.Set("X-Request-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// waitFile polls (bounded) until path's content satisfies ok.
	waitFile := func(path, what string, ok func(string) bool) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, func() (bool, string) {
			b, _ := os.ReadFile(path)
			return ok(string(b)), fmt.Sprintf("%s: no %s (content %q); levee's log:\n%s", path, what, b, p.log())
		})
	}
	get("before-rotate")
	waitFile(logPath, "line before-rotate", func(s string) bool { return strings.Contains(s, `"before-rotate"`) })
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	// The reopen creates the new file (empty until a line comes).
	waitFile(logPath, "new file", func(string) bool { _, err := os.Stat(logPath); return err == nil })
	get("after-rotate")
	waitFile(logPath, "line after-rotate", func(s string) bool { return strings.Contains(s, `"after-rotate"`) })
	if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "before-rotate") {
		t.Errorf("the new file holds the line from before the rotation: %q", b)
	}
	if b, _ := os.ReadFile(logPath + ".1"); strings.Contains(string(b), "after-rotate") || !strings.Contains(string(b), "before-rotate") {
		t.Errorf("the rotated file: %q", b)
	}
	if strings.Contains(p.log(), `"request_id"`) {
		t.Errorf("access lines on stderr with output set to a file:\n%s", p.log())
	}
}
