// Package rawsock reads and writes a TCP socket with raw system calls that
// the Go scheduler does not see, while keeping the runtime's poller (and so
// deadlines and Close) for the waits.
//
// Why: a goroutine's ordinary system call wakes the runtime's monitor thread
// (sysmon) whenever every P had gone idle, and a monitor woken that way polls
// every 20 µs for the next millisecond. A gateway answering thousands of
// short requests a second goes idle between most of them, so each request
// paid a futex wake, a context switch and a train of 20 µs sleeps on another
// thread: a fifth of levee's CPU per refused request on a 2-core VM
// (docs/performance.md: 72.7-78.7 µs before, 57.3-63.3 after). A read or write of a non-blocking socket returns at
// once, so it needs none of what the scheduler's system-call bookkeeping is
// for (handing the P to another thread while a call blocks).
package rawsock

import (
	"net"
	"sync"
	"syscall"
)

// Conn is a net.Conn whose Read and Write are raw system calls. Everything
// else (deadlines, Close, addresses) is the wrapped connection's.
type Conn struct {
	net.Conn
	rc syscall.RawConn

	// Each direction's state lives here rather than in a closure, so a call
	// allocates nothing; the mutexes keep concurrent Reads (or Writes) apart,
	// as net.Conn allows them.
	rmu sync.Mutex
	rd  op
	wmu sync.Mutex
	wr  op
}

// op is one Read or Write in progress: the buffer, bytes done, the error.
type op struct {
	p     []byte
	n     int
	errno syscall.Errno
	fn    func(fd uintptr) bool
}

// Wrap returns nc reading and writing through raw system calls, or nc itself
// where that is not possible (not a socket, or not on Linux). nc must be a
// syscall.Conn: net.TCPConn is, and wrappers that keep the socket (a
// connection cap's) forward SyscallConn.
func Wrap(nc net.Conn) net.Conn {
	if !supported {
		return nc
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nc
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nc
	}
	c := &Conn{Conn: nc, rc: rc}
	c.rd.fn = c.readOnce
	c.wr.fn = c.writeSome
	return c
}

// Unwrap returns the connection Wrap was given. (h1server keeps the
// original beside the wrapper for its hand-offs; the benchmarks use this.)
func (c *Conn) Unwrap() net.Conn { return c.Conn }

// SyscallConn forwards to the wrapped connection.
func (c *Conn) SyscallConn() (syscall.RawConn, error) { return c.rc, nil }
