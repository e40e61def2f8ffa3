package testsvc

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Prometheus is a running Prometheus server (Debian's 2.42, installed by
// scripts/install-services.sh) of one test: its own TSDB in a temp
// directory, its web API on 127.0.0.1 and a free port.
type Prometheus struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL string

	port    int
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
}

// prometheusReadyTimeout bounds the wait for /-/ready (about 1 s on the
// 2-core machines).
const prometheusReadyTimeout = 30 * time.Second

// lookService returns the path of a service's binary, failing t when it is
// missing and make test requires the services, else skipping t.
func lookService(t testing.TB, bin, pkg string) string {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err != nil {
		if requireServices() {
			t.Fatalf("%s is not installed: run scripts/install-services.sh (Debian package %s)", bin, pkg)
		}
		t.Skipf("%s is not installed (scripts/install-services.sh installs Debian's %s; make test requires it)", bin, pkg)
	}
	return path
}

// Promtool returns the path of promtool (Debian's prometheus package
// brings it), failing or skipping t as a missing service does.
func Promtool(t testing.TB) string {
	t.Helper()
	return lookService(t, "promtool", "prometheus")
}

// StartPrometheus starts Prometheus for t with config, the text of its
// prometheus.yml (rule files named by absolute paths), and stops it in
// t.Cleanup. It returns once /-/ready answers 200.
func StartPrometheus(t testing.TB, config string) *Prometheus {
	t.Helper()
	bin := lookService(t, "prometheus", "prometheus")
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &Prometheus{logPath: filepath.Join(dir, "prometheus.log")}
	t.Cleanup(p.Stop)
	startOnFreePorts(t, "prometheus", 1, func(ports []int) error {
		return p.start(bin, dir, cfgPath, ports[0])
	})
	return p
}

// start starts the server on port and waits until it is ready.
func (p *Prometheus) start(bin, dir, cfgPath string, port int) error {
	p.port = port
	p.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
	log, err := os.Create(p.logPath)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--log.level=warn")
	p.cmd.Stdout, p.cmd.Stderr = log, log
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting prometheus: %w", err)
	}
	done := make(chan struct{})
	p.done = done
	cmd := p.cmd
	go func() {
		_ = cmd.Wait()
		log.Close()
		close(done)
	}()
	return p.waitReady()
}

// waitReady polls /-/ready until it answers 200 on a port that is ours, the server exits, or
// prometheusReadyTimeout passes.
func (p *Prometheus) waitReady() error {
	client := &http.Client{Timeout: time.Second}
	defer client.CloseIdleConnections()
	deadline := time.Now().Add(prometheusReadyTimeout)
	for time.Now().Before(deadline) {
		if resp, err := client.Get(p.URL + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && listensOn(p.cmd.Process.Pid, p.port) {
				return nil
			}
		}
		select {
		case <-p.done:
			return portTakenError(fmt.Errorf("prometheus exited at start: %s", p.Log()), p.Log())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return errors.New("prometheus did not become ready within " + prometheusReadyTimeout.String() + ": " + p.Log())
}

// Log returns what the server has logged so far (warnings and errors).
func (p *Prometheus) Log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// Stop stops Prometheus (SIGTERM, then SIGKILL after 5 s) and waits for it.
func (p *Prometheus) Stop() { stopGroup(p.cmd, p.done) }
