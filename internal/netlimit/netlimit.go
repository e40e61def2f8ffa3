// Package netlimit caps the connections a listener holds open at once. A
// connection beyond the cap is not left waiting in the kernel's backlog
// (where a client only sees a timeout): it is accepted, answered with a
// short HTTP/1.1 503 carrying levee's JSON refusal body, and closed.
package netlimit

import (
	"errors"
	"io"
	"math"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// refusal is written to a connection over the cap. Reason connection_limit
// is part of levee's stable refusal vocabulary: its row in proxy's
// reasonTable (statuses, sentence, Retry-After) is the contract, and
// proxy's TestListenerRefusalsMatchTable holds these answers to it.
var (
	refusal      = render(503, "Service Unavailable", "levee holds as many connections as it is allowed")
	refusalPerIP = render(429, "Too Many Requests", "this client address holds as many connections as levee allows one address")
)

func render(status int, text, sentence string) string {
	body := `{"error":"` + sentence + `","reason":"connection_limit"}` + "\n"
	return "HTTP/1.1 " + strconv.Itoa(status) + " " + text + "\r\n" +
		"Content-Type: application/json\r\n" +
		"Retry-After: 1\r\n" +
		"Connection: close\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// lingerTimeout bounds writing the refusal and then reading what the client
// sent, so a client that neither reads nor closes cannot hold a goroutine.
const lingerTimeout = 250 * time.Millisecond

// lingerBytes bounds how much of the client's request is read and thrown
// away before closing.
const lingerBytes = 64 << 10

// maxRefusing bounds the refusals being written at once (each holds a
// goroutine for at most lingerTimeout). Beyond it, excess connections are
// closed without an answer: under a connection flood the cap must not
// turn into a goroutine flood.
const maxRefusing = 256

// Listener wraps a net.Listener, allowing at most Max open connections.
// Safe for concurrent use.
type Listener struct {
	net.Listener
	max      int64
	perIP    int
	open     atomic.Int64
	accepted atomic.Uint64
	refusing atomic.Int64
	onRefuse func()
	// deferIP: the per-address slot is taken by Claim, with the address a
	// PROXY protocol header gave, not at Accept (DeferPerIP).
	deferIP bool

	mu struct {
		sync.Mutex
		// byIP counts open connections per client address; entries at 0
		// are deleted, so it holds at most one entry per open connection.
		byIP map[netip.Addr]int
	}
}

// Limit returns ln capped at max open connections (max > 0). onRefuse, if
// not nil, is called for each refused connection (for a metric).
func Limit(ln net.Listener, max int, onRefuse func()) *Listener {
	return LimitPerIP(ln, max, 0, onRefuse)
}

// LimitPerIP is Limit (max <= 0: no total cap) plus a cap of perIP open
// connections per client IP address (perIP <= 0: none). A connection over
// the per-address cap is answered 429 connection_limit.
func LimitPerIP(ln net.Listener, max, perIP int, onRefuse func()) *Listener {
	l := &Listener{Listener: ln, max: int64(max), perIP: perIP, onRefuse: onRefuse}
	if l.max <= 0 {
		l.max = math.MaxInt64
	}
	l.mu.byIP = map[netip.Addr]int{}
	return l
}

// DeferPerIP makes l count the per-address cap against the address each
// connection's server passes to Claim (the client a PROXY protocol header
// names), instead of the peer's address at Accept. Call it before Accept.
func (l *Listener) DeferPerIP() { l.deferIP = true }

// Claim takes the per-address slot of c, a connection l returned after
// DeferPerIP, for the client address ip. At the cap, it answers c 429
// connection_limit (as Accept does; it waits for the request head, at most
// lingerTimeout, on the caller's goroutine), closes c and reports false.
// A connection of another listener, or of one without DeferPerIP, is
// claimed already: true.
func Claim(c net.Conn, ip netip.Addr) bool {
	lc, ok := c.(*conn)
	if !ok || !lc.l.deferIP || lc.l.perIP <= 0 {
		return true
	}
	ip = ip.Unmap()
	if !lc.l.takeIP(ip) {
		if lc.l.onRefuse != nil {
			lc.l.onRefuse()
		}
		refuse(c, refusalPerIP)
		return false
	}
	lc.mu.Lock()
	lc.ip = ip
	closed := lc.closed
	lc.mu.Unlock()
	if closed {
		lc.l.releaseIP(ip)
	}
	return true
}

// claimIP takes a per-address slot for c, reporting false when the address
// is at its cap.
func (l *Listener) claimIP(c net.Conn) (netip.Addr, bool) {
	if l.perIP <= 0 || l.deferIP {
		return netip.Addr{}, true
	}
	ap, err := netip.ParseAddrPort(c.RemoteAddr().String())
	if err != nil {
		return netip.Addr{}, true
	}
	ip := ap.Addr().Unmap()
	return ip, l.takeIP(ip)
}

// takeIP counts one more connection from ip, reporting false at the cap.
func (l *Listener) takeIP(ip netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mu.byIP[ip] >= l.perIP {
		return false
	}
	l.mu.byIP[ip]++
	return true
}

func (l *Listener) releaseIP(ip netip.Addr) {
	if !ip.IsValid() {
		return
	}
	l.mu.Lock()
	if n := l.mu.byIP[ip] - 1; n > 0 {
		l.mu.byIP[ip] = n
	} else {
		delete(l.mu.byIP, ip)
	}
	l.mu.Unlock()
}

// Open returns the number of connections currently open through l.
func (l *Listener) Open() int64 { return l.open.Load() }

// Accepted returns the number of connections accepted from the inner
// listener since l was made, refused ones included.
func (l *Listener) Accepted() uint64 { return l.accepted.Load() }

// Accept returns the next connection within the cap; connections over it
// are refused and closed without being returned.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.accepted.Add(1)
		answer := refusal
		if l.open.Add(1) <= l.max {
			ip, ok := l.claimIP(c)
			if ok {
				return &conn{Conn: c, l: l, ip: ip}, nil
			}
			answer = refusalPerIP
		}
		l.open.Add(-1)
		if l.onRefuse != nil {
			l.onRefuse()
		}
		// Refuse off the accept loop: it may take up to lingerTimeout.
		if l.refusing.Add(1) > maxRefusing {
			l.refusing.Add(-1)
			_ = c.Close()
			continue
		}
		go func() {
			defer l.refusing.Add(-1)
			refuse(c, answer)
		}()
	}
}

