package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/config"
)

// leveeArgs: a levee child (role "levee") runs the config file at Config.
type leveeArgs struct{ Config string }

// runLeveeRole runs levee in this process, alone, so that the parent can
// read its resident memory from /proc: it prints "ADDR <data> <admin>",
// serves until its stdin closes, then shuts down.
func runLeveeRole(fail func(error) int) int {
	var a leveeArgs
	if err := json.Unmarshal([]byte(os.Getenv("LEVEE_TEST_ARGS")), &a); err != nil {
		return fail(err)
	}
	g, err := New(Options{Load: func() (*config.Config, error) { return config.Load(a.Config) }, LogOutput: io.Discard})
	if err != nil {
		return fail(err)
	}
	if err := g.Start(); err != nil {
		return fail(err)
	}
	fmt.Printf("ADDR %s %s\n", g.Addr(), g.AdminAddr())
	io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := g.Shutdown(ctx); err != nil {
		return fail(err)
	}
	return 0
}

// leveeChild is levee running in a child process.
type leveeChild struct {
	pid         int
	addr, admin string
}

// startLeveeChild writes yaml to a file and starts levee on it in a child
// process, stopped when the test ends.
func startLeveeChild(t *testing.T, yaml string) leveeChild {
	t.Helper()
	path := filepath.Join(t.TempDir(), "levee.yaml")
	yaml = "state_dir: " + filepath.Join(filepath.Dir(path), "state") + "\n" + yaml
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c := startChild(t, "levee", leveeArgs{Config: path})
	f := strings.Fields(c.line(t))
	if len(f) != 3 || f[0] != "ADDR" {
		t.Fatalf("levee child said %q, want ADDR <data> <admin>", f)
	}
	return leveeChild{pid: c.cmd.Process.Pid, addr: f[1], admin: f[2]}
}

// procMem is process pid's resident memory from /proc/<pid>/status:
// VmRSS, and its anonymous (heap, stacks) and file-backed (the binary's
// text and data) parts.
type procMem struct{ RSS, Anon, File int64 }

func readProcMem(pid int) (procMem, error) {
	var m procMem
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return m, err
	}
	found := 0
	for _, line := range strings.Split(string(b), "\n") {
		name, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *int64
		switch name {
		case "VmRSS":
			dst = &m.RSS
		case "RssAnon":
			dst = &m.Anon
		case "RssFile":
			dst = &m.File
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return m, fmt.Errorf("%s %q: %w", name, v, err)
		}
		*dst = kb << 10
		found++
	}
	if found != 3 {
		return m, fmt.Errorf("/proc/%d/status lacks VmRSS, RssAnon or RssFile", pid)
	}
	return m, nil
}
