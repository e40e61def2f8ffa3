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

// NGINX is a running nginx, the peer some tests measure levee against in
// the same run (slow clients, HTTP/2 floods). It runs in the foreground
// (daemon off) as one master and Workers workers, with every file it
// writes (pid, logs, temporary bodies) under its own directory.
type NGINX struct {
	// Address is host:port on loopback where the server block listens.
	Address string
	// Dir holds nginx.conf, the logs and the temporary files.
	Dir  string
	port int
	proc *daemon
}

// NGINXOptions shape the server block StartNGINX writes.
type NGINXOptions struct {
	// Server is the body of the one server block, without its listen
	// directive (StartNGINX adds "listen 127.0.0.1:PORT" and, with
	// TLSCert, "ssl http2" and the certificate lines).
	Server string
	// HTTP is added to the http block before the server block
	// (upstream blocks, timeouts).
	HTTP string
	// TLSCert and TLSKey, when set, are PEM file paths: the server
	// listens with TLS and offers h2 by ALPN.
	TLSCert, TLSKey string
	// Workers is worker_processes (0: 1).
	Workers int
}

// NGINXPath is the nginx binary, or "" when it is not installed.
func NGINXPath() string {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	return ""
}

// StartNGINX starts nginx for t with o's server block and stops it in
// t.Cleanup.
func StartNGINX(t testing.TB, o NGINXOptions) *NGINX {
	t.Helper()
	bin := NGINXPath()
	if bin == "" {
		if requireServices() {
			t.Fatal("nginx is not installed: run scripts/install-services.sh")
		}
		t.Skip("nginx is not installed (scripts/install-services.sh installs it; make test requires it)")
	}
	n := &NGINX{Dir: t.TempDir()}
	t.Cleanup(n.Stop)
	startOnFreePorts(t, "nginx", 1, func(ports []int) error { return n.start(bin, o, ports[0]) })
	return n
}

// start writes nginx.conf for port and starts nginx, returning once it
// listens.
func (n *NGINX) start(bin string, o NGINXOptions, port int) error {
	n.port = port
	n.Address = fmt.Sprintf("127.0.0.1:%d", port)
	workers := max(o.Workers, 1)
	listen := fmt.Sprintf("listen %s;", n.Address)
	if o.TLSCert != "" {
		listen = fmt.Sprintf("listen %s ssl http2;\n    ssl_certificate %s;\n    ssl_certificate_key %s;", n.Address, o.TLSCert, o.TLSKey)
	}
	conf := fmt.Sprintf(`daemon off;
master_process on;
worker_processes %d;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[2]s/body;
  proxy_temp_path %[2]s/proxy;
  fastcgi_temp_path %[2]s/fastcgi;
  uwsgi_temp_path %[2]s/uwsgi;
  scgi_temp_path %[2]s/scgi;
  %[3]s
  server {
    %[4]s
    %[5]s
  }
}
`, workers, n.Dir, o.HTTP, listen, o.Server)
	path := filepath.Join(n.Dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return err
	}
	var err error
	// -e: the error log before the configuration is read (the default
	// path may not be writable).
	n.proc, err = startDaemon(filepath.Join(n.Dir, "stderr.log"), bin, "-c", path, "-p", n.Dir, "-e", filepath.Join(n.Dir, "error.log"))
	if err != nil {
		return err
	}
	if err := n.awaitPort(10 * time.Second); err != nil {
		n.proc.stop()
		b, _ := os.ReadFile(filepath.Join(n.Dir, "error.log"))
		out := string(b) + n.proc.output()
		// The logs are appended to across attempts: only a bind failure
		// on this attempt's address counts.
		if strings.Contains(out, n.Address+" failed (98") {
			return fmt.Errorf("%w: %v", errPortTaken, err)
		}
		return fmt.Errorf("%v\nerror.log:\n%s\nstderr:\n%s", err, b, n.proc.output())
	}
	return nil
}

// awaitPort waits until the listen address accepts a connection and the
// listener is nginx's (bounded by d), or the process ends (nginx retries a
// bind in use 5 times, 0.5 s apart, then exits).
func (n *NGINX) awaitPort(d time.Duration) error {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", n.Address, 200*time.Millisecond); err == nil {
			c.Close()
			if listensOn(n.proc.cmd.Process.Pid, n.port) {
				return nil
			}
		}
		select {
		case <-n.proc.done:
			return errors.New("nginx exited at start")
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("nginx did not listen on %s within %v", n.Address, d)
}

// Stop stops nginx (SIGTERM, SIGKILL after 5 s) and waits for it.
func (n *NGINX) Stop() { n.proc.stop() }
