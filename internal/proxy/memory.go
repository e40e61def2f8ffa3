package proxy

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	"github.com/levee-gw/levee/internal/admission"
	"github.com/levee-gw/levee/internal/auth"
	"github.com/levee-gw/levee/internal/memguard"
)

// The request path's share of the memory budget (package memguard): every
// byte a request will hold beyond the fixed buffers of its connection and
// its copy loop is reserved before it is read, and everything a request
// reserved is released once, in finish, however the request ends (an
// answer, a refusal, a client gone, a panic).
//
// What does not fit is decided by priority: a sheddable request is refused
// 503 memory_pressure; a normal or critical one loses its replay copy and
// streams its body (it is still retried after a connect failure, since
// nothing of it was read, but not once its body was sent). Critical
// requests are never refused for memory by the budget: streaming costs
// only the fixed buffers.

// errNoMemory: the memory budget had no room for a sheddable request's
// body.
var errNoMemory = errors.New("no room in the memory budget")

// memClass maps a request's priority onto the budget's classes.
func memClass(p admission.Priority) memguard.Class {
	switch p {
	case admission.Critical:
		return memguard.ClassCritical
	case admission.Sheddable:
		return memguard.ClassSheddable
	}
	return memguard.ClassNormal
}

// budget is the request path's share of the memory budget: the Handler's
// admission steps and the responder (an answer read whole) reserve through
// it. A nil guard: everything fits, nothing is shed.
type budget struct{ guard *memguard.Guard }

// sheds reports whether memory pressure turns away a request of priority
// p: a sheddable one above the soft watermark, all but critical ones above
// the hard.
func (b budget) sheds(p admission.Priority) bool {
	if b.guard == nil {
		return false
	}
	lvl := b.guard.Level()
	return (lvl == memguard.Soft && p == admission.Sheddable) || (lvl == memguard.Hard && p != admission.Critical)
}

// reserve takes n bytes of the memory budget for x's request; finish
// releases them. Without a memory guard everything fits.
func (b budget) reserve(x *exchange, n int64) bool {
	if b.guard == nil || n <= 0 {
		return true
	}
	if !b.guard.Reserve(n, memClass(x.prio)) {
		return false
	}
	x.reserved += n
	return true
}

// unreserve gives back n of the bytes x's request reserved, when it turns
// out to hold fewer than it asked for.
func (b budget) unreserve(x *exchange, n int64) {
	if b.guard == nil || n <= 0 {
		return
	}
	n = min(n, x.reserved)
	b.guard.Release(n)
	x.reserved -= n
}

// release returns everything x's request reserved (finish calls it, once
// per request).
func (b budget) release(x *exchange) {
	if x.reserved > 0 {
		b.guard.Release(x.reserved)
		x.reserved = 0
	}
}

// requestPriority is r's priority on rt: the route's, or sheddable for a
// client's retry. ServeHTTP computes it once, into exchange.prio.
func requestPriority(rt *Route, r *http.Request) admission.Priority {
	if isClientRetry(r.Header) {
		return admission.Sheddable
	}
	return rt.Priority
}

// reserveSignedBody reserves the body a signed request must buffer to
// check its signature, before it is read: its Content-Length, or
// auth.MaxSignedBodyBytes+1 when the length is unknown (the largest that
// is read before refusing it 413; the caller gives back what the buffer
// did not need once it is read). A body over the maximum is refused
// without being read and reserves nothing. Unlike a replay copy, the
// body cannot stream instead: without room the request is refused 503
// memory_pressure, whatever its priority (a critical one has the highest
// ceiling).
func (b budget) reserveSignedBody(r *http.Request, x *exchange) (reserved int64, ok bool) {
	if b.guard == nil || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || r.ContentLength > auth.MaxSignedBodyBytes {
		return 0, true
	}
	n := r.ContentLength
	if n < 0 {
		n = auth.MaxSignedBodyBytes + 1
	}
	if !b.reserve(x, n) {
		return 0, false
	}
	return n, true
}

