package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// testVersion is the version the test binary is stamped with.
const testVersion = "v0.1.0-3-g0123abcd4567"

// binary is the levee binary built once for the tests that run it as a
// separate process (signals, exit codes, the demo).
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "levee-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "levee")
	// The admin CLI's defaults come from the environment and the user's
	// CLI file: the machine's must not reach these tests (the tests that
	// try them set their own).
	for _, v := range []string{adminEnv, tokenFileEnv, legacyTokenFileEnv} {
		os.Unsetenv(v)
	}
	os.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg")) // none there
	// Built as the Makefile's BUILD (and so the Dockerfile) builds it
	// (static, no cgo, stamped), so that these tests run the binary the
	// distroless image ships (TestBinaryIsStatic, TestVersion).
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-buildid= -X main.version="+testVersion+" -X main.commit=0123abcd4567 -X main.date=2026-12-01T10:00:00Z", "-o", binary, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building levee:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "levee.yaml")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestValidate(t *testing.T) {
	good := writeFile(t, `
listen: 127.0.0.1:8080
admin: {listen: 127.0.0.1:9901}
upstreams:
  video: {endpoints: [{address: 127.0.0.1:9001, weight: 3}, {address: 127.0.0.1:9002, weight: 1}]}
routes:
  - {name: video, match: {host: api.example.com, path_prefix: /video/}, upstream: video}
`)
	var out, errOut bytes.Buffer
	if code := run([]string{"validate", "-config", good}, &out, &errOut); code != 0 {
		t.Fatalf("valid file: exit %d, stderr %s", code, errOut.String())
	}

	bad := writeFile(t, `
listen: 127.0.0.1:8080
admin: {listen: 127.0.0.1:9901}
upstreams:
  video:
    endpoints:
      - {address: 127.0.0.1:9001, weight: 3}
      - {address: 127.0.0.1:9002, weight: "abc"}
    timeouts: {connect: soon}
routes:
  - {name: video, match: {path_prefix: /video/}, upstream: vidoe}
`)
	out.Reset()
	errOut.Reset()
	if code := run([]string{"validate", "-config", bad}, &out, &errOut); code != 1 {
		t.Fatalf("invalid file: exit %d, want 1", code)
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	wantPrefixes := []string{
		bad + `:8:43: upstreams.video.endpoints[1].weight: must be a number from 0 to 10000, got "abc"`,
		bad + `:9:25: upstreams.video.timeouts.connect: `,
		bad + `:11:60: routes[0].upstream: `,
	}
	if len(lines) != len(wantPrefixes) {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), len(wantPrefixes), errOut.String())
	}
	for i, w := range wantPrefixes {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d = %q, want prefix %q", i, lines[i], w)
		}
	}
	if code := run([]string{"validate"}, &out, &errOut); code != 2 {
		t.Errorf("validate without -config: exit %d, want 2", code)
	}
	if code := run([]string{"frobnicate"}, &out, &errOut); code != 2 {
		t.Errorf("unknown command: exit %d, want 2", code)
	}
	out.Reset()
	if code := run([]string{"version"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "levee ") {
		t.Errorf("version: exit %d, output %q", code, out.String())
	}
}

// process is a levee started as a child process.
type process struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	stdout lockedBuffer // what levee prints on stdout (the demo's intro)
	data   string       // data listener address, from the startup log line
	admin  string       // admin listener address, from the same line
	done   chan error
}

var listeningLine = regexp.MustCompile(`"msg":"levee listening".*"data":"([^"]+)".*"admin":"([^"]+)"`)

// startProcess runs levee with args and waits for its startup log line.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(binary, args...), done: make(chan error, 1)}
	// A default state_dir (./levee-state) lands in a temp dir, not the source tree.
	p.cmd.Dir = t.TempDir()
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout = &p.stdout
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan [2]string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			if m := listeningLine.FindStringSubmatch(line); m != nil {
				select {
				case addr <- [2]string{m[1], m[2]}:
				default:
				}
			}
		}
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
	})
	select {
	case a := <-addr:
		p.data, p.admin = a[0], a[1]
	case <-time.After(20 * time.Second):
		t.Fatalf("levee did not start; stderr:\n%s", p.log())
	}
	return p
}

