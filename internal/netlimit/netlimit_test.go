package netlimit

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

func TestRefusalBodyLengthMatches(t *testing.T) {
	_, body, _ := strings.Cut(refusal, "\r\n\r\n")
	if !strings.Contains(refusal, "Content-Length: "+itoa(len(body))+"\r\n") {
		t.Fatalf("Content-Length does not match the %d-byte body", len(body))
	}
	var doc struct{ Error, Reason string }
	if err := json.Unmarshal([]byte(body), &doc); err != nil || doc.Reason != "connection_limit" || doc.Error == "" {
		t.Fatalf("body %q: %+v %v", body, doc, err)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestLimit: with a cap of 2, a third concurrent connection gets the 503
// refusal; once one closes, a new connection is served again.
func TestLimit(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var refused atomic.Int64
	ln := Limit(raw, 2, func() { refused.Add(1) })
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(ln)
	defer srv.Close()

	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		return c, bufio.NewReader(c)
	}
	get := func(c net.Conn, br *bufio.Reader) *http.Response {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp
	}
	c1, b1 := dial()
	c2, b2 := dial()
	if get(c1, b1).StatusCode != 200 || get(c2, b2).StatusCode != 200 {
		t.Fatal("connections within the cap not served")
	}
	c3, b3 := dial()
	if resp := get(c3, b3); resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third connection: %d", resp.StatusCode)
	}
	c3.Close()
	if refused.Load() != 1 || ln.Open() != 2 {
		t.Fatalf("refused %d, open %d", refused.Load(), ln.Open())
	}
	c1.Close()
	// The server notices the close asynchronously: poll, bounded.
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		n := ln.Open()
		return n == 1, fmt.Sprintf("open = %d after a close, want 1", n)
	})
	c4, b4 := dial()
	defer c4.Close()
	defer c2.Close()
	if get(c4, b4).StatusCode != 200 {
		t.Fatal("a slot freed by a close was not reused")
	}
}

// TestLimitPerIP: with a per-address cap of 2 and no total cap, a third
// connection from the same address gets 429; closing one frees its slot,
// and the per-address table holds no entry for addresses with nothing open.
func TestLimitPerIP(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := LimitPerIP(raw, 0, 2, nil)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })}
	go srv.Serve(ln)
	defer srv.Close()
	get := func() (net.Conn, int) {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
		return c, resp.StatusCode
	}
	c1, s1 := get()
	c2, s2 := get()
	c3, s3 := get()
	c3.Close()
	if s1 != 200 || s2 != 200 || s3 != 429 {
		t.Fatalf("statuses %d %d %d, want 200 200 429", s1, s2, s3)
	}
	c1.Close()
	c2.Close()
	testkit.Eventually(t, 5*time.Second, func() (bool, string) {
		ln.mu.Lock()
		n := len(ln.mu.byIP)
		ln.mu.Unlock()
		open := ln.Open()
		return n == 0 && open == 0, fmt.Sprintf("after closing everything: %d addresses tracked, %d open", n, open)
	})
}

// TestConnKeepsSocketMethods: the counted connection still offers the
// socket's half-close and raw access (the server's lingering close and its
// raw reads and writes depend on them), and a half-close reaches the peer.
func TestConnKeepsSocketMethods(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := Limit(raw, 2, nil)
	defer ln.Close()
	peer, err := net.Dial("tcp", raw.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("%T hides SyscallConn", c)
	}
	if rc, err := sc.SyscallConn(); err != nil || rc == nil {
		t.Fatalf("SyscallConn = %v, %v", rc, err)
	}
	cw, ok := c.(interface{ CloseWrite() error })
	if !ok {
		t.Fatalf("%T hides CloseWrite", c)
	}
	if err := cw.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := peer.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("peer read after CloseWrite = %d, %v; want EOF", n, err)
	}
}