// replayableBody buffers r's body, when it fits limit and the memory
// budget, so that attempts can resend it. It returns the bytes (nil when r
// has no body) and whether the body is replayable. A body over the limit,
// or a normal or critical request's body the budget has no room for, is
// left streaming: r.Body then yields the bytes already read followed by
// the rest. A sheddable request's body without room is errNoMemory.
//
// The reservation is the body's Content-Length, or limit+1 when the length
// is unknown (cut down to what was buffered once the body ends); a known
// length is read into one buffer of exactly that size, so nothing is
// allocated beyond what was reserved.
func (b budget) replayableBody(r *http.Request, x *exchange, limit int64) ([]byte, bool, error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, true, nil
	}
	if r.ContentLength > limit {
		return nil, false, nil
	}
	want := r.ContentLength
	if want < 0 {
		want = limit + 1
	}
	if !b.reserve(x, want) {
		if x.prio == admission.Sheddable {
			return nil, false, errNoMemory
		}
		return nil, false, nil
	}
	var buf []byte
	var err error
	if r.ContentLength > 0 {
		buf = make([]byte, r.ContentLength)
		var n int
		n, err = io.ReadFull(r.Body, buf) // a short body is io.ErrUnexpectedEOF
		buf = buf[:n]
	} else {
		buf, err = readUpTo(r.Body, limit+1)
		b.unreserve(x, want-int64(cap(buf)))
	}
	if err != nil {
		return nil, false, err
	}
	if int64(len(buf)) > limit {
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf), r.Body), r.Body}
		return nil, false, nil
	}
	return buf, true, nil
}

// readUpTo reads src until EOF or until n bytes, growing its buffer by
// doubling but never past n (io.ReadAll's growth can overshoot n). A full
// buffer grows only once a byte proves the body goes on, so a body whose
// size is a power of two does not end in a buffer twice its size.
func readUpTo(src io.Reader, n int64) ([]byte, error) {
	buf := make([]byte, 0, min(n, 4<<10))
	for {
		if int64(len(buf)) == n {
			return buf, nil
		}
		if len(buf) == cap(buf) {
			var probe [1]byte
			m, err := io.ReadFull(src, probe[:])
			if m == 0 {
				if err == io.EOF {
					return buf, nil
				}
				return buf, err
			}
			nb := make([]byte, len(buf), min(n, 2*int64(cap(buf))))
			copy(nb, buf)
			buf = append(nb, probe[0])
			continue
		}
		m, err := src.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// bufferBody reads r's body whole before admission (NGINX's request
// buffering): the body has a known length within the route's
// BufferBodyBytes, and it is read under the body timeout (clientbody.go),
// so a client that stalls or trickles its body holds its own connection
// and its reservation, never an admission slot or an upstream request. The
// bytes become x.buffered, what every attempt sends (and resends).
//
// The reservation is the body's length. Without room a sheddable request
// is refused 503 memory_pressure; a normal or critical one streams its
// body as before (it then holds its slot while the body arrives, each gap
// bounded by the body timeout). It reports false after answering the
// client (the body failed: 408, 400, 413 or 499; see clientBodyFailed).
func (b budget) bufferBody(w http.ResponseWriter, r *http.Request, x *exchange) bool {
	if !b.reserve(x, r.ContentLength) {
		if x.prio == admission.Sheddable {
			x.shed(w, ReasonMemoryPressure, 0)
			return false
		}
		return true
	}
	buf := make([]byte, r.ContentLength)
	n, err := io.ReadFull(r.Body, buf) // a short body is io.ErrUnexpectedEOF
	if err != nil {
		if f := x.body.failure(); f != nil {
			err = f // the client's own error, not ReadFull's summary of it
		}
		x.clientBodyFailed(w, err)
		return false
	}
	x.buffered = buf[:n]
	return true
}