func (p *process) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// TestSIGTERMDrains: requests in flight when SIGTERM arrives complete; new
// connections are refused after the drain begins; the process exits 0.
func TestSIGTERMDrains(t *testing.T) {
	inService := make(chan struct{}, 8)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inService <- struct{}{}
		time.Sleep(700 * time.Millisecond)
		io.WriteString(w, "done")
	}))
	defer slow.Close()
	cfg := writeFile(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
server: {shutdown_timeout: 10s}
upstreams:
  slow: {endpoints: [{address: %s}]}
routes:
  - {name: all, match: {path_prefix: /}, upstream: slow}
`, strings.TrimPrefix(slow.URL, "http://")))
	p := startProcess(t, "run", "-config", cfg)

	const inflight = 3
	results := make(chan string, inflight)
	for range inflight {
		go func() {
			resp, err := http.Get("http://" + p.data + "/")
			if err != nil {
				results <- "error: " + err.Error()
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- fmt.Sprintf("%d %s", resp.StatusCode, body)
		}()
	}
	for range inflight {
		select {
		case <-inService:
		case <-time.After(10 * time.Second):
			t.Fatal("requests never reached the upstream")
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The listener closes at once: poll (bounded) until a dial is refused
	// while the in-flight requests are still being served.
	refused := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", p.data, time.Second)
		if err != nil {
			refused = true
			break
		}
		c.Close()
	}
	if !refused {
		t.Error("new connections were still accepted after SIGTERM")
	}
	for range inflight {
		if got := <-results; got != "200 done" {
			t.Errorf("in-flight request ended with %q, want 200 done", got)
		}
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("levee exited with %v; log:\n%s", err, p.log())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("levee did not exit after draining")
	}
}

// TestDemo: `levee demo` serves its built-in upstreams with no outside
// service, and its admin API shows them.
func TestDemo(t *testing.T) {
	p := startProcess(t, "demo", "-listen", "127.0.0.1:0", "-admin", "127.0.0.1:0")
	seen := map[string]int{}
	for range 8 {
		resp, err := http.Get("http://" + p.data + "/hello")
		if err != nil {
			t.Fatal(err)
		}
		var doc struct {
			Instance string `json:"instance"`
		}
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("demo /hello: status %d", resp.StatusCode)
		}
		seen[doc.Instance]++
	}
	if seen["fast-a"] != 6 || seen["fast-b"] != 2 {
		t.Errorf("demo 3:1 pool over 8 requests = %v, want fast-a 6, fast-b 2", seen)
	}
	resp, err := http.Get("http://" + p.data + "/slow/?delay=3s")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusGatewayTimeout {
		t.Errorf("demo /slow/?delay=3s: status %d, want 504", resp.StatusCode)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("demo exited with %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("demo did not stop")
	}
}

// TestSIGHUPReloads: SIGHUP re-reads the file; a valid change serves at
// once, an invalid one is refused and the previous configuration keeps
// serving.
func TestSIGHUPReloads(t *testing.T) {
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "a") }))
	defer a.Close()
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "b") }))
	defer b.Close()
	conf := func(addr string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  u: {endpoints: [{address: %s}]}
routes:
  - {name: all, match: {path_prefix: /}, upstream: u}
`, strings.TrimPrefix(addr, "http://"))
	}
	cfg := writeFile(t, conf(a.URL))
	p := startProcess(t, "run", "-config", cfg)
	body := func() string {
		resp, err := http.Get("http://" + p.data + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := body(); got != "a" {
		t.Fatalf("before reload: %q", got)
	}
	// waitFor polls (bounded) for a log line: the reload is asynchronous to
	// the signal.
	waitFor := func(msg string) {
		t.Helper()
		testkit.Eventually(t, 10*time.Second, func() (bool, string) {
			log := p.log()
			return strings.Contains(log, msg), fmt.Sprintf("no %q in the log:\n%s", msg, log)
		})
	}
	os.WriteFile(cfg, []byte(conf(b.URL)), 0o600)
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor("configuration reloaded")
	if got := body(); got != "b" {
		t.Fatalf("after reload: %q, want b", got)
	}
	os.WriteFile(cfg, []byte("listen: [not, an, address]\n"), 0o600)
	p.cmd.Process.Signal(syscall.SIGHUP)
	waitFor("reload refused")
	if got := body(); got != "b" {
		t.Fatalf("after a refused reload: %q, want b (previous configuration)", got)
	}
}
