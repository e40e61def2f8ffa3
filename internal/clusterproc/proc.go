// Package clusterproc runs real levee processes for cluster mode's tests:
// it builds the levee binary once per test binary run (Build, from
// TestMain) and starts `levee run -config FILE` as a child process per
// node (Start), learning its addresses from the "levee listening" log
// line, waiting for /readyz, and stopping it in t.Cleanup (SIGTERM, then
// SIGKILL). Each node's standard error is kept (its last 64 KiB) and
// printed when the test fails. Only tests import this package.
package clusterproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build compiles ./cmd/levee (without the race detector, whatever the
// test binary was built with: the nodes are what a user runs) into dir
// and returns the binary's path. The build is bounded by timeout; its
// output is in the error when it fails.
func Build(dir string, timeout time.Duration) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "levee")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/levee")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return "", fmt.Errorf("go build ./cmd/levee: not done within %v: %s", timeout, out)
	}
	if err != nil {
		return "", fmt.Errorf("go build ./cmd/levee: %v: %s", err, out)
	}
	return bin, nil
}

// moduleRoot is the directory holding go.mod, found from the working
// directory up (a test runs in its package's directory); at most 10
// levels.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for range 10 {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		dir = filepath.Dir(dir)
	}
	return "", errors.New("go.mod not found above the working directory")
}

// Node is one levee process.
type Node struct {
	// Name labels the node in failures ("node 1").
	Name string
	// Data and Admin are the listeners' host:port, as the process logged
	// them.
	Data, Admin string

	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has exited and its stderr is read
	err    error         // cmd.Wait's, once done is closed
	stderr *logTail
}

// Start runs `bin run -config configPath` and returns once the node
// listens and its /readyz answers 200 (within 30 s, else t fails). The
// node is stopped in t.Cleanup, and its standard error printed there if t
// failed.
func Start(t testing.TB, bin, name, configPath string) *Node {
	t.Helper()
	n := Launch(t, bin, name, configPath)
	addrs := n.waitListening(30 * time.Second)
	if addrs == nil {
		t.Fatalf("%s: no \"levee listening\" line within 30 s (exited: %v); stderr:\n%s", name, n.exited(), n.Stderr())
	}
	n.Data, n.Admin = addrs.Data, addrs.Admin
	deadline := time.Now().Add(30 * time.Second)
	for !n.ready() {
		if time.Now().After(deadline) || n.exited() {
			t.Fatalf("%s: /readyz not 200 within 30 s (exited: %v); stderr:\n%s", name, n.exited(), n.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return n
}

// Launch starts the process and returns at once, without waiting for it
// to listen: for a node expected to exit (Wait). It is stopped in
// t.Cleanup.
func Launch(t testing.TB, bin, name, configPath string) *Node {
	t.Helper()
	n := &Node{Name: name, done: make(chan struct{}), stderr: &logTail{}}
	n.cmd = exec.Command(bin, "run", "-config", configPath)
	n.cmd.Stdout = n.stderr
	n.cmd.Stderr = n.stderr
	// Its own process group (a ^C to the test does not reach it first),
	// killed if the test binary dies (no process outlives the tests).
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		t.Fatalf("%s: starting %s: %v", name, bin, err)
	}
	go func() {
		n.err = n.cmd.Wait()
		close(n.done)
	}()
	t.Cleanup(func() {
		n.Stop()
		if t.Failed() {
			t.Logf("%s (pid %d) stderr:\n%s", name, n.cmd.Process.Pid, n.Stderr())
		}
	})
	return n
}

// Pid is the process id.
func (n *Node) Pid() int { return n.cmd.Process.Pid }

func (n *Node) exited() bool {
	select {
	case <-n.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM (levee drains) and waits up to 15 s, then SIGKILL.
// Nothing happens if the process has exited.
func (n *Node) Stop() {
	if n.exited() {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(15 * time.Second):
		n.Kill()
	}
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (n *Node) Kill() {
	if !n.exited() {
		_ = n.cmd.Process.Kill()
	}
	<-n.done
}

// Stderr is what the process wrote (standard output too), its last 64 KiB.
func (n *Node) Stderr() string { return n.stderr.String() }

func (n *Node) ready() bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get("http://" + n.Admin + "/readyz")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// listening is the "levee listening" log line's addresses.
type listening struct {
	Msg   string `json:"msg"`
	Data  string `json:"data"`
	Admin string `json:"admin"`
}

func (n *Node) waitListening(d time.Duration) *listening {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if l := n.stderr.listening(); l != nil {
			return l
		}
		if n.exited() {
			return n.stderr.listening()
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// logTail keeps the last tailMax bytes a process wrote, and the first
// "levee listening" line it saw (the latest, if the node started twice).
type logTail struct {
	mu      sync.Mutex
	buf     []byte
	partial []byte // the current unfinished line, at most lineMax bytes (longer: dropped)
	listen  *listening
}

const (
	tailMax = 64 << 10
	lineMax = 16 << 10 // a longer line is not the listening line: dropped
)

func (l *logTail) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if len(l.buf) > tailMax {
		l.buf = append(l.buf[:0], l.buf[len(l.buf)-tailMax:]...)
	}
	rest := p
	for len(rest) > 0 {
		i := strings.IndexByte(string(rest), '\n')
		if i < 0 {
			if len(l.partial)+len(rest) <= lineMax {
				l.partial = append(l.partial, rest...)
			} else {
				l.partial = l.partial[:0]
			}
			break
		}
		if len(l.partial)+i <= lineMax {
			line := append(l.partial, rest[:i]...)
			var x listening
			if json.Unmarshal(line, &x) == nil && x.Msg == "levee listening" {
				l.listen = &x
			}
		}
		l.partial = l.partial[:0]
		rest = rest[i+1:]
	}
	return len(p), nil
}

func (l *logTail) listening() *listening {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.listen
}

func (l *logTail) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}
