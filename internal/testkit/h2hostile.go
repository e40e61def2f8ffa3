package testkit

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Hostile HTTP/2 upstreams: a clear-text (h2c, prior knowledge) server of
// raw frames, written with x/net/http2's Framer, that misbehaves in one
// way per mode. It reads the client's preface and frames, sends its
// SETTINGS, then:
const (
	// H2SettingsFlood sends SETTINGS frames without end.
	H2SettingsFlood = "settings_flood"
	// H2PingFlood sends PING frames without end.
	H2PingFlood = "ping_flood"
	// H2ResetFlood answers every request with RST_STREAM, sent 64 times.
	H2ResetFlood = "reset_flood"
	// H2ContinuationFlood answers with a HEADERS frame without
	// END_HEADERS and empty CONTINUATION frames without end.
	H2ContinuationFlood = "continuation_flood"
	// H2HugeHeaders answers with one header block of 96 KiB of fields
	// (past a MAX_HEADER_LIST_SIZE of 64 KiB), in 16 KiB frames (the
	// largest x/net's client reads by default): a HEADERS frame and six
	// CONTINUATIONs.
	H2HugeHeaders = "huge_headers"
	// H2GoAwayLoop answers every new connection's first request with
	// GOAWAY and closes it.
	H2GoAwayLoop = "goaway"
	// H2FlowStall never sends WINDOW_UPDATE and answers nothing: an
	// upload stalls once the initial window is spent.
	H2FlowStall = "flow_stall"
)

// H2Hostile is a running hostile server.
type H2Hostile struct {
	Addr string
	// Conns counts the connections accepted.
	Conns atomic.Int64
	// Frames counts the frames written (floods included).
	Frames atomic.Int64
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex
	open   map[net.Conn]bool
}

// h2FloodCap bounds the frames one flood writes on one connection (the
// client closes far earlier; the cap only ends a test gone wrong).
const h2FloodCap = 1 << 20

// StartH2Hostile starts a hostile server in mode on 127.0.0.1, stopped at
// the test's end (its connections closed, its goroutines waited for).
func StartH2Hostile(t testing.TB, mode string) *H2Hostile {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &H2Hostile{Addr: ln.Addr().String(), ln: ln, open: map[net.Conn]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.Conns.Add(1)
			s.mu.Lock()
			s.open[c] = true
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer func() {
					s.mu.Lock()
					delete(s.open, c)
					s.mu.Unlock()
					c.Close()
				}()
				s.serve(c, mode)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.open {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *H2Hostile) serve(c net.Conn, mode string) {
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // bounds a connection of a test gone wrong
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(c, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(c, c)
	fr.SetMaxReadFrameSize(1 << 20)
	settings := []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 100}}
	if mode == H2FlowStall {
		settings = append(settings, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1024})
	}
	var wmu sync.Mutex // frames are written by this goroutine and the flood's
	write := func(f func() error) bool {
		wmu.Lock()
		defer wmu.Unlock()
		s.Frames.Add(1)
		return f() == nil
	}
	if !write(func() error { return fr.WriteSettings(settings...) }) {
		return
	}
	switch mode {
	case H2SettingsFlood, H2PingFlood:
		go func() {
			for i := 0; i < h2FloodCap; i++ {
				ok := write(func() error {
					if mode == H2PingFlood {
						return fr.WritePing(false, [8]byte{byte(i)})
					}
					return fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 100})
				})
				if !ok {
					return
				}
			}
		}()
	}
	for range h2FloodCap { // each pass reads one frame
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		h, ok := f.(*http2.HeadersFrame)
		if !ok {
			continue
		}
		id := h.StreamID
		switch mode {
		case H2ResetFlood:
			for range 64 {
				if !write(func() error { return fr.WriteRSTStream(id, http2.ErrCodeInternal) }) {
					return
				}
			}
		case H2ContinuationFlood:
			block := encodeHeaders(":status", "200")
			if !write(func() error {
				return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: block, EndHeaders: false})
			}) {
				return
			}
			for range h2FloodCap {
				if !write(func() error { return fr.WriteContinuation(id, false, nil) }) {
					return
				}
			}
		case H2HugeHeaders:
			fields := []string{":status", "200"}
			for i := range 6 {
				fields = append(fields, "x-big-"+string(rune('a'+i%26))+string(rune('a'+i/26)), string(bytes.Repeat([]byte("v"), 16<<10)))
			}
			block := encodeHeaders(fields...)
			first := true
			for len(block) > 0 {
				n := min(len(block), 16<<10)
				frag, last := block[:n], n == len(block)
				block = block[n:]
				ok := write(func() error {
					if first {
						return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: frag, EndHeaders: last, EndStream: true})
					}
					return fr.WriteContinuation(id, last, frag)
				})
				if !ok {
					return
				}
				first = false
			}
		case H2GoAwayLoop:
			write(func() error { return fr.WriteGoAway(0, http2.ErrCodeNo, nil) })
			return
		}
	}
}

// encodeHeaders HPACK-encodes name, value pairs.
func encodeHeaders(kv ...string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for i := 0; i+1 < len(kv); i += 2 {
		_ = enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return buf.Bytes()
}
