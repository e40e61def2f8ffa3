package testsvc

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// A service is given its port on its command line (none of etcd, Redis,
// PostgreSQL, Prometheus and NGINX can be told "port 0" and asked which
// port it got), so between choosing a free port and the service binding it
// another process may take it: a test's listener, another test process's
// service, or the local end of an outgoing connection. Two rules make that
// harmless:
//   - a service counts as ready only when the process we started holds the
//     listening socket (listensOn), so a readiness probe answered by another
//     process's server on "our" port is never taken for ours;
//   - a start that fails because the port was taken (errPortTaken) is
//     retried on fresh ports, at most portAttempts times.
// A Restart reuses its port (clients hold the address) and is not retried;
// losing the port there is reported as such.

// portAttempts bounds the starts on fresh ports (a lost port is rare: a
// few in a hundred runs of a busy package; three in a row is not chance).
const portAttempts = 5

// errPortTaken marks a start that failed because another process had the
// port.
var errPortTaken = errors.New("port taken by another process")

// portTakenError wraps the service's own error when its log says the bind
// failed, so startOnFreePorts retries it.
func portTakenError(err error, log string) error {
	if strings.Contains(log, "already in use") || strings.Contains(log, "Address in use") {
		return fmt.Errorf("%w: %w", errPortTaken, err)
	}
	return err
}

// startOnFreePorts calls start with n fresh loopback ports until it
// succeeds, fails for a reason other than errPortTaken, or has been tried
// portAttempts times; it fails t with the last error then. The attempts
// are logged.
func startOnFreePorts(t testing.TB, what string, n int, start func(ports []int) error) {
	t.Helper()
	var err error
	for attempt := 1; attempt <= portAttempts; attempt++ {
		ports := make([]int, n)
		for i := range ports {
			ports[i] = pickPort(t)
		}
		if err = start(ports); err == nil {
			return
		}
		if !errors.Is(err, errPortTaken) {
			break
		}
		t.Logf("%s: start %d on ports %v lost a port, retrying on fresh ones: %v", what, attempt, ports, err)
	}
	t.Fatalf("%s: %v", what, err)
}

// pickPort is freePort; a test of the retry replaces it.
var pickPort = freePort

// freePort returns a loopback TCP port that was free a moment ago (the
// kernel's choice for port 0). It may be taken again before the service
// binds it: see startOnFreePorts.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// listensOn reports whether process pid holds a TCP socket listening on
// port (IPv4, any local address), read from /proc: the listening socket's
// inode in /proc/net/tcp among pid's descriptors. A server forking workers
// (NGINX, PostgreSQL) opens its listeners in the process we started.
func listensOn(pid, port int) bool {
	inodes, err := listeningInodes(port)
	if err != nil || len(inodes) == 0 {
		return false
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds { // bounded by the process's descriptor table
		link, err := os.Readlink(dir + "/" + fd.Name())
		if err != nil {
			continue
		}
		if ino, ok := strings.CutPrefix(link, "socket:["); ok && inodes[strings.TrimSuffix(ino, "]")] {
			return true
		}
	}
	return false
}

// listeningInodes returns the inodes of the sockets listening on port in
// /proc/net/tcp.
func listeningInodes(port int) (map[string]bool, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	hexPort := fmt.Sprintf(":%04X", port)
	out := map[string]bool{}
	sc := bufio.NewScanner(f) // one line per socket of the namespace
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" || !strings.HasSuffix(fields[1], hexPort) {
			continue
		}
		if _, err := strconv.ParseUint(fields[9], 10, 64); err == nil {
			out[fields[9]] = true
		}
	}
	return out, sc.Err()
}
