package gateway

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
	"weak"

	"google.golang.org/grpc"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
)

// TestGRPCStreamAcrossReloads (issue 28, item 4): a bidirectional gRPC
// stream through levee keeps running, message for message and byte for
// byte, across 10 reloads and an apps change; the routing table it began
// on stays alive while it runs and is released once it ends. Each reload
// changes a response header, so each is a new table.
func TestGRPCStreamAcrossReloads(t *testing.T) {
	b := startGRPCBackend(t, nil)
	yaml := func(gen int) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  g: {protocol: h2c, endpoints: [{address: %s}]}
routes:
  - name: g
    match: {path_prefix: /}
    upstream: g
    headers: {response: {set: {X-Generation: "%d"}}}
`, b.addr, gen)
	}
	h := start(t, yaml(0))
	first := weak.Make(h.g.handler.Table())
	c := grpcClient(t, h.g.Addr().String(), nil)
	stream, err := c.FullDuplexCall(rpcCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	src := rand.NewChaCha8([32]byte{'g', 'r', 'p', 'c'})
	sent := 0
	// pingPong sends 3 messages of 32 KiB of pseudo-random bytes, each
	// answered before the next goes: the stream is alive both ways.
	pingPong := func(after string) {
		t.Helper()
		for range 3 {
			msg := make([]byte, 32<<10)
			src.Read(msg)
			if err := stream.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: msg}}); err != nil {
				t.Fatalf("after %s: send %d: %v", after, sent, err)
			}
			m, err := stream.Recv()
			if err != nil {
				t.Fatalf("after %s: receive %d: %v", after, sent, err)
			}
			if !bytes.Equal(m.GetPayload().GetBody(), msg) {
				t.Fatalf("after %s: message %d differs", after, sent)
			}
			sent++
		}
	}
	pingPong("the start")
	for gen := 1; gen <= 10; gen++ {
		h.writeConfig(yaml(gen))
		if err := h.g.Reload(); err != nil {
			t.Fatalf("reload %d: %v", gen, err)
		}
		pingPong(fmt.Sprintf("reload %d", gen))
	}
	req, _ := http.NewRequest("POST", h.admin+"/api/v1/apps", strings.NewReader(`{"id": "grpc-stream-app"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("apps change: %d %s", resp.StatusCode, body)
	}
	pingPong("an apps change")
	// A new call is served by the last table.
	var hdr metadata.MD
	if _, err := c.UnaryCall(rpcCtx(t), &testpb.SimpleRequest{}, grpc.Header(&hdr)); err != nil {
		t.Fatalf("unary after the reloads: %v", err)
	}
	if got := hdr.Get("x-generation"); len(got) != 1 || got[0] != "10" {
		t.Fatalf("a new call after 10 reloads: X-Generation %q, want 10", got)
	}

	runtime.GC()
	if first.Value() == nil {
		t.Fatal("the first table was collected while the stream that began on it still runs")
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("stream end: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for runtime.GC(); first.Value() != nil; runtime.GC() {
		if time.Now().After(deadline) {
			t.Fatal("the first table is still held 10 s after the stream ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%d messages of 32 KiB byte-exact on one bidi stream across 10 reloads and an apps change; the first table released after it ended", sent)
}
