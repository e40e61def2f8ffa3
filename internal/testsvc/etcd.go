// Package testsvc starts real outside services for levee's tests: each
// test gets its own process on loopback ports with a fresh data directory,
// stopped when the test ends. The binaries are installed by
// scripts/install-services.sh (make test runs it). Only tests import this
// package.
package testsvc

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Etcd is a running single-member etcd server.
type Etcd struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT.
	Endpoint string
	cmd      *exec.Cmd
	dir      string
	peerPort int
	port     int
	logPath  string
	done     chan struct{}
}

// requireServices reports whether a missing service binary fails the test
// (make test sets LEVEE_REQUIRE_SERVICES=1 after installing them) rather
// than skipping it (a plain go test on a machine without them).
func requireServices() bool { return os.Getenv("LEVEE_REQUIRE_SERVICES") == "1" }

// StartEtcd starts etcd for t and stops it in t.Cleanup.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	bin := lookService(t, "etcd", "etcd-server")
	e := &Etcd{dir: t.TempDir()}
	e.logPath = filepath.Join(e.dir, "etcd.log")
	t.Cleanup(e.Stop)
	startOnFreePorts(t, "etcd", 2, func(ports []int) error {
		e.port, e.peerPort = ports[0], ports[1]
		e.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", e.port)
		// A failed start may have left a data directory naming the old
		// peer URL; each attempt starts from none.
		if err := os.RemoveAll(filepath.Join(e.dir, "data")); err != nil {
			return err
		}
		return e.start(bin)
	})
	return e
}

func (e *Etcd) start(bin string) error {
	log, err := os.Create(e.logPath)
	if err != nil {
		return err
	}
	peer := fmt.Sprintf("http://127.0.0.1:%d", e.peerPort)
	e.cmd = exec.Command(bin,
		"--name", "levee-test", "--data-dir", filepath.Join(e.dir, "data"),
		"--logger", "zap", "--log-level", "warn",
		"--listen-client-urls", e.Endpoint, "--advertise-client-urls", e.Endpoint,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "levee-test="+peer)
	e.cmd.Stdout, e.cmd.Stderr = log, log
	e.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := e.cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting etcd: %w", err)
	}
	e.done = make(chan struct{})
	go func() {
		_ = e.cmd.Wait()
		log.Close()
		close(e.done)
	}()
	// Ready when the client port answers /health and is ours (bounded
	// wait; another process's server on the port does not count).
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if e.healthy() && listensOn(e.cmd.Process.Pid, e.port) {
			return nil
		}
		select {
		case <-e.done:
			out, _ := os.ReadFile(e.logPath)
			return portTakenError(fmt.Errorf("etcd exited at start: %s", out), string(out))
		case <-time.After(50 * time.Millisecond):
		}
	}
	e.Stop()
	return errors.New("etcd did not become ready within 20s")
}

func (e *Etcd) healthy() bool {
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(e.Endpoint, "http://"), 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "GET /health HTTP/1.0\r\n\r\n")
	buf := make([]byte, 512)
	n, _ := c.Read(buf)
	return strings.Contains(string(buf[:n]), `"health":"true"`)
}

// Stop stops etcd (SIGTERM, then SIGKILL after 5 s) and waits for it. The
// data directory is kept, so Restart serves the same keys.
func (e *Etcd) Stop() { stopGroup(e.cmd, e.done) }

// stopGroup stops the process group cmd leads (it was started with
// Setpgid): SIGTERM, then SIGKILL after 5 s; it returns once done (closed
// when cmd.Wait returned) is closed. Nothing happens if cmd never started
// or has already exited.
func stopGroup(cmd *exec.Cmd, done <-chan struct{}) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Kill ends etcd with SIGKILL, as a crash would, and waits for it. The
// data directory is kept (etcd syncs each commit), so Restart serves the
// keys it had committed.
func (e *Etcd) Kill() {
	if e.cmd == nil || e.cmd.Process == nil {
		return
	}
	select {
	case <-e.done:
		return
	default:
	}
	_ = syscall.Kill(-e.cmd.Process.Pid, syscall.SIGKILL)
	<-e.done
}

// Restart starts etcd again on the same ports and data directory.
func (e *Etcd) Restart(t testing.TB) {
	t.Helper()
	e.Stop()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.start(bin); err != nil {
		t.Fatal(err)
	}
}
