//go:build !race

package gateway

import (
	"testing"
	"time"
)

// TestUpstreamTLSRotationUnderLoad: five rotations of an mTLS upstream's
// files (CA bundle, client certificate and key), each applied by a reload
// through the admin API and followed by the upstream presenting a new
// certificate, while 8 clients keep requesting: no request fails, and the
// upstream ends up seeing the last client certificate.
func TestUpstreamTLSRotationUnderLoad(t *testing.T) {
	r := newRotation(t)
	load := startLoad(r.h, 8, time.Millisecond)
	defer load.stop()
	time.Sleep(300 * time.Millisecond) // load before the first rotation (a measured run, not a wait for a state)
	for range 5 {
		r.rotate(t)
		time.Sleep(300 * time.Millisecond) // load between rotations
	}
	load.stop()
	sent, failed := load.sent.Load(), load.failed.Load()
	t.Logf("rotations %d, requests %d, failed %d", r.rotations, sent, failed)
	if failed != 0 {
		t.Fatalf("%d of %d requests failed across the rotations; first: %v", failed, sent, load.firstErr.Load())
	}
	if sent < 100 {
		t.Fatalf("only %d requests in 1.8 s: the load did not run", sent)
	}
	resp := r.h.get("/")
	defer resp.Body.Close()
	if got := resp.Header.Get("X-Client-Subject"); got != r.lastClient {
		t.Fatalf("after the rotations the upstream saw %q, want %q", got, r.lastClient)
	}
}
