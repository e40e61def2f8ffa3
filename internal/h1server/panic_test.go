package h1server

import (
	"io"
	"net/http"
	"testing"
	"time"
)

// TestFallbackPanicCounted (issue 28 loose end): a panic in a request
// served by the net/http fallback (a handed-off chunked request, an
// HTTP/2 stream over h2c) is counted in Panics as the loop's are, and
// net/http still recovers it (the connection closed, the stream reset);
// http.ErrAbortHandler is not counted there either.
func TestFallbackPanicCounted(t *testing.T) {
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/abort" {
			panic(http.ErrAbortHandler)
		}
		panic("a bug")
	}))
	// A chunked request is handed to net/http (the loop serves only
	// what it frames itself).
	c, br := ts.dial()
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n")
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("connection still open after the handler panicked on the net/http path")
	}
	if n := ts.srv.Panics(); n != 1 {
		t.Fatalf("Panics() = %d after a panic on a handed-off request, want 1", n)
	}
	// HTTP/2 streams (h2c, prior knowledge).
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: p}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for i, path := range []string{"/a", "/abort", "/b"} {
		resp, err := client.Get("http://" + ts.addr + path)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("GET %s over h2c: %d, want the stream reset", path, resp.StatusCode)
		}
		want := []uint64{2, 2, 3}[i]
		if n := ts.srv.Panics(); n != want {
			t.Fatalf("after GET %s over h2c: Panics() = %d, want %d", path, n, want)
		}
	}
}
