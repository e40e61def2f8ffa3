package rawsock

import (
	"io"
	"net"
	"os"
	"syscall"
	"unsafe"
)

const supported = true

// Read reads once: what the socket holds, else it waits for the poller.
func (c *Conn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.rd.p, c.rd.n, c.rd.errno = p, 0, 0
	err := c.rc.Read(c.rd.fn)
	n, errno := c.rd.n, c.rd.errno
	c.rd.p = nil
	switch {
	case err != nil: // deadline passed or closed: the poller's error
		return 0, c.opError("read", err)
	case errno != 0:
		return 0, c.opError("read", os.NewSyscallError("read", errno))
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readOnce is the poller's callback: false means "wait until readable".
func (c *Conn) readOnce(fd uintptr) bool {
	p := c.rd.p
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		switch e {
		case 0:
			c.rd.n = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		default:
			c.rd.errno = e
			return true
		}
	}
}

// Write writes all of p, waiting for the poller while the socket is full.
func (c *Conn) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.wr.p, c.wr.n, c.wr.errno = p, 0, 0
	err := c.rc.Write(c.wr.fn)
	n, errno := c.wr.n, c.wr.errno
	c.wr.p = nil
	switch {
	case err != nil:
		return n, c.opError("write", err)
	case errno != 0:
		return n, c.opError("write", os.NewSyscallError("write", errno))
	}
	return n, nil
}

// writeSome is the poller's callback: it writes until done, an error, or
// a full socket (false: wait until writable, then go on from wr.n). Each
// pass writes at least one byte or ends, so the loop is bounded by len(p).
func (c *Conn) writeSome(fd uintptr) bool {
	for c.wr.n < len(c.wr.p) {
		rest := c.wr.p[c.wr.n:]
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)))
		switch e {
		case 0:
			c.wr.n += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.wr.errno = e
			return true
		}
	}
	return true
}

// opError shapes err as net's own connections do, so callers' checks
// (errors.Is(err, os.ErrDeadlineExceeded), net.Error's Timeout) still hold.
func (c *Conn) opError(op string, err error) error {
	if oe, ok := err.(*net.OpError); ok {
		err = oe.Err // RawConn's "raw-read"/"raw-write" wrapping
	}
	return &net.OpError{Op: op, Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}
