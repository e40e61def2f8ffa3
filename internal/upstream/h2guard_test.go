package upstream

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// frame returns an HTTP/2 frame header for a payload of n bytes, then the
// payload (zeros).
func frame(typ, flags byte, n int) []byte {
	b := []byte{byte(n >> 16), byte(n >> 8), byte(n), typ, flags, 0, 0, 0, 1}
	return append(b, make([]byte, n)...)
}

func frames(fs ...[]byte) []byte { return bytes.Join(fs, nil) }

// TestH2FrameScan: each limit trips at the frame past it, whatever the
// split of the stream into reads, and returns the bytes before that frame
// (and those of its header an earlier read already passed); ACKs, HEADERS between resets and a new window reset the counts.
func TestH2FrameScan(t *testing.T) {
	rep := func(n int, f []byte) []byte { return bytes.Repeat(f, n) }
	cases := []struct {
		name   string
		stream []byte
		reason string
		keep   int // bytes passed before the offending frame
	}{
		{"settings then data", frames(frame(h2Settings, 0, 6), frame(0, 0, 100)), "", -1},
		{"33 pings", rep(33, frame(h2Ping, 0, 8)), "ping_flood", 32 * 17},
		{"pings acked", rep(100, frame(h2Ping, h2FlagAck, 8)), "", -1},
		{"33 settings", rep(33, frame(h2Settings, 0, 0)), "settings_flood", 32 * 9},
		{"33 resets", rep(33, frame(h2RSTStream, 0, 4)), "reset_flood", 32 * 13},
		{"resets with answers", rep(40, frames(frame(h2RSTStream, 0, 4), frame(h2Headers, h2FlagEndHdrs, 3))), "", -1},
		{"9 continuations", frames(frame(h2Headers, 0, 3), rep(9, frame(h2Continuation, 0, 0))), "continuation_flood", 12 + 8*9},
		{"8 continuations", frames(frame(h2Headers, 0, 3), rep(7, frame(h2Continuation, 0, 0)), frame(h2Continuation, h2FlagEndHdrs, 0), rep(20, frame(h2Continuation, 0, 0))), "", -1},
	}
	for _, c := range cases {
		for _, chunk := range []int{1, 5, 9, 64, len(c.stream)} {
			s := h2FrameScan{now: func() time.Time { return time.Unix(0, 0) }}
			passed, reason := 0, ""
			for off := 0; off < len(c.stream) && reason == ""; off += chunk {
				p := c.stream[off:min(off+chunk, len(c.stream))]
				n, r, _ := s.scan(p)
				passed += n
				reason = r
			}
			// Bytes of the offending frame's header that came in an
			// earlier read were passed with it (no read-ahead).
			if reason != c.reason || (c.keep >= 0 && (passed < c.keep || passed >= c.keep+h2HeaderLen)) {
				t.Errorf("%s, reads of %d: reason %q after %d bytes, want %q after %d", c.name, chunk, reason, passed, c.reason, c.keep)
			}
		}
	}
	// A new window restarts the count.
	now := time.Unix(0, 0)
	s := h2FrameScan{now: func() time.Time { return now }, start: now}
	for i := range 100 {
		if i%20 == 0 {
			now = now.Add(h2GuardWindow)
		}
		if _, r, _ := s.scan(frame(h2Ping, 0, 8)); r != "" {
			t.Fatalf("ping %d at 20 a window: %s", i, r)
		}
	}
}

// TestH2GuardPacedPings: a PING that follows traffic of levee's own (a
// gRPC server's BDP ping after each request) is not counted; one that
// only levee's ACKs answered is, so a flood still trips the guard.
func TestH2GuardPacedPings(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	g := newH2ClientGuard(a, func(string) {})
	go io.Copy(io.Discard, b)
	ack := frame(h2Ping, h2FlagAck, 8)
	for i := range 200 { // a request's frames, then the endpoint's PING
		if _, err := g.Write(frame(0x0, 0, 100)); err != nil {
			t.Fatal(err)
		}
		if _, r, _ := g.scan.scan(frame(h2Ping, 0, 8)); r != "" {
			t.Fatalf("paced ping %d: %s", i, r)
		}
		if _, err := g.Write(ack); err != nil {
			t.Fatal(err)
		}
	}
	reason := ""
	for i := 0; i < 100 && reason == ""; i++ { // PINGs answered only by ACKs
		_, reason, _ = g.scan.scan(frame(h2Ping, 0, 8))
		if _, err := g.Write(frames(ack, frame(h2Settings, h2FlagAck, 0))); err != nil {
			t.Fatal(err)
		}
	}
	if reason != "ping_flood" {
		t.Fatalf("unpaced pings: %q", reason)
	}
	for p, want := range map[string]bool{
		string(ack): true, string(frames(ack, ack)): true, string(frame(h2Settings, h2FlagAck, 0)): true,
		"": false, string(frame(h2Ping, 0, 8)): false, string(ack[:10]): false, string(frames(ack, frame(0x0, 0, 1))): false,
	} {
		if got := acksOnly([]byte(p)); got != want {
			t.Errorf("acksOnly(%x) = %v", p, got)
		}
	}
}

// FuzzH2FrameScan: any byte stream, in any split, is scanned without
// panic; the bytes passed never exceed the input and a limit, once hit,
// is reported with the offset of a frame start within the read.
func FuzzH2FrameScan(f *testing.F) {
	f.Add(frames(frame(h2Settings, 0, 6), frame(h2Ping, 0, 8)), 3)
	f.Add(bytes.Repeat(frame(h2Continuation, 0, 0), 12), 7)
	f.Add(frames(frame(h2Headers, 0, 3), bytes.Repeat(frame(h2Continuation, 0, 0), 12)), 1)
	f.Add([]byte{0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0}, 2)
	f.Fuzz(func(t *testing.T, data []byte, chunk int) {
		if chunk <= 0 || chunk > len(data)+1 {
			chunk = len(data) + 1
		}
		s := h2FrameScan{now: func() time.Time { return time.Unix(0, 0) }}
		for off := 0; off < len(data); off += chunk {
			p := data[off:min(off+chunk, len(data))]
			n, r, _ := s.scan(p)
			if n < 0 || n > len(p) {
				t.Fatalf("passed %d of %d bytes", n, len(p))
			}
			if r != "" {
				return
			}
			if n != len(p) {
				t.Fatalf("passed %d of %d bytes with no reason", n, len(p))
			}
		}
	})
}
