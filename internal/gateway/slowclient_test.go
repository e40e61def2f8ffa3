package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Slow clients (issue 22): a request body that stops arriving, an answer
// nobody reads. Real levee, a real upstream that records every request it
// saw, raw sockets and raw HTTP/2 frames on the client side. The timeouts
// are set small (300 ms) so each test takes about a second.

// seenRequest is what the recording upstream saw of one request.
type seenRequest struct {
	path    string
	bodyLen int
	bodyErr error // reading the body failed (levee cancelled the request)
	dur     time.Duration
	wrote   int64 // bytes of the answer written
	sendErr error // writing the answer failed (levee dropped the connection)
}

// recorder is an upstream on loopback: /big/ answers bigAnswer (64 MiB), anything else
// a 64-byte answer after reading the body whole.
type recorder struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []seenRequest
}

// bigAnswer is the /big/ answer: larger than everything between the
// upstream and a client that does not read can absorb (the kernel's
// socket buffers on both sides, which autotune to several MiB on
// loopback, and levee's answer read-ahead, server.answer_buffer), so that
// the upstream is still writing when send_timeout cuts the client.
const bigAnswer = 64 << 20

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{}
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	rec.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		s := seenRequest{path: r.URL.Path}
		b, err := io.ReadAll(r.Body)
		s.bodyLen, s.bodyErr = len(b), err
		if err == nil {
			if i := strings.Index(r.URL.Path, "/256k"); i >= 0 {
				// 256 KiB, over the copy buffer and within answer_buffer:
				// with Content-Length ("/256k-length"), or chunked.
				if strings.HasPrefix(r.URL.Path[i:], "/256k-length") {
					w.Header().Set("Content-Length", strconv.Itoa(256<<10))
				}
				for s.wrote < 256<<10 && s.sendErr == nil {
					var n int
					n, s.sendErr = w.Write(chunk)
					s.wrote += int64(n)
					http.NewResponseController(w).Flush()
				}
			} else if strings.HasPrefix(r.URL.Path, "/big/") {
				w.Header().Set("Content-Length", strconv.Itoa(bigAnswer))
				for s.wrote < bigAnswer && s.sendErr == nil {
					var n int
					n, s.sendErr = w.Write(chunk)
					s.wrote += int64(n)
				}
			} else {
				n, _ := w.Write(bytes.Repeat([]byte("y"), 64))
				s.wrote = int64(n)
			}
		}
		s.dur = time.Since(start)
		rec.mu.Lock()
		rec.seen = append(rec.seen, s)
		rec.mu.Unlock()
	}))
	t.Cleanup(rec.srv.Close)
	return rec
}

// requests returns what the upstream saw of finished requests.
func (rec *recorder) requests() []seenRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seenRequest(nil), rec.seen...)
}

