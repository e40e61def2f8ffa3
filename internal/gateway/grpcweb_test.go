package gateway

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/grpcweb"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// countStream registers levee.test.Stream/Count on srv: a server stream
// of n HealthCheckResponse messages (n the request's service field), each
// sent only after the test takes the previous one's turn from next (so an
// answer buffered anywhere stalls the test), then trailer x-count: n.
func countStream(next chan struct{}) func(*grpc.Server) {
	return func(srv *grpc.Server) {
		srv.RegisterService(&grpc.ServiceDesc{
			ServiceName: "levee.test.Stream",
			HandlerType: (*any)(nil),
			Streams: []grpc.StreamDesc{{StreamName: "Count", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
				var req healthpb.HealthCheckRequest
				if err := ss.RecvMsg(&req); err != nil {
					return err
				}
				n, _ := strconv.Atoi(req.Service)
				for i := range n {
					if i > 0 {
						select {
						case <-next:
						case <-ss.Context().Done():
							return ss.Context().Err()
						}
					}
					if err := ss.SendMsg(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_ServingStatus(i % 4)}); err != nil {
						return err
					}
				}
				ss.SetTrailer(metadata.Pairs("x-count", req.Service))
				return nil
			}}},
		}, struct{}{})
	}
}

// webFrame is a gRPC-Web (and gRPC) message frame around m.
func webFrame(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{0, byte(len(b) >> 24), byte(len(b) >> 16), byte(len(b) >> 8), byte(len(b))}, b...)
}

// decodeGroups decodes base64 text in 4-character groups, each on its own
// (padding may close any of them), as a gRPC-Web client does.
func decodeGroups(t *testing.T, s string) []byte {
	t.Helper()
	if len(s)%4 != 0 {
		t.Fatalf("text answer of %d characters, not whole groups: %q", len(s), s)
	}
	var out []byte
	for i := 0; i < len(s); i += 4 {
		b, err := base64.StdEncoding.DecodeString(s[i : i+4])
		if err != nil {
			t.Fatalf("group %q: %v", s[i:i+4], err)
		}
		out = append(out, b...)
	}
	return out
}

// webAnswer is a gRPC-Web answer read frame by frame: its messages and
// the trailers of its trailer frame (which must end it).
type webAnswer struct {
	resp     *http.Response
	messages [][]byte
	trailers http.Header
}

func readWebAnswer(t *testing.T, resp *http.Response, r io.Reader) webAnswer {
	t.Helper()
	a := webAnswer{resp: resp}
	for range 100 {
		flag, p, err := grpcweb.ReadFrame(r, 1<<20)
		if err != nil {
			t.Fatalf("frame %d: %v", len(a.messages), err)
		}
		if flag == 0x80 {
			if a.trailers, err = grpcweb.ParseTrailers(p); err != nil {
				t.Fatalf("trailer frame %q: %v", p, err)
			}
			if rest, _ := io.ReadAll(r); len(rest) != 0 {
				t.Fatalf("%d bytes after the trailer frame", len(rest))
			}
			return a
		}
		a.messages = append(a.messages, p)
	}
	t.Fatal("no trailer frame in 100 frames")
	return a
}

// webCall posts a gRPC-Web request of body (content type ct) to path
// through levee and reads the answer; text answers are decoded first.
func webCall(t *testing.T, h *harness, path, ct string, body []byte) webAnswer {
	t.Helper()
	if strings.Contains(ct, "-text") {
		body = []byte(base64.StdEncoding.EncodeToString(body))
	}
	req, _ := http.NewRequest(http.MethodPost, h.base+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	req.Header.Set("X-Grpc-Web", "1")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %d %s", path, ct, resp.StatusCode, b)
	}
	var r io.Reader = resp.Body
	if strings.Contains(ct, "-text") {
		all, _ := io.ReadAll(resp.Body)
		r = bytes.NewReader(decodeGroups(t, string(all)))
	}
	return readWebAnswer(t, resp, r)
}

