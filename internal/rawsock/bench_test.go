package rawsock

import (
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestMain doubles as the pinger BenchmarkEchoServer runs in a process of
// its own, so that the process measured is only the server.
func TestMain(m *testing.M) {
	if addr := os.Getenv("RAWSOCK_PINGER_ADDR"); addr != "" {
		n, _ := strconv.Atoi(os.Getenv("RAWSOCK_PINGER_N"))
		pause, _ := time.ParseDuration(os.Getenv("RAWSOCK_PINGER_PAUSE"))
		os.Exit(ping(addr, n, pause))
	}
	os.Exit(m.Run())
}

// ping sends n 100-byte messages to addr, each after pause, and reads each
// echo before the next.
func ping(addr string, n int, pause time.Duration) int {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return 1
	}
	defer c.Close()
	buf := make([]byte, 100)
	for i := 0; i < n; i++ {
		if pause > 0 {
			time.Sleep(pause)
		}
		if _, err := c.Write(buf); err != nil {
			return 1
		}
		if _, err := io.ReadFull(c, buf); err != nil {
			return 1
		}
	}
	return 0
}

// BenchmarkEchoServer is a gateway's situation in small: another process
// sends a 100-byte request every 200 µs and this process echoes it, idle
// in between. It reports this process's context switches and CPU time per
// request (getrusage), with the socket read and written by net's own
// calls (net) or by Wrap's raw ones (raw). With net's, a read that finds
// the process idle wakes the runtime's monitor thread, which then polls
// every 20 µs for a millisecond: more switches, more CPU.
func BenchmarkEchoServer(b *testing.B) {
	for _, raw := range []bool{false, true} {
		name := "net"
		if raw {
			name = "raw"
		}
		b.Run(name, func(b *testing.B) { echoServer(b, raw) })
	}
}

func echoServer(b *testing.B, raw bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "RAWSOCK_PINGER_ADDR="+ln.Addr().String(),
		"RAWSOCK_PINGER_N="+strconv.Itoa(b.N), "RAWSOCK_PINGER_PAUSE=200us")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer cmd.Wait()
	c, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if raw {
		c = Wrap(c)
	}
	buf := make([]byte, 100)
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := io.ReadFull(c, buf); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cs := (after.Nvcsw - before.Nvcsw) + (after.Nivcsw - before.Nivcsw)
	cpu := syscall.TimevalToNsec(after.Utime) - syscall.TimevalToNsec(before.Utime) +
		syscall.TimevalToNsec(after.Stime) - syscall.TimevalToNsec(before.Stime)
	b.ReportMetric(float64(cs)/float64(b.N), "ctxsw/op")
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
}
