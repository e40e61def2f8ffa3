package testsvc

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// impostor listens on a loopback port and answers every line with reply,
// as another process's server on "our" port would; it is closed at the
// end of the test.
func impostor(t *testing.T, reply string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				r := bufio.NewReader(c)
				for range 16 { // bounded: a probe sends one or two lines
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					if _, err := c.Write([]byte(reply)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// takenFirst makes the next start's first port pick the given port (as if
// another process took it between the pick and the bind), the later picks
// free ones.
func takenFirst(t *testing.T, port int) {
	var once sync.Once
	pickPort = func(t testing.TB) int {
		p := 0
		once.Do(func() { p = port })
		if p != 0 {
			return p
		}
		return freePort(t)
	}
	t.Cleanup(func() { pickPort = freePort })
}

// TestRedisPortTakenIsRetried: the port handed to redis-server is taken by
// a server that answers PING like Redis: the start is not fooled by it and
// succeeds on a fresh port.
func TestRedisPortTakenIsRetried(t *testing.T) {
	taken := impostor(t, "+PONG\r\n")
	takenFirst(t, taken)
	r := StartRedis(t)
	if r.port == taken || !strings.HasSuffix(r.Address, ":"+itoa(r.port)) {
		t.Fatalf("redis on %s, the taken port was %d", r.Address, taken)
	}
	if !listensOn(r.proc.cmd.Process.Pid, r.port) {
		t.Fatal("redis does not hold its port")
	}
	if listensOn(r.proc.cmd.Process.Pid, taken) {
		t.Fatal("listensOn credits redis with the impostor's port")
	}
}

// TestEtcdPortTakenIsRetried: the same for etcd's client port, taken by a
// server answering /health as a healthy etcd.
func TestEtcdPortTakenIsRetried(t *testing.T) {
	taken := impostor(t, "HTTP/1.0 200 OK\r\n\r\n{\"health\":\"true\"}")
	takenFirst(t, taken)
	e := StartEtcd(t)
	if e.port == taken || !e.healthy() || !listensOn(e.cmd.Process.Pid, e.port) {
		t.Fatalf("etcd on %s (healthy %v), the taken port was %d", e.Endpoint, e.healthy(), taken)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestPortTakenIsRetriedByEveryService: PostgreSQL, Prometheus and NGINX
// started on a port an impostor holds each end up on a port of their own.
func TestPortTakenIsRetriedByEveryService(t *testing.T) {
	const httpOK = "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n"
	t.Run("postgres", func(t *testing.T) {
		taken := impostor(t, httpOK)
		takenFirst(t, taken)
		p := StartPostgres(t)
		if p.Port == taken || !listensOn(p.cmd.Process.Pid, p.Port) {
			t.Fatalf("postgres on %d, the taken port was %d", p.Port, taken)
		}
	})
	t.Run("prometheus", func(t *testing.T) {
		taken := impostor(t, httpOK)
		takenFirst(t, taken)
		p := StartPrometheus(t, "global: {}\n")
		if p.port == taken || !listensOn(p.cmd.Process.Pid, p.port) {
			t.Fatalf("prometheus on %s, the taken port was %d", p.URL, taken)
		}
	})
	t.Run("nginx", func(t *testing.T) {
		taken := impostor(t, httpOK)
		takenFirst(t, taken)
		n := StartNGINX(t, NGINXOptions{Server: "location / { return 200; }"})
		if n.port == taken || !listensOn(n.proc.cmd.Process.Pid, n.port) {
			t.Fatalf("nginx on %s, the taken port was %d", n.Address, taken)
		}
	})
}
