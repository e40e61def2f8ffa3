package testsvc

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Redis is a running redis-server without persistence (--save ""
// --appendonly no): a restart starts empty, as a Redis that lost its
// memory would.
type Redis struct {
	// Address is host:port on loopback.
	Address string
	bin     string
	dir     string
	port    int
	proc    *daemon
}

// StartRedis starts redis-server for t and stops it in t.Cleanup.
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if requireServices() {
			t.Fatal("redis-server is not installed: run scripts/install-services.sh")
		}
		t.Skip("redis-server is not installed (scripts/install-services.sh installs it; make test requires it)")
	}
	r := &Redis{bin: bin, dir: t.TempDir()}
	t.Cleanup(r.Stop)
	startOnFreePorts(t, "redis-server", 1, func(ports []int) error {
		r.port = ports[0]
		r.Address = fmt.Sprintf("127.0.0.1:%d", r.port)
		return r.start()
	})
	return r
}

func (r *Redis) start() error {
	var err error
	r.proc, err = startDaemon(filepath.Join(r.dir, "redis.log"), r.bin, "--bind", "127.0.0.1", "--port", fmt.Sprint(r.port),
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", r.dir, "--protected-mode", "no")
	if err != nil {
		return err
	}
	// Ready when PING answers PONG on a port that is ours (bounded wait;
	// another process's server on the port does not count).
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if r.ping() && listensOn(r.proc.cmd.Process.Pid, r.port) {
			return nil
		}
		select {
		case <-r.proc.done:
			out := r.proc.output()
			return portTakenError(fmt.Errorf("redis-server exited at start: %s", out), out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	r.proc.kill()
	return errors.New("redis-server did not answer PING within 10s")
}

// ping reports whether the server answers PING within 200 ms.
func (r *Redis) ping() bool {
	c, err := net.DialTimeout("tcp", r.Address, 200*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && strings.HasPrefix(line, "+PONG")
}

// Freeze stops the server with SIGSTOP: it keeps its port and its
// connections but answers nothing, as a hung Redis does.
func (r *Redis) Freeze() { r.proc.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT).
func (r *Redis) Thaw() { r.proc.signal(syscall.SIGCONT) }

// Kill ends the server with SIGKILL (frozen or not) and waits for it: its
// port refuses connections from then on.
func (r *Redis) Kill() { r.proc.kill() }

// Stop stops the server (SIGCONT in case it is frozen, SIGTERM, SIGKILL
// after 5 s) and waits for it.
func (r *Redis) Stop() { r.proc.stop() }

// Restart starts the server again, empty, on the same port.
func (r *Redis) Restart(t testing.TB) {
	t.Helper()
	r.Stop()
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
}