// slowConfig is levee with 300 ms body and send timeouts in front of
// rec, with a max_concurrency 32 limit: /streamed/ buffers no body (its
// retry block's replay_body_limit is 16 bytes), /patient/ waits 2 s for a
// client to read.
func slowConfig(rec *recorder, extra string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
server: {body_timeout: 300ms, send_timeout: 300ms}
upstreams:
  b:
    endpoints: [{address: %s}]
    limits: {max_concurrency: 32}
routes:
  - {name: streamed, match: {path_prefix: /streamed/}, upstream: b, retry: {attempts: 1, replay_body_limit: 16}}
  - {name: patient, match: {path_prefix: /patient/}, upstream: b, send_timeout: 2s}
  - {name: all, match: {path_prefix: /}, upstream: b}
%s`, hostPort(rec.srv), extra)
}

// endpointFailures sums levee_endpoint_errors_total over every label set.
func (h *harness) endpointFailures() float64 {
	h.t.Helper()
	var sum float64
	for _, line := range strings.Split(h.metricsPage(), "\n") {
		if strings.HasPrefix(line, "levee_endpoint_errors_total{") {
			var v float64
			fmt.Sscanf(line[strings.LastIndexByte(line, ' ')+1:], "%g", &v)
			sum += v
		}
	}
	return sum
}

func (h *harness) inflight() float64 { return h.metric(`levee_admission_inflight{upstream="b"}`) }

// rawDial opens a TCP connection to levee; with small set its receive
// buffer is 4 KiB, set before the connection is made (so the TCP window it
// offers stays small).
func rawDial(t *testing.T, addr string, small bool) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second}
	if small {
		d.Control = smallRcvBuf
	}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// smallRcvBuf is a net.Dialer's Control that sets SO_RCVBUF to 4 KiB.
func smallRcvBuf(_, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
	})
	if err != nil {
		return err
	}
	return serr
}

// expectRawRefusal reads one answer from br and asserts its status and
// reason, and that it came within [min, max] of since.
func expectRawRefusal(t *testing.T, br *bufio.Reader, since time.Time, status int, reason string, lo, hi time.Duration) {
	t.Helper()
	resp, body := readAnswer(t, br, http.MethodPost)
	took := time.Since(since)
	var r refusal
	_ = json.Unmarshal([]byte(body), &r)
	if resp.StatusCode != status || r.Reason != reason {
		t.Fatalf("answer %d %q, want %d %s", resp.StatusCode, body, status, reason)
	}
	if took < lo || took > hi {
		t.Errorf("answered after %v, want from %v to %v", took, lo, hi)
	}
}

// TestStalledBodyBufferedNeverReachesUpstream: a body of known length that
// stops arriving is answered 408 body_timeout after body_timeout; it was
// being read before admission, so the upstream never saw the request, no
// admission slot was taken, and no endpoint is blamed. Over levee's loop
// and over TLS.
func TestStalledBodyBufferedNeverReachesUpstream(t *testing.T) {
	rec := newRecorder(t)
	certFile, keyFile, _ := selfSigned(t)
	plain := start(t, slowConfig(rec, ""))
	tlsH := start(t, slowConfig(rec, fmt.Sprintf("tls: {cert_file: %s, key_file: %s}\n", certFile, keyFile)))
	for _, tc := range []struct {
		name string
		h    *harness
		dial func() (io.ReadWriter, *bufio.Reader)
	}{
		{"clear text", plain, func() (io.ReadWriter, *bufio.Reader) {
			c := rawDial(t, plain.g.Addr().String(), false)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			return c, bufio.NewReader(c)
		}},
		{"TLS", tlsH, func() (io.ReadWriter, *bufio.Reader) {
			c, br := dialTLS(t, tlsH.g.Addr().String())
			return c, br
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, br := tc.dial()
			start := time.Now()
			fmt.Fprint(c, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nabc")
			expectRawRefusal(t, br, start, http.StatusRequestTimeout, "body_timeout", 300*time.Millisecond, 3*time.Second)
			if n := len(rec.requests()); n != 0 {
				t.Errorf("the upstream saw %d requests, want none", n)
			}
			if f := tc.h.endpointFailures(); f != 0 {
				t.Errorf("endpoint failures %v, want 0", f)
			}
			if n := tc.h.metric(`levee_refusals_total{reason="body_timeout",route="all"}`); n != 1 {
				t.Errorf("body_timeout refusals %v, want 1", n)
			}
		})
	}
}

// TestStalledBodyStreamedIsCancelled: a body over the route's buffer limit
// streams to the upstream; when it stops, the client gets 408 after
// body_timeout, the upstream's request is cancelled (its body read fails),
// the slot is free again and the endpoint is not blamed.
func TestStalledBodyStreamedIsCancelled(t *testing.T) {
	rec := newRecorder(t)
	h := start(t, slowConfig(rec, ""))
	c := rawDial(t, h.g.Addr().String(), false)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	start := time.Now()
	fmt.Fprint(c, "POST /streamed/x HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n0123456789abcdefghij")
	expectRawRefusal(t, br, start, http.StatusRequestTimeout, "body_timeout", 300*time.Millisecond, 3*time.Second)
	waitFor(t, "the upstream to see its request end", func() bool { return len(rec.requests()) == 1 })
	seen := rec.requests()[0]
	if seen.bodyErr == nil || seen.bodyLen != 20 {
		t.Errorf("upstream read %d bytes, error %v; want the 20 sent and then an error", seen.bodyLen, seen.bodyErr)
	}
	if seen.dur > 3*time.Second {
		t.Errorf("upstream request held %v", seen.dur)
	}
	waitFor(t, "the slot to be free", func() bool { return h.inflight() == 0 })
	if f := h.endpointFailures(); f != 0 {
		t.Errorf("endpoint failures %v, want 0", f)
	}
}

// TestTrickledBodyIsAccepted: a body that arrives one byte at a time, each
// well within body_timeout, is forwarded whole, however long it takes.
func TestTrickledBodyIsAccepted(t *testing.T) {
	rec := newRecorder(t)
	h := start(t, slowConfig(rec, ""))
	c := rawDial(t, h.g.Addr().String(), false)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	const body = "0123456789"
	fmt.Fprintf(c, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", len(body))
	for i := range len(body) { // 10 × 100 ms: 1 s in all, over three body timeouts
		time.Sleep(100 * time.Millisecond) // the client's pace, not a wait for a state
		c.Write([]byte{body[i]})
	}
	resp, got := readAnswer(t, br, http.MethodPost)
	if resp.StatusCode != 200 || len(got) != 64 {
		t.Fatalf("answer %d %q", resp.StatusCode, got)
	}
	if s := rec.requests(); len(s) != 1 || s[0].bodyLen != len(body) || s[0].bodyErr != nil {
		t.Fatalf("upstream saw %+v", s)
	}
}

// TestStalledChunkedBodyTimesOut: a chunked body (served by net/http after
// the loop hands the connection off) that stops gets 408 too; the
// upstream's request, streamed, is cancelled.
func TestStalledChunkedBodyTimesOut(t *testing.T) {
	rec := newRecorder(t)
	h := start(t, slowConfig(rec, ""))
	c := rawDial(t, h.g.Addr().String(), false)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	start := time.Now()
	fmt.Fprint(c, "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n")
	expectRawRefusal(t, br, start, http.StatusRequestTimeout, "body_timeout", 300*time.Millisecond, 3*time.Second)
	waitFor(t, "the slot to be free", func() bool { return h.inflight() == 0 })
	for _, s := range rec.requests() {
		if s.bodyErr == nil {
			t.Errorf("upstream read the whole body of %+v", s)
		}
	}
	if f := h.endpointFailures(); f != 0 {
		t.Errorf("endpoint failures %v, want 0", f)
	}
}

// h2Client speaks raw HTTP/2 frames (prior knowledge, h2c) to levee.
type h2Client struct {
	t   *testing.T
	c   net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	hb  bytes.Buffer
}

func dialH2(t *testing.T, addr string, settings ...http2.Setting) *h2Client {
	t.Helper()
	c := rawDial(t, addr, false)
	c.SetDeadline(time.Now().Add(15 * time.Second))
	if _, err := io.WriteString(c, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	h := &h2Client{t: t, c: c, fr: http2.NewFramer(c, c)}
	h.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	h.enc = hpack.NewEncoder(&h.hb)
	if err := h.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return h
}

// request sends a request's HEADERS on stream id; without end, the
// stream stays open for a body.
func (h *h2Client) request(id uint32, method, path string, end bool, fields ...string) {
	h.t.Helper()
	h.hb.Reset()
	kv := append([]string{":method", method, ":scheme", "http", ":path", path, ":authority", "a"}, fields...)
	for i := 0; i+1 < len(kv); i += 2 {
		h.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	if err := h.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: h.hb.Bytes(), EndStream: end, EndHeaders: true}); err != nil {
		h.t.Fatal(err)
	}
}

// next reads frames until one on stream id (acknowledging the server's
// SETTINGS on the way) and returns it.
func (h *h2Client) next(id uint32) http2.Frame {
	h.t.Helper()
	for {
		f, err := h.fr.ReadFrame()
		if err != nil {
			h.t.Fatalf("reading a frame: %v", err)
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			h.fr.WriteSettingsAck()
			continue
		}
		if f.Header().StreamID == id {
			return f
		}
	}
}

// TestStalledH2BodyTimesOut: an HTTP/2 stream whose body stops gets 408
// body_timeout after body_timeout (the stream's own read deadline), and
// the upstream never saw the request (the body was being buffered).
func TestStalledH2BodyTimesOut(t *testing.T) {
	rec := newRecorder(t)
	h := start(t, slowConfig(rec, ""))
	c := dialH2(t, h.g.Addr().String())
	start := time.Now()
	c.request(1, "POST", "/x", false, "content-length", "100")
	if err := c.fr.WriteData(1, false, []byte("abc")); err != nil {
		t.Fatal(err)
	}
	f := c.next(1)
	mh, ok := f.(*http2.MetaHeadersFrame)
	if !ok || mh.PseudoValue("status") != "408" {
		t.Fatalf("first frame on the stream: %v, want HEADERS :status 408", f)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("answered after %v", took)
	}
	if n := len(rec.requests()); n != 0 {
		t.Errorf("the upstream saw %d requests, want none", n)
	}
	if f := h.endpointFailures(); f != 0 {
		t.Errorf("endpoint failures %v, want 0", f)
	}
}

// TestSlowReaderOfLargeAnswerIsCut: a client with a small receive window
// that never reads a 64 MiB answer has its connection cut after
// send_timeout; the upstream's request ends (levee drops its connection),
// the slot is free, the endpoint is not blamed.
func TestSlowReaderOfLargeAnswerIsCut(t *testing.T) {
	rec := newRecorder(t)
	h := start(t, slowConfig(rec, ""))
	c := rawDial(t, h.g.Addr().String(), true)
	start := time.Now()
	fmt.Fprint(c, "GET /big/x HTTP/1.1\r\nHost: a\r\n\r\n")
	waitFor(t, "the upstream's request to end", func() bool { return len(rec.requests()) == 1 })
	seen := rec.requests()[0]
	if seen.sendErr == nil || seen.wrote >= bigAnswer {
		t.Errorf("the upstream wrote %d bytes, error %v: want cut short", seen.wrote, seen.sendErr)
	}
	if held := time.Since(start); held > 5*time.Second {
		t.Errorf("upstream request held %v", held)
	}
	waitFor(t, "the slot to be free", func() bool { return h.inflight() == 0 })
	// The client finds the answer cut: what it reads ends short of bigAnswer.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _ := io.Copy(io.Discard, c)
	if n >= bigAnswer {
		t.Errorf("client read %d bytes, want the answer cut short", n)
	}
	if f := h.endpointFailures(); f != 0 {
		t.Errorf("endpoint failures %v, want 0", f)
	}
}

// TestZeroWindowH2StreamIsReset: an HTTP/2 client that opens no flow
// control window (SETTINGS_INITIAL_WINDOW_SIZE 0) gets the head of a small
// answer, and then the stream is reset after the route's send_timeout.
// Meanwhile the answer was complete in levee: the attempt is over and the
// admission slot free while the stream still stands.
func TestZeroWindowH2StreamIsReset(t *testing.T) {
	rec := newRecorder(t)
	h := start(t, slowConfig(rec, ""))
	c := dialH2(t, h.g.Addr().String(), http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	start := time.Now()
	c.request(1, "GET", "/patient/x", true)
	f := c.next(1)
	if mh, ok := f.(*http2.MetaHeadersFrame); !ok || mh.PseudoValue("status") != "200" {
		t.Fatalf("first frame on the stream: %v, want HEADERS :status 200", f)
	}
	waitFor(t, "the slot to be free", func() bool { return h.inflight() == 0 })
	if time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("slot freed only after %v (send_timeout 2s)", time.Since(start))
	}
	f = c.next(1)
	rst, ok := f.(*http2.RSTStreamFrame)
	if !ok {
		t.Fatalf("next frame on the stream: %v, want RST_STREAM", f)
	}
	if took := time.Since(start); took < 2*time.Second || took > 5*time.Second {
		t.Errorf("reset after %v, want after the 2s send_timeout", took)
	}
	t.Logf("reset %v after %v", rst.ErrCode, time.Since(start))
	if f := h.endpointFailures(); f != 0 {
		t.Errorf("endpoint failures %v, want 0", f)
	}
}

// TestZeroWindowH2ReadAhead: a zero-window HTTP/2 client asking for a
// 256 KiB answer, with Content-Length (read whole, within answer_buffer)
// or chunked (relayed, read ahead of the client): either way the upstream
// finishes its answer and the slot is free while the stream still stands,
// long before the route's 2 s send_timeout resets it.
func TestZeroWindowH2ReadAhead(t *testing.T) {
	for _, path := range []string{"/patient/256k-length", "/patient/256k-chunked"} {
		t.Run(path, func(t *testing.T) {
			rec := newRecorder(t)
			h := start(t, slowConfig(rec, ""))
			c := dialH2(t, h.g.Addr().String(), http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			start := time.Now()
			c.request(1, "GET", path, true)
			if mh, ok := c.next(1).(*http2.MetaHeadersFrame); !ok || mh.PseudoValue("status") != "200" {
				t.Fatalf("first frame on the stream: %v, want HEADERS :status 200", mh)
			}
			waitFor(t, "the upstream's answer to end", func() bool { return len(rec.requests()) == 1 })
			if s := rec.requests()[0]; s.sendErr != nil || s.wrote != 256<<10 {
				t.Fatalf("the upstream wrote %d bytes (error %v), want all 256 KiB", s.wrote, s.sendErr)
			}
			waitFor(t, "the slot to be free", func() bool { return h.inflight() == 0 })
			if took := time.Since(start); took > 1500*time.Millisecond {
				t.Fatalf("slot freed only after %v (send_timeout 2s)", took)
			}
			if _, ok := c.next(1).(*http2.RSTStreamFrame); !ok {
				t.Fatal("the stream was not reset after send_timeout")
			}
			if took := time.Since(start); took < 2*time.Second {
				t.Errorf("reset after %v, before the 2s send_timeout: the slot was freed by the reset, not the read-ahead", took)
			}
			if f := h.endpointFailures(); f != 0 {
				t.Errorf("endpoint failures %v, want 0", f)
			}
		})
	}
}

// TestZeroWindowH2LargeAnswerIsReset: the same client asking for 64 MiB:
// the answer streams with the slot held, and send_timeout (300 ms) resets
// the stream, ends the upstream's request and frees the slot.
func TestZeroWindowH2LargeAnswerIsReset(t *testing.T) {
	rec := newRecorder(t)
	h := start(t, slowConfig(rec, ""))
	c := dialH2(t, h.g.Addr().String(), http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	start := time.Now()
	c.request(1, "GET", "/big/x", true)
	for {
		f := c.next(1)
		if _, ok := f.(*http2.RSTStreamFrame); ok {
			break
		}
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("reset after %v, want soon after the 300ms send_timeout", took)
	}
	waitFor(t, "the upstream's request to end", func() bool { return len(rec.requests()) == 1 })
	if s := rec.requests()[0]; s.sendErr == nil {
		t.Errorf("the upstream wrote its whole answer: %+v", s)
	}
	waitFor(t, "the slot to be free", func() bool { return h.inflight() == 0 })
	if f := h.endpointFailures(); f != 0 {
		t.Errorf("endpoint failures %v, want 0", f)
	}
}