func grpcWebLevee(t *testing.T, e *grpcEndpoint, extra string) *harness {
	t.Helper()
	return start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  g:
    protocol: h2c
    endpoints: [{address: %s}]
routes:
  - {name: r, match: {path_prefix: /}, upstream: g%s}
`, e.addr, extra))
}

// TestGRPCWebUnary (issue 24.3): raw gRPC-Web requests, binary and text,
// go through levee to a real grpc-go server as gRPC: the answer's message
// is the server's, its content type gRPC-Web's, and the trailer frame at
// the end of the body holds grpc-status 0; an upstream error (NOT_FOUND
// for an unknown service, a trailers-only gRPC answer) arrives as the
// trailer frame's grpc-status and grpc-message, not as headers.
func TestGRPCWebUnary(t *testing.T) {
	e := startGRPCEndpoint(t, "a", nil)
	e.health.SetServingStatus("app", healthpb.HealthCheckResponse_NOT_SERVING)
	h := grpcWebLevee(t, e, "")
	for _, ct := range []string{"application/grpc-web", "application/grpc-web+proto", "application/grpc-web-text", "application/grpc-web-text+proto"} {
		t.Run(ct, func(t *testing.T) {
			a := webCall(t, h, "/grpc.health.v1.Health/Check", ct, webFrame(t, &healthpb.HealthCheckRequest{Service: "app"}))
			// grpc-go answers with the request's codec: the same type back.
			if got, wantCT := a.resp.Header.Get("Content-Type"), ct; got != wantCT {
				t.Errorf("content type %q, want %q", got, wantCT)
			}
			if len(a.messages) != 1 {
				t.Fatalf("%d messages", len(a.messages))
			}
			var m healthpb.HealthCheckResponse
			if err := proto.Unmarshal(a.messages[0], &m); err != nil || m.Status != healthpb.HealthCheckResponse_NOT_SERVING {
				t.Errorf("message %v, %v", &m, err)
			}
			if a.trailers.Get("grpc-status") != "0" || a.resp.Header.Get("X-Endpoint") != "a" {
				t.Errorf("trailers %v, headers %v", a.trailers, a.resp.Header)
			}

			a = webCall(t, h, "/grpc.health.v1.Health/Check", ct, webFrame(t, &healthpb.HealthCheckRequest{Service: "nope"}))
			if len(a.messages) != 0 || a.trailers.Get("grpc-status") != "5" || a.trailers.Get("grpc-message") != "unknown service" {
				t.Errorf("unknown service: %d messages, trailers %v", len(a.messages), a.trailers)
			}
			if a.resp.Header.Get("Grpc-Status") != "" {
				t.Errorf("grpc-status in the headers too: %v", a.resp.Header)
			}
		})
	}
}

// TestGRPCWebServerStream: a server stream through levee as gRPC-Web,
// binary and text: each message reaches the client before the server
// sends the next (levee flushes per message; the server waits for the
// test to read one before it sends the next), then the trailer frame with
// the server's trailer and grpc-status 0.
func TestGRPCWebServerStream(t *testing.T) {
	next := make(chan struct{})
	e := startGRPCEndpoint(t, "a", countStream(next))
	h := grpcWebLevee(t, e, "")
	const n = 4
	for _, ct := range []string{"application/grpc-web+proto", "application/grpc-web-text"} {
		t.Run(ct, func(t *testing.T) {
			body := webFrame(t, &healthpb.HealthCheckRequest{Service: strconv.Itoa(n)})
			text := strings.Contains(ct, "-text")
			if text {
				body = []byte(base64.StdEncoding.EncodeToString(body))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/levee.test.Stream/Count", bytes.NewReader(body))
			req.Header.Set("Content-Type", ct)
			resp, err := h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var r io.Reader = resp.Body
			if text {
				r = grpcweb.NewTextDecoder(resp.Body) // the groups as they arrive
			}
			for i := range n {
				flag, p, err := grpcweb.ReadFrame(r, 1<<20)
				if err != nil || flag != 0 {
					t.Fatalf("message %d: flag %x, %v", i, flag, err)
				}
				var m healthpb.HealthCheckResponse
				if err := proto.Unmarshal(p, &m); err != nil || int(m.Status) != i%4 {
					t.Fatalf("message %d: %v, %v", i, &m, err)
				}
				if i < n-1 {
					next <- struct{}{} // the server sends the next only now
				}
			}
			a := readWebAnswer(t, resp, r)
			if len(a.messages) != 0 || a.trailers.Get("grpc-status") != "0" || a.trailers.Get("x-count") != strconv.Itoa(n) {
				t.Errorf("end: %d more messages, trailers %v", len(a.messages), a.trailers)
			}
		})
	}
}
