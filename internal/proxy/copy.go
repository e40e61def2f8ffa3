package proxy

// Copying an upstream's answer to the client: its headers less hop-by-hop
// ones, its trailers, and its body in pooled chunks, flushed as it arrives
// when its length is unknown.

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/upstream"
)

// copyResponseHeader copies an upstream's response headers, less hop-by-hop
// ones, into dst.
func copyResponseHeader(dst, src http.Header) {
	conn := src["Connection"]
	for k, vv := range src {
		if upstream.IsHopHeader(k) || (len(conn) > 0 && upstream.ConnectionListed(conn, k)) {
			continue
		}
		dst[k] = vv
	}
}

func announceTrailers(dst, trailer http.Header) {
	if len(trailer) == 0 {
		return
	}
	keys := make([]string, 0, len(trailer))
	for k := range trailer {
		keys = append(keys, k)
	}
	dst["Trailer"] = []string{strings.Join(keys, ", ")}
}

func copyTrailers(dst, trailer http.Header) {
	for k, vv := range trailer {
		dst[k] = vv
	}
}

// streaming reports whether a response must be flushed as it arrives rather
// than buffered: bodies of unknown length (chunked, server-sent events,
// long polls).
func streaming(resp *http.Response) bool {
	return resp.ContentLength == -1
}

type copySide uint8

const (
	sideUpstream copySide = iota
	sideClient
)

type copyError struct {
	side copySide
	err  error
}

// copyBufSize is the chunk in which bodies are streamed.
const copyBufSize = 32 << 10

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// copyBody streams src to w, flushing after each chunk when flush is set.
// With sendTimeout > 0 each write to the client must finish within it
// (NGINX's send_timeout): a client that stops reading fails the copy
// instead of holding what src holds (a data route's database connection)
// for as long as it likes. It returns the bytes written and, on failure,
// which side failed.
func copyBody(w http.ResponseWriter, src io.Reader, flush bool, sendTimeout time.Duration) (int64, *copyError) {
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	buf := *bp
	var n int64
	var flusher http.Flusher
	if flush {
		flusher, _ = w.(http.Flusher)
	}
	var rc *http.ResponseController
	if sendTimeout > 0 {
		rc = http.NewResponseController(w)
	}
	for {
		nr, rerr := src.Read(buf)
		if nr > 0 {
			if rc != nil {
				_ = rc.SetWriteDeadline(time.Now().Add(sendTimeout))
			}
			nw, werr := w.Write(buf[:nr])
			n += int64(nw)
			if werr != nil {
				return n, &copyError{side: sideClient, err: werr}
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
		if rerr == io.EOF {
			return n, nil
		}
		if rerr != nil {
			return n, &copyError{side: sideUpstream, err: rerr}
		}
	}
}
