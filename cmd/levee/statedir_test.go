package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunLocksStateDir: a second `levee run` on the state_dir a running
// levee holds exits 1 at once, naming the state_dir and the holder's pid,
// while the first keeps serving; `levee validate` of the same file still
// passes (it checks the configuration and takes no lock); once the holder
// is killed (SIGKILL, no clean shutdown), the kernel has dropped its lock
// and a new levee starts on the same state_dir.
func TestRunLocksStateDir(t *testing.T) {
	stateDir := filepath.Join(t.TempDir(), "state")
	cfg := writeFile(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
upstreams:
  u: {endpoints: [{address: 127.0.0.1:9}]}
routes:
  - {name: all, match: {path_prefix: /}, upstream: u}
`, stateDir))
	first := startProcess(t, "run", "-config", cfg)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	began := time.Now()
	out, err := exec.CommandContext(ctx, binary, "run", "-config", cfg).CombinedOutput()
	took := time.Since(began)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("second levee run on the same state_dir: %v after %v, want exit 1; output:\n%s", err, took, out)
	}
	want := fmt.Sprintf("state_dir %s: in use by another levee process, pid %d", stateDir, first.cmd.Process.Pid)
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "levee.lock") {
		t.Errorf("second levee run said %q, want it to contain %q and the lock file", out, want)
	}
	t.Logf("second levee on the state_dir exited 1 after %v: %s", took, strings.TrimSpace(string(out)))

	resp, err := http.Get("http://" + first.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the first levee after the refused second: /readyz %d", resp.StatusCode)
	}
	if out, err := exec.CommandContext(ctx, binary, "validate", "-config", cfg).CombinedOutput(); err != nil {
		t.Errorf("levee validate while the state_dir is locked: %v: %s", err, out)
	}

	_ = first.cmd.Process.Kill()
	select {
	case err := <-first.done:
		first.done <- err // for startProcess's cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("the first levee did not exit after SIGKILL")
	}
	third := startProcess(t, "run", "-config", cfg)
	resp, err = http.Get("http://" + third.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("a levee started after the holder died: /readyz %d", resp.StatusCode)
	}
}
