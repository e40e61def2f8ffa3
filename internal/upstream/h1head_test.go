package upstream

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// fastHeadSeeds: heads fastHead takes and heads it must leave to
// http.ReadResponse (which then answers or refuses them itself).
var fastHeadSeeds = []string{
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Type: text/plain\r\n\r\nhello",
	"HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 404 Not Found\r\ncontent-length: 3\r\nx-lower: a\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\nabcEXTRA",
	"HTTP/1.1 200 OK\r\nContent-Length:  7 \r\nX-Tab:\tv\t\r\nConnection: Keep-Alive\r\n\r\n1234567",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
	"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\n\r\n",
	"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\n\r\nuntil close",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n folded\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nBad Name: 1\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nX: a\x00b\r\n\r\nx",
	"HTTP/1.1 200 OK\nContent-Length: 1\n\nx",
	"HTTP/1.1 2000 OK\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
	"HTTP/1.1 200 OK\r\nTrailer: X\r\nContent-Length: 1\r\n\r\nx",
	"HTTP/1.1 200 OK\r\nX-Empty:\r\n: nameless\r\nContent-Length: 1\r\n\r\nx",
}

// FuzzFastHead holds fastHead to http.ReadResponse: whenever fastHead takes
// a head, the standard parser accepts the same bytes and gives the same
// status, protocol, header, length, Close and body bytes, with the same
// bytes left after the body; when it does not take it, it consumed nothing.
func FuzzFastHead(f *testing.F) {
	for _, s := range fastHeadSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkFastHead(t, data)
	})
}

func TestFastHeadAgreesWithReadResponse(t *testing.T) {
	taken := 0
	for _, s := range fastHeadSeeds {
		if checkFastHead(t, []byte(s)) {
			taken++
		}
	}
	if taken < 4 {
		t.Fatalf("fastHead took %d of the seeds, want at least the 4 common heads", taken)
	}
}

// checkFastHead compares fastHead with http.ReadResponse on data and
// reports whether fastHead took the head.
func checkFastHead(t *testing.T, data []byte) bool {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	c := &h1Conn{br: bufio.NewReaderSize(bytes.NewReader(data), h1ReadBufSize)}
	if _, err := c.br.Peek(1); err != nil {
		return false
	}
	before := c.br.Buffered()
	got := c.fastHead(req)
	if got == nil {
		if c.br.Buffered() != before {
			t.Fatalf("%q: fastHead declined but consumed %d bytes", data, before-c.br.Buffered())
		}
		return false
	}
	want, err := http.ReadResponse(bufio.NewReaderSize(bytes.NewReader(data), h1ReadBufSize), req)
	if err != nil {
		t.Fatalf("%q: fastHead took a head http.ReadResponse refuses: %v", data, err)
	}
	if got.Status != want.Status || got.StatusCode != want.StatusCode || got.Proto != want.Proto ||
		got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor ||
		got.ContentLength != want.ContentLength || got.Close != want.Close ||
		got.TransferEncoding != nil || want.TransferEncoding != nil || want.Trailer != nil {
		t.Fatalf("%q:\nfast %q %d %s cl=%d close=%v\nstd  %q %d %s cl=%d close=%v te=%v", data,
			got.Status, got.StatusCode, got.Proto, got.ContentLength, got.Close,
			want.Status, want.StatusCode, want.Proto, want.ContentLength, want.Close, want.TransferEncoding)
	}
	if !reflect.DeepEqual(got.Header, want.Header) {
		t.Fatalf("%q: header\nfast %q\nstd  %q", data, got.Header, want.Header)
	}
	// The body as the fast path frames it, against net/http's.
	fb := &h1Body{c: c, n: got.ContentLength, keep: true}
	gotBody, gotErr := io.ReadAll(fb)
	wantBody, wantErr := io.ReadAll(want.Body)
	if !bytes.Equal(gotBody, wantBody) || (gotErr == nil) != (wantErr == nil) {
		t.Fatalf("%q: body fast %q %v, std %q %v", data, gotBody, gotErr, wantBody, wantErr)
	}
	return true
}

// TestFastHeadLineMemory: over one pooled connection (real sockets), an
// upstream's answers with a changing Date and a changing set of headers
// each arrive with their own header, and an earlier response's header is
// not changed by a later one that reuses the connection's remembered lines.
func TestFastHeadLineMemory(t *testing.T) {
	answers := []string{
		"HTTP/1.1 200 OK\r\nDate: Mon, 07 Dec 2026 23:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nab",
		"HTTP/1.1 200 OK\r\nDate: Mon, 07 Dec 2026 23:00:01 GMT\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\ncd",
		"HTTP/1.1 201 Created\r\nDate: Mon, 07 Dec 2026 23:00:01 GMT\r\nLocation: /x\r\nX-A: 1\r\nX-B: 2\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\ne",
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer func() { ln.Close(); wg.Wait() }()
	accepted := make(chan int, 8)
	wg.Add(1)
	go func() {
		defer wg.Done()
		n := 0
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n++
			accepted <- n
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				for _, a := range answers {
					if _, err := http.ReadRequest(br); err != nil {
						return
					}
					if _, err := io.WriteString(c, a); err != nil {
						return
					}
				}
			}()
		}
	}()
	tr := NewTransport(Options{Idle: time.Minute})
	defer tr.Close()
	var first http.Header
	for i, a := range answers {
		want, err := http.ReadResponse(bufio.NewReader(strings.NewReader(a)), nil)
		if err != nil {
			t.Fatal(err)
		}
		wantBody, _ := io.ReadAll(want.Body)
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		resp, err := tr.Forward(context.Background(), r, Outbound{Addr: ln.Addr().String(), RequestID: "id"})
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !bytes.Equal(body, wantBody) || resp.StatusCode != want.StatusCode || !reflect.DeepEqual(resp.Header, want.Header) {
			t.Fatalf("answer %d: %d %q %q (%v), want %d %q %q", i, resp.StatusCode, resp.Header, body, err, want.StatusCode, want.Header, wantBody)
		}
		if i == 0 {
			first = resp.Header.Clone()
			defer func(h http.Header) {
				if !reflect.DeepEqual(h, first) {
					t.Errorf("the first response's header changed after later ones: %q, was %q", h, first)
				}
			}(resp.Header)
		}
	}
	if n := len(accepted); n != 1 {
		t.Fatalf("%d connections for %d answers, want 1 (the pooled one)", n, len(answers))
	}
}
