package rawsock

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

// tcpPair returns both ends of a real loopback TCP connection; the accepted
// end is wrapped.
func tcpPair(t testing.TB) (wrapped net.Conn, peer net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	peer, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	wrapped = Wrap(r.c)
	t.Cleanup(func() { wrapped.Close(); peer.Close() })
	return wrapped, peer
}

func TestWrapTakesSocketsOnly(t *testing.T) {
	w, _ := tcpPair(t)
	if _, ok := w.(*Conn); ok != supported {
		t.Fatalf("Wrap(TCP conn) is %T; supported=%v", w, supported)
	}
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	if got := Wrap(a); got != a {
		t.Fatalf("Wrap(net.Pipe) = %T, want the pipe itself", got)
	}
}

func TestReadWriteRoundTrip(t *testing.T) {
	w, peer := tcpPair(t)
	if _, err := peer.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := w.Read(buf)
	if err != nil || string(buf[:n]) != "ping" {
		t.Fatalf("Read = %q, %v", buf[:n], err)
	}
	if n, err := w.Write([]byte("pong")); n != 4 || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	n, err = io.ReadFull(peer, buf[:4])
	if err != nil || string(buf[:n]) != "pong" {
		t.Fatalf("peer read %q, %v", buf[:n], err)
	}
}

// A write larger than the socket buffers must wait for the poller (the
// EAGAIN path) and still deliver every byte, in order.
func TestLargeWriteWaitsForRoom(t *testing.T) {
	w, peer := tcpPair(t)
	payload := make([]byte, 16<<20)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(50 * time.Millisecond) // let the writer fill the buffers first
		b, _ := io.ReadAll(peer)
		got <- b
	}()
	n, err := w.Write(payload)
	if n != len(payload) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(payload))
	}
	w.Close()
	if b := <-got; !bytes.Equal(b, payload) {
		t.Fatalf("peer got %d bytes, not the payload", len(b))
	}
}

func TestReadDeadline(t *testing.T) {
	w, _ := tcpPair(t)
	if err := w.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	_, err := w.Read(make([]byte, 8))
	var ne net.Error
	if !errors.Is(err, os.ErrDeadlineExceeded) || !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("Read past the deadline = %v, want a timeout", err)
	}
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" {
		t.Fatalf("error %#v is not a read OpError", err)
	}
}

func TestWriteDeadline(t *testing.T) {
	w, _ := tcpPair(t) // the peer never reads
	// The deadline leaves the first write(2), which copies what fits in
	// the socket buffers, ample time to happen on a loaded machine: with
	// 50 ms, a run under -race beside another suite was descheduled past
	// it and (rightly) wrote nothing. The buffers fill at once, so the
	// test still waits only the deadline.
	if err := w.SetWriteDeadline(time.Now().Add(2 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := w.Write(make([]byte, 64<<20))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Write past the deadline = %d, %v; want a timeout", n, err)
	}
	if n <= 0 || n >= 64<<20 {
		t.Fatalf("Write reported %d bytes written; want the part that fit", n)
	}
}

func TestCloseUnblocksRead(t *testing.T) {
	w, _ := tcpPair(t)
	done := make(chan error, 1)
	go func() {
		_, err := w.Read(make([]byte, 8))
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	w.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Read after Close = %v, want net.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still blocked 5 s after Close")
	}
}

func TestPeerCloseIsEOF(t *testing.T) {
	w, peer := tcpPair(t)
	peer.Write([]byte("last"))
	peer.Close()
	b, err := io.ReadAll(w)
	if err != nil || string(b) != "last" {
		t.Fatalf("ReadAll = %q, %v; want \"last\", nil (EOF)", b, err)
	}
}

func TestPeerResetIsError(t *testing.T) {
	w, peer := tcpPair(t)
	peer.(*net.TCPConn).SetLinger(0)
	peer.Close() // RST
	time.Sleep(20 * time.Millisecond)
	_, err := w.Read(make([]byte, 8))
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("Read after a reset = %v, want ECONNRESET", err)
	}
}

// The point of the package: a read and a write allocate nothing.
func TestNoAllocations(t *testing.T) {
	w, peer := tcpPair(t)
	msg, buf, pbuf := []byte("0123456789"), make([]byte, 64), make([]byte, 64)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := peer.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(w, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(peer, pbuf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
	})
	// peer's side is a plain net.Conn; its reads and writes allocate
	// nothing either, so any allocation here is Conn's.
	if allocs != 0 {
		t.Fatalf("%.1f allocations per round trip, want 0", allocs)
	}
}
