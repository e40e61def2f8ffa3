package h1server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestWriteDeadline: a handler's write deadline (set through
// http.ResponseController) bounds its writes to a client that stops
// reading: the write fails instead of blocking, so the handler can let go
// of what it holds (a data route's database connection). The deadline ends
// with its response: the next request on the connection, answered after
// the first one's deadline has passed, is written in full.
func TestWriteDeadline(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	failed := make(chan error, 1)
	ts := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		switch r.URL.Path {
		case "/stuck":
			// Far more than the socket buffers hold, to a client that reads nothing.
			var err error
			for i := 0; i < 4096 && err == nil; i++ {
				if err = rc.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)); err == nil {
					_, err = io.WriteString(w, big)
				}
			}
			failed <- err
		case "/short":
			if err := rc.SetWriteDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
				t.Errorf("SetWriteDeadline: %v", err)
			}
			io.WriteString(w, "short")
		default:
			io.WriteString(w, big)
		}
	}))

	c, _ := ts.dial()
	fmt.Fprintf(c, "GET /stuck HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case err := <-failed:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("writing to a client that reads nothing ended with %v, want the deadline's error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's write to a stuck client blocked past its deadline")
	}

	c2, br := ts.dial()
	fmt.Fprintf(c2, "GET /short HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || body != "short" {
		t.Fatalf("/short: %d %q", resp.StatusCode, body)
	}
	time.Sleep(50 * time.Millisecond) // past /short's deadline, which must not outlive its response
	fmt.Fprintf(c2, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 || len(body) != len(big) {
		t.Fatalf("/big after /short's deadline passed: %d, %d bytes", resp.StatusCode, len(body))
	}
}
