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
	"testing"
	"time"
)

// Etcd is a running single-member etcd server.
type Etcd struct {
	// Endpoint is the client URL, http://127.0.0.1:PORT.
	Endpoint string
	proc     *daemon
	dir      string
	peerPort int
	port     int
	logPath  string
}

// requireServices reports whether a missing service binary fails the test
// (make test sets LEVEE_REQUIRE_SERVICES=1 after installing them) rather
// than skipping it (a plain go test on a machine without them).
func requireServices() bool { return os.Getenv("LEVEE_REQUIRE_SERVICES") == "1" }

// StartEtcd starts etcd for t and stops it in t.Cleanup.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if requireServices() {
			t.Fatal("etcd is not installed: run scripts/install-services.sh")
		}
		t.Skip("etcd is not installed (scripts/install-services.sh installs it; make test requires it)")
	}
	e := &Etcd{dir: t.TempDir(), port: freePort(t), peerPort: freePort(t)}
	e.logPath = filepath.Join(e.dir, "etcd.log")
	e.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", e.port)
	if err := e.start(bin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

func (e *Etcd) start(bin string) error {
	peer := fmt.Sprintf("http://127.0.0.1:%d", e.peerPort)
	var err error
	e.proc, err = startDaemon(e.logPath, bin,
		"--name", "levee-test", "--data-dir", filepath.Join(e.dir, "data"),
		"--logger", "zap", "--log-level", "warn",
		"--listen-client-urls", e.Endpoint, "--advertise-client-urls", e.Endpoint,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "levee-test="+peer)
	if err != nil {
		return err
	}
	// Ready when the client port answers /health (bounded wait).
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(e.Endpoint, "http://"), 200*time.Millisecond)
		if err == nil {
			c.Close()
			if e.healthy() {
				return nil
			}
		}
		select {
		case <-e.proc.done:
			return fmt.Errorf("etcd exited at start: %s", e.proc.output())
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
func (e *Etcd) Stop() { e.proc.stop(5 * time.Second) }

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

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
