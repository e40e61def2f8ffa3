package gateway

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Load tests run their backend and their load generator in child
// processes (this test binary, re-executed with roleEnv set), as the
// shared benchmark scripts do: in one process, the three would share one
// Go scheduler, and a backend's or a client's goroutines would wait in
// levee's run queue, measuring the test rather than levee.
const roleEnv = "LEVEE_TEST_ROLE"

// runRole runs this process as the child named by roleEnv and returns its
// exit code. Its parameters come as JSON in LEVEE_TEST_ARGS; it stops when
// its stdin closes (the parent died or is done).
func runRole(role string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "role %s: %v\n", role, err)
		return 2
	}
	switch role {
	case "backend":
		var a slowBackendArgs
		if err := json.Unmarshal([]byte(os.Getenv("LEVEE_TEST_ARGS")), &a); err != nil {
			return fail(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fail(err)
		}
		slots := make(chan struct{}, a.Capacity)
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			slots <- struct{}{} // over capacity, wait: the backend's own unbounded queue
			time.Sleep(a.Service)
			<-slots
			w.Write([]byte("ok"))
		}), ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		fmt.Printf("ADDR %s\n", ln.Addr())
		io.Copy(io.Discard, os.Stdin)
		return 0
	case "openloop":
		var loops []openLoop
		if err := json.Unmarshal([]byte(os.Getenv("LEVEE_TEST_ARGS")), &loops); err != nil {
			return fail(err)
		}
		fmt.Println("READY")
		bufio.NewReader(os.Stdin).ReadString('\n') // "GO"
		out := make([][]shot, len(loops))
		var wg sync.WaitGroup
		for i, o := range loops {
			wg.Go(func() { out[i] = o.Run() })
		}
		wg.Wait()
		w := bufio.NewWriter(os.Stdout)
		if err := json.NewEncoder(w).Encode(out); err != nil {
			return fail(err)
		}
		if err := w.Flush(); err != nil {
			return fail(err)
		}
		return 0
	case "levee":
		return runLeveeRole(fail)
	}
	return fail(fmt.Errorf("unknown role"))
}

// slowBackendArgs: a backend serving Capacity requests at a time, each
// taking Service, with an unbounded queue behind.
type slowBackendArgs struct {
	Capacity int
	Service  time.Duration
}

// child is a running child process of this test binary.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// startChild starts this test binary as role with args, and stops it when
// the test ends.
func startChild(t *testing.T, role string, args any) *child {
	t.Helper()
	js, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, "LEVEE_TEST_ARGS="+string(js))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, stdin: stdin, out: bufio.NewReaderSize(stdout, 1<<20)}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	return c
}

// line reads the child's next output line, waiting at most 10 s.
func (c *child) line(t *testing.T) string {
	t.Helper()
	type res struct {
		s   string
		err error
	}
	ch := make(chan res, 1)
	go func() { s, err := c.out.ReadString('\n'); ch <- res{s, err} }()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("child %s: %v", c.cmd.Env[len(c.cmd.Env)-2], r.err)
		}
		return strings.TrimSpace(r.s)
	case <-time.After(10 * time.Second):
		t.Fatal("child: no output within 10 s")
	}
	return ""
}

// startSlowBackend starts a slow backend in a child process and returns
// its address.
func startSlowBackend(t *testing.T, a slowBackendArgs) string {
	t.Helper()
	c := startChild(t, "backend", a)
	addr, ok := strings.CutPrefix(c.line(t), "ADDR ")
	if !ok {
		t.Fatal("backend child did not report its address")
	}
	return addr
}

// loadChild is a child process running open loops (role "openloop").
type loadChild struct {
	t     *testing.T
	c     *child
	loops []openLoop
	done  chan error
	shots [][]shot
}

// startLoadChild starts a child that runs loops at once when told to go.
func startLoadChild(t *testing.T, loops []openLoop) *loadChild {
	t.Helper()
	c := startChild(t, "openloop", loops)
	if got := c.line(t); got != "READY" {
		t.Fatalf("load child said %q, want READY", got)
	}
	return &loadChild{t: t, c: c, loops: loops, done: make(chan error, 1)}
}

// start sets the loops going.
func (l *loadChild) start() {
	if _, err := io.WriteString(l.c.stdin, "GO\n"); err != nil {
		l.t.Fatal(err)
	}
	go func() { l.done <- json.NewDecoder(l.c.out).Decode(&l.shots) }()
}

// wait returns each loop's shots once the child is done.
func (l *loadChild) wait() [][]shot {
	l.t.Helper()
	var limit time.Duration
	for _, o := range l.loops {
		limit = max(limit, time.Duration(o.Total/o.Rate+1)*time.Second+o.Timeout+30*time.Second)
	}
	select {
	case err := <-l.done:
		if err != nil {
			l.t.Fatalf("load child: %v", err)
		}
	case <-time.After(limit):
		l.t.Fatalf("load child did not finish within %v", limit)
	}
	return l.shots
}

// runOpenLoopChild runs the loops at once in a child process: onStart is
// called as the load begins, and each loop's shots are returned when the
// last one ends.
func runOpenLoopChild(t *testing.T, loops []openLoop, onStart func()) [][]shot {
	t.Helper()
	l := startLoadChild(t, loops)
	l.start()
	onStart()
	return l.wait()
}
