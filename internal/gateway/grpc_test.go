package gateway

// gRPC end to end through levee: real grpc-go clients and servers (the
// interop suite's TestService, google.golang.org/grpc/interop/grpc_testing),
// over h2 (TLS) and h2c, against `protocol: h2c` and `protocol: http2`
// upstreams.

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/levee-gw/levee/internal/testkit"
)

// grpcService is the backend's TestService: UnaryCall echoes its payload
// (or answers the status it is asked for, with a detail), echoes the
// metadata key x-echo as a header and x-echo-bin as a trailer;
// StreamingOutputCall sends the responses asked for; StreamingInputCall
// sums the payloads; FullDuplexCall answers each message as it comes.
type grpcService struct {
	testpb.UnimplementedTestServiceServer
	calls atomic.Int64
	// unavailable: UnaryCall answers UNAVAILABLE while it is > 0,
	// counting down.
	unavailable atomic.Int64
	// deadline is the last UnaryCall's time left, in nanoseconds.
	deadline atomic.Int64
}

func (s *grpcService) UnaryCall(ctx context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	s.calls.Add(1)
	if dl, ok := ctx.Deadline(); ok {
		s.deadline.Store(int64(time.Until(dl)))
	} else {
		s.deadline.Store(0)
	}
	if s.unavailable.Add(-1) >= 0 {
		return nil, status.Error(codes.Unavailable, "backend busy")
	}
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("x-echo"); len(v) > 0 {
		_ = grpc.SetHeader(ctx, metadata.Pairs("x-echo", v[0]))
	}
	if v := md.Get("x-echo-bin"); len(v) > 0 {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-echo-bin", v[0]))
	}
	if st := in.GetResponseStatus(); st != nil {
		sp := status.New(codes.Code(st.Code), st.Message)
		if d, err := sp.WithDetails(durationpb.New(42 * time.Second)); err == nil {
			sp = d
		}
		return nil, sp.Err()
	}
	if in.GetFillServerId() { // "sleep": wait for the client's deadline
		<-ctx.Done()
		return nil, status.FromContextError(ctx.Err()).Err()
	}
	body := in.GetPayload().GetBody()
	if n := in.GetResponseSize(); n > 0 {
		body = bytes.Repeat([]byte{'r'}, int(n))
	}
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: body}}, nil
}

func (s *grpcService) StreamingOutputCall(in *testpb.StreamingOutputCallRequest, stream testpb.TestService_StreamingOutputCallServer) error {
	for _, p := range in.GetResponseParameters() {
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: &testpb.Payload{Body: bytes.Repeat([]byte{'s'}, int(p.GetSize()))}}); err != nil {
			return err
		}
	}
	stream.SetTrailer(metadata.Pairs("x-sent", fmt.Sprint(len(in.GetResponseParameters()))))
	return nil
}

func (s *grpcService) StreamingInputCall(stream testpb.TestService_StreamingInputCallServer) error {
	total := 0
	for {
		in, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&testpb.StreamingInputCallResponse{AggregatedPayloadSize: int32(total)})
		}
		if err != nil {
			return err
		}
		total += len(in.GetPayload().GetBody())
	}
}

func (s *grpcService) FullDuplexCall(stream testpb.TestService_FullDuplexCallServer) error {
	for {
		in, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := stream.Send(&testpb.StreamingOutputCallResponse{Payload: in.GetPayload()}); err != nil {
			return err
		}
	}
}

// grpcBackend is a real grpc-go server on loopback, clear text (h2c) or
// TLS when cert is given.
type grpcBackend struct {
	addr string
	svc  *grpcService
}

