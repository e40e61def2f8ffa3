package proxy

import (
	"fmt"
	"io"
)

// Relaying an answer that did not end within the copy buffer: an answer
// of unknown length (chunked, a stream), or a known length over the
// route's answer buffer (or without room for it in the memory budget).
//
// A plain copy loop reads the upstream only as fast as the client takes
// the answer, so a client that reads slowly, or never (an HTTP/2 stream
// with a zero window), keeps the attempt open and its admission slot held
// until send_timeout, even when the upstream finished long ago. relay
// decouples the two sides as NGINX's proxy_buffering does: the handler's
// goroutine reads the upstream into copy-buffer chunks while one writer
// goroutine writes them to the client, up to readAheadChunks apart. When
// the upstream's answer ends, the attempt ends (its connection goes back
// to the pool) and the slot is released at once, however much of the
// answer the client has still to take. Only the chunks the writer has yet
// to send are held, each reserved from the memory budget (without room,
// the reader waits for the writer, as the plain copy did).
//
// Only answers that are streaming take this path, never the fast path's
// small answers (read whole by readAnswer): its goroutine and channels
// are a few hundred bytes next to 32 KiB chunks.

// relayChunk is a chunk read from the upstream for the writer.
type relayChunk struct {
	bp *[]byte
	n  int
}

// relay writes first, then the rest of src, to the client through s,
// reading ahead of the client by up to the route's answer buffer (at least
// one chunk). It returns the bytes written and, on failure, which side
// failed; when src ends it closes src (so that its connection goes back to
// its pool), ends attempt a and releases x's admission slot before the
// client has taken everything. It closes src once, however it returns.
func (o *responder) relay(s sender, src io.ReadCloser, x *exchange, a *attempt, first []byte) (int64, *copyError) {
	// Chunks in flight at once: the reader's, the writer's and the read
	// ahead between them. Bounded by the answer buffer (at most 64 MiB /
	// 32 KiB = 2048) and at least 2, so reading and writing overlap.
	chunks := int(min(max(x.route.BufferAnswerBytes/copyBufSize, 2), 2048))
	full := make(chan relayChunk, chunks)
	free := make(chan *[]byte, chunks) // never blocks: at most chunks are out
	done := make(chan struct{})        // closed when the writer has stopped
	var written int64
	var werr error
	if len(first) > 0 {
		bp := copyBufs.Get().(*[]byte)
		full <- relayChunk{bp, copy(*bp, first)}
	}
	out := len(full) // chunks taken from the pool
	go func() {
		defer close(done)
		defer func() {
			// A writer that panics (a bug) fails the copy, not the process:
			// this goroutine is not the handler's, which net/http recovers.
			if p := recover(); p != nil {
				werr = fmt.Errorf("writing the answer: panic: %v", p)
			}
		}()
		for c := range full {
			n, err := s.write((*c.bp)[:c.n])
			written += int64(n)
			free <- c.bp
			if err != nil {
				werr = err
				return
			}
		}
	}()

	var rerr error
	closed, drained := false, false
read:
	for {
		var bp *[]byte
		select {
		case bp = <-free:
		default:
			// The first two chunks need no reservation: they stand for
			// the copy buffer a plain copy would hold.
			if out < chunks && (out < 2 || o.memory.reserve(x, copyBufSize)) {
				bp = copyBufs.Get().(*[]byte)
				out++
			} else {
				select {
				case bp = <-free:
				case <-done:
					break read // the client failed
				}
			}
		}
		n, err := src.Read(*bp)
		if err == nil && x.table.drained() {
			free <- bp
			drained = true // drain.go: checked at each chunk, no timer per request
			break
		}
		if n > 0 {
			select {
			case full <- relayChunk{bp, n}:
			case <-done:
				free <- bp
				break read
			}
		} else {
			free <- bp
		}
		if err == io.EOF {
			// The upstream's answer is complete: the client may take its
			// time with the rest, holding no slot.
			src.Close()
			closed = true
			a.end(x)
			x.releaseAdmission()
			break
		}
		if err != nil {
			rerr = err
			break
		}
	}
	if !closed {
		src.Close() // the writer never reads src: closing it now frees the upstream sooner
	}
	close(full)
	<-done
	// Every chunk is back in free or left in full (but one a panicking
	// writer held, left to the collector).
	for c := range full { // closed: ends when empty
		copyBufs.Put(c.bp)
	}
	for range out {
		select {
		case bp := <-free:
			copyBufs.Put(bp)
		default:
		}
	}
	if drained {
		return written, &copyError{side: sideDrain, err: errDrained}
	}
	if werr != nil {
		return written, &copyError{side: sideClient, err: werr}
	}
	if rerr != nil {
		return written, &copyError{side: sideUpstream, err: rerr}
	}
	return written, nil
}
