package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/adminclient"
)

// drillConfig is a levee with the drill upstream and route; defences
// false leaves out what the drills check: the route identifies no app
// (so app limits cannot apply), the upstream has no retries and no
// concurrency limit.
func drillConfig(t *testing.T, defences bool) (cfg, tokenFile string) {
	dir := t.TempDir()
	tokenFile = filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("drill-test-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	retry, auth := "retry: {attempts: 3, on: [connect_failure, reset_before_response]}\n    limits: {max_concurrency: 8}", "api_key"
	if !defences {
		retry, auth = "retry: ~", "none"
	}
	cfg = writeFile(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token_file: %s}
state_dir: %s
upstreams:
  levee-drill:
    discovery: {push: true}
    %s
  levee-drill-registry:
    discovery: {file: %s}
routes:
  - {name: levee-drill, match: {path_prefix: /_levee_drill/}, upstream: levee-drill, auth: %s}
  - {name: levee-drill-registry, match: {path_prefix: /_levee_drill_registry/}, upstream: levee-drill-registry, auth: %s}
`, tokenFile, filepath.Join(dir, "state"), retry, filepath.Join(dir, "registry.json"), auth, auth))
	return cfg, tokenFile
}

// assertCleanedUp checks the drills left nothing behind: no endpoints in
// the drill upstream, no drill apps.
func assertCleanedUp(t *testing.T, p *process, tokenFile string) {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run([]string{"apps", "list", "-all", "-admin", p.admin, "-token-file", tokenFile}, &out, &errOut); code != 0 {
		t.Fatalf("apps list: %d %s", code, errOut.String())
	}
	if strings.Contains(out.String(), "levee-drill-") {
		t.Errorf("drill apps left behind: %s", out.String())
	}
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := adminclient.New(p.admin, strings.TrimSpace(string(token)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(context.Background(), "GET", "/api/v1/upstreams/levee-drill", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp), `"endpoints_total": 0`) {
		t.Errorf("drill endpoints left behind: %s", resp)
	}
	resp, err = c.Do(context.Background(), "GET", "/api/v1/upstreams/levee-drill-registry", nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(resp), `"endpoints_total": 0`) {
		t.Errorf("registry drill endpoints left behind: %s", resp)
	}
}

func TestDrillList(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"drill", "list"}, &out, &errOut); code != 0 {
		t.Fatalf("drill list: %d %s", code, errOut.String())
	}
	for _, n := range []string{"zero-weight", "retry-storm", "overload", "dying-endpoint", "registry-down"} {
		if !strings.Contains(out.String(), n) {
			t.Errorf("drill list lacks %s:\n%s", n, out.String())
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"drill", "run"}, "name at least one drill"},
		{[]string{"drill", "run", "nope"}, `unknown drill "nope"`},
		{[]string{"drill", "run", "zero-weight", "-rate", "5000"}, "-rate 5000: want 100 to 1000"},
		{[]string{"drill", "run", "zero-weight", "-duration", "5m"}, "-duration 5m0s: want 2s to 1m0s"},
		{[]string{"drill", "bogus"}, `unknown command "bogus"`},
	} {
		errOut.Reset()
		if code := run(c.args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errOut.String(), c.want)
		}
	}
}

// TestDrillInterruptCleansUp sends SIGINT to a levee drill process in the
// middle of its traffic: it stops, exits 1, and its apps and endpoints
// are gone.
func TestDrillInterruptCleansUp(t *testing.T) {
	cfg, tokenFile := drillConfig(t, true)
	p := startProcess(t, "run", "-config", cfg)
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := adminclient.New(p.admin, strings.TrimSpace(string(token)))
	if err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	cmd := exec.Command(binary, "drill", "run", "retry-storm", "-duration", "60s",
		"-admin", p.admin, "-token-file", tokenFile, "-data", p.data)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	// Wait until the drill has made its apps and pushed its endpoints.
	deadline := time.Now().Add(20 * time.Second)
	for {
		apps, _ := c.Do(context.Background(), "GET", "/api/v1/apps", nil)
		up, _ := c.Do(context.Background(), "GET", "/api/v1/upstreams/levee-drill", nil)
		if strings.Contains(string(apps), "levee-drill-") && strings.Contains(string(up), `"endpoints_total": 1`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the drill made nothing within 20s; stderr:\n%s", errOut.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	begin := time.Now()
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the drill did not stop within 20s of SIGINT")
	}
	t.Logf("stopped %s after SIGINT", time.Since(begin).Round(time.Millisecond))
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(out.String(), "ERROR: interrupted") {
		t.Errorf("exit: %v; stdout:\n%s", err, out.String())
	}
	assertCleanedUp(t, p, tokenFile)
}