// refuse answers c's first request with the refusal and closes c. It
// waits (bounded) for the request head first: an HTTP client treats bytes
// that arrive before it has sent a request as an unsolicited response and
// drops them. Then it half-closes and reads (bounded) what else the client
// sent, because closing a socket with unread input makes the kernel send a
// reset, which can destroy the refusal before the client reads it.
func refuse(c net.Conn, answer string) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(lingerTimeout))
	if !awaitRequestHead(c) {
		return
	}
	if _, err := c.Write([]byte(answer)); err != nil {
		return
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(c, lingerBytes))
}

// awaitRequestHead reads until the blank line that ends an HTTP/1 request
// head, at most lingerBytes. It reports false when the client sent nothing
// usable before the deadline or closed.
func awaitRequestHead(c net.Conn) bool {
	var buf [4096]byte
	var tail [4]byte // the last bytes seen, to find "\r\n\r\n" across reads
	for total := 0; total < lingerBytes; {
		n, err := c.Read(buf[:])
		for _, b := range buf[:n] {
			tail[0], tail[1], tail[2], tail[3] = tail[1], tail[2], tail[3], b
			if tail == [4]byte{'\r', '\n', '\r', '\n'} {
				return true
			}
		}
		total += n
		if err != nil {
			return total > 0 && errors.Is(err, io.EOF)
		}
	}
	return true
}

// conn gives its slot back exactly once, on the first Close.
type conn struct {
	net.Conn
	l    *Listener
	once sync.Once
	mu   sync.Mutex // ip and closed: Claim may run beside a Close (Shutdown)
	// ip is valid when counted against a per-address cap.
	ip     netip.Addr
	closed bool
}

// CloseWrite and SyscallConn forward to the accepted connection: the
// server half-closes before a lingering close, and reads and writes the
// socket directly (rawsock); an embedded net.Conn would hide both.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}

func (c *conn) SyscallConn() (syscall.RawConn, error) {
	if sc, ok := c.Conn.(syscall.Conn); ok {
		return sc.SyscallConn()
	}
	return nil, errors.ErrUnsupported
}

func (c *conn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		c.l.open.Add(-1)
		c.mu.Lock()
		ip := c.ip
		c.closed = true
		c.mu.Unlock()
		c.l.releaseIP(ip)
	})
	return err
}