func startGRPCBackend(t *testing.T, cert *tls.Certificate) *grpcBackend {
	t.Helper()
	opts := []grpc.ServerOption{grpc.MaxRecvMsgSize(8 << 20), grpc.MaxSendMsgSize(8 << 20)}
	if cert != nil {
		opts = append(opts, grpc.Creds(credentials.NewServerTLSFromCert(cert)))
	}
	srv := grpc.NewServer(opts...)
	b := &grpcBackend{svc: &grpcService{}}
	testpb.RegisterTestServiceServer(srv, b.svc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	b.addr = ln.Addr().String()
	return b
}

// grpcClient dials target (h2c, or TLS trusting pool when pool is given).
func grpcClient(t *testing.T, target string, creds credentials.TransportCredentials) testpb.TestServiceClient {
	t.Helper()
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	cc, err := grpc.NewClient("passthrough:///"+target, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8<<20), grpc.MaxCallSendMsgSize(8<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testpb.NewTestServiceClient(cc)
}

func rpcCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// exerciseRPCs runs the four kinds of RPC through c and checks each.
func exerciseRPCs(t *testing.T, c testpb.TestServiceClient) {
	t.Helper()
	ctx := rpcCtx(t)
	// Unary, with metadata both ways and a 4 MB message each way.
	big := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16)
	var hdr, trl metadata.MD
	octx := metadata.AppendToOutgoingContext(ctx, "x-echo", "hello", "x-echo-bin", string([]byte{0, 1, 2, 0xff}))
	resp, err := c.UnaryCall(octx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: big}, ResponseSize: 4 << 20},
		grpc.Header(&hdr), grpc.Trailer(&trl))
	if err != nil {
		t.Fatalf("unary: %v", err)
	}
	if len(resp.GetPayload().GetBody()) != 4<<20 {
		t.Errorf("unary: %d bytes back", len(resp.GetPayload().GetBody()))
	}
	if got := hdr.Get("x-echo"); len(got) != 1 || got[0] != "hello" {
		t.Errorf("unary: header x-echo %q", got)
	}
	if got := trl.Get("x-echo-bin"); len(got) != 1 || got[0] != string([]byte{0, 1, 2, 0xff}) {
		t.Errorf("unary: trailer x-echo-bin %q", got)
	}
	// The upstream's own status, message and details, unchanged.
	_, err = c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.NotFound), Message: "no such thing: 100% gone"}})
	st := status.Convert(err)
	if st.Code() != codes.NotFound || st.Message() != "no such thing: 100% gone" || len(st.Details()) != 1 {
		t.Errorf("unary status: %v %q %v", st.Code(), st.Message(), st.Details())
	} else if d, ok := st.Details()[0].(*durationpb.Duration); !ok || d.AsDuration() != 42*time.Second {
		t.Errorf("unary status detail: %v", st.Details()[0])
	}
	// Server streaming.
	ss, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 10}, {Size: 1 << 20}, {Size: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	var sizes []int
	for {
		m, err := ss.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("server stream: %v", err)
		}
		sizes = append(sizes, len(m.GetPayload().GetBody()))
	}
	if fmt.Sprint(sizes) != "[10 1048576 3]" || fmt.Sprint(ss.Trailer().Get("x-sent")) != "[3]" {
		t.Errorf("server stream: %v, trailer %v", sizes, ss.Trailer())
	}
	// Client streaming, 4 MB up in pieces.
	cs, err := c.StreamingInputCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := cs.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: big[:1<<20]}}); err != nil {
			t.Fatal(err)
		}
	}
	sum, err := cs.CloseAndRecv()
	if err != nil || sum.GetAggregatedPayloadSize() != 4<<20 {
		t.Errorf("client stream: %v %v", sum, err)
	}
	// Bidi ping-pong: each answer arrives before the next message is
	// sent, which a proxy buffering either direction could not do.
	bs, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		msg := fmt.Sprintf("ping %d", i)
		if err := bs.Send(&testpb.StreamingOutputCallRequest{Payload: &testpb.Payload{Body: []byte(msg)}}); err != nil {
			t.Fatal(err)
		}
		m, err := bs.Recv()
		if err != nil || string(m.GetPayload().GetBody()) != msg {
			t.Fatalf("bidi %d: %q %v", i, m.GetPayload().GetBody(), err)
		}
	}
	if err := bs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := bs.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("bidi end: %v", err)
	}
}

var _ = anypb.Any{}
var _ = strings.Repeat
var _ = os.WriteFile
var _ = filepath.Join
var _ = testkit.Eventually

// TestGRPCProxyH2C: the four kinds of RPC from an h2c client through levee
// to an h2c upstream.
func TestGRPCProxyH2C(t *testing.T) {
	b := startGRPCBackend(t, nil)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  g: {protocol: h2c, endpoints: [{address: %s}]}
routes:
  - {name: g, match: {path_prefix: /}, upstream: g}
`, b.addr))
	exerciseRPCs(t, grpcClient(t, h.g.Addr().String(), nil))
}
