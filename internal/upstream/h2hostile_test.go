package upstream

import (
	"context"
	"errors"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// TestH2HostileEndpoint: against each raw-frame hostile server the
// request fails (the request path then retries it elsewhere), the
// connection is closed or retired, and the reason is counted: the frame
// guard closes PING and SETTINGS floods, reset floods and CONTINUATION
// floods; x/net closes a connection whose header block is past
// MaxHeaderListSize (its own defence, counted as protocol_error); a GOAWAY
// is counted and its connection dropped.
func TestH2HostileEndpoint(t *testing.T) {
	for _, c := range []struct{ mode, reason string }{
		{testkit.H2PingFlood, "ping_flood"},
		{testkit.H2SettingsFlood, "settings_flood"},
		{testkit.H2ResetFlood, "reset_flood"},
		{testkit.H2ContinuationFlood, "continuation_flood"},
		{testkit.H2HugeHeaders, "protocol_error"},
		{testkit.H2GoAwayLoop, "goaway"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			srv := testkit.StartH2Hostile(t, c.mode)
			tr := protoTransport(t, Options{Protocol: ProtoH2C, HTTP2: H2Options{MaxHeaderListSize: 64 << 10}}, nil)
			var mu sync.Mutex
			var reasons []string
			tr.OnH2Error(func(addr, reason string) {
				mu.Lock()
				defer mu.Unlock()
				if addr == srv.Addr {
					reasons = append(reasons, reason)
				}
			})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			start := time.Now()
			_, _, err := h2Forward(ctx, tr, srv.Addr, "/x", "")
			if err == nil {
				t.Fatal("the request through a hostile endpoint succeeded")
			}
			if ctx.Err() != nil {
				t.Fatalf("the request waited out its deadline (%v): the guard did not act", err)
			}
			testkit.Eventually(t, 5*time.Second, func() (bool, string) {
				mu.Lock()
				defer mu.Unlock()
				return slices.Contains(reasons, c.reason) && tr.h2.connCount(srv.Addr) == 0, "reasons " + join(reasons)
			})
			t.Logf("%s: failed in %v (%v); %d frames written by the endpoint; reasons %v", c.mode, time.Since(start).Round(time.Millisecond), err, srv.Frames.Load(), reasons)
		})
	}
}

// TestH2FlowStall: an endpoint that never opens its flow-control window
// stalls an upload only until the attempt's deadline, which ends it as a
// timeout (net.Error), not a hang.
func TestH2FlowStall(t *testing.T) {
	srv := testkit.StartH2Hostile(t, testkit.H2FlowStall)
	tr := protoTransport(t, Options{Protocol: ProtoH2C}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	body := string(make([]byte, 64<<10))
	_, _, err := h2Forward(ctx, tr, srv.Addr, "/upload", body)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
		t.Fatalf("stalled upload: %v, want the deadline", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func join(s []string) string {
	out := ""
	for i, v := range s {
		if i > 0 {
			out += ","
		}
		out += v
	}
	return out
}
