package testsvc

import (
	"bufio"
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

// Redis is a running redis-server without persistence (--save ""
// --appendonly no): a restart starts empty, as a Redis that lost its
// memory would.
type Redis struct {
	// Address is host:port on loopback.
	Address string
	bin     string
	dir     string
	port    int
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
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
	r := &Redis{bin: bin, dir: t.TempDir(), port: freePort(t)}
	r.logPath = filepath.Join(r.dir, "redis.log")
	r.Address = fmt.Sprintf("127.0.0.1:%d", r.port)
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

func (r *Redis) start() error {
	log, err := os.OpenFile(r.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	r.cmd = exec.Command(r.bin, "--bind", "127.0.0.1", "--port", fmt.Sprint(r.port),
		"--save", "", "--appendonly", "no", "--daemonize", "no", "--dir", r.dir,
		"--protected-mode", "no")
	r.cmd.Stdout, r.cmd.Stderr = log, log
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting redis-server: %w", err)
	}
	done := make(chan struct{})
	r.done = done
	cmd := r.cmd
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(done)
	}()
	// Ready when PING answers PONG (bounded wait).
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if r.ping() {
			return nil
		}
		select {
		case <-done:
			out, _ := os.ReadFile(r.logPath)
			return fmt.Errorf("redis-server exited at start: %s", out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	r.Kill()
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
func (r *Redis) Freeze() { r.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT).
func (r *Redis) Thaw() { r.signal(syscall.SIGCONT) }

func (r *Redis) signal(sig syscall.Signal) {
	if r.cmd != nil && r.cmd.Process != nil {
		_ = syscall.Kill(-r.cmd.Process.Pid, sig)
	}
}

// Kill ends the server with SIGKILL (frozen or not) and waits for it: its
// port refuses connections from then on.
func (r *Redis) Kill() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	select {
	case <-r.done:
		return
	default:
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
	<-r.done
}

// Stop stops the server (SIGCONT in case it is frozen, SIGTERM, SIGKILL
// after 5 s) and waits for it.
func (r *Redis) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	select {
	case <-r.done:
		return
	default:
	}
	r.Thaw()
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		r.Kill()
	}
}

// Restart starts the server again, empty, on the same port.
func (r *Redis) Restart(t testing.TB) {
	t.Helper()
	r.Stop()
	if err := r.start(); err != nil {
		t.Fatal(err)
	}
}
