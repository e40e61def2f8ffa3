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

// grpcClient is a TestService client of target (grpcDial).
func grpcClient(t *testing.T, target string, creds credentials.TransportCredentials) testpb.TestServiceClient {
	t.Helper()
	return testpb.NewTestServiceClient(grpcDial(t, target, creds))
}

// grpcDial connects to target over h2c, or with creds when given; the
// connection is closed when the test ends.
func grpcDial(t *testing.T, target string, creds credentials.TransportCredentials) *grpc.ClientConn {
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
	return cc
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

// TestGRPCProxyTLS: the four kinds of RPC from a TLS (ALPN h2) client
// through levee's TLS listener to a TLS upstream (`protocol: http2`).
func TestGRPCProxyTLS(t *testing.T) {
	ca := testkit.NewTestCA(t, "grpc CA")
	dir := t.TempDir()
	backendCert := ca.Issue(t, testkit.Localhost()).TLS
	b := startGRPCBackend(t, &backendCert)
	edge := ca.Issue(t, testkit.Localhost())
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
tls: {cert_file: %s, key_file: %s}
upstreams:
  g: {protocol: http2, tls: {ca_file: %s}, endpoints: [{address: %s}]}
routes:
  - {name: g, match: {path_prefix: /grpc.testing.TestService/}, upstream: g}
`, write("edge.pem", edge.CertPEM), write("edge.key", edge.KeyPEM), write("ca.pem", ca.PEM), b.addr))
	exerciseRPCs(t, grpcClient(t, h.g.Addr().String(), credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})))
}

// TestGRPCRefusals: levee's own refusals reach a real gRPC client as
// gRPC statuses in a trailers-only answer: the code mapped from the
// refusal's HTTP status, levee's reason in grpc-message and in the
// levee-reason header (a status grpc-go made up from an HTTP status would
// say "unexpected HTTP status code"), never a JSON body.
func TestGRPCRefusals(t *testing.T) {
	b := startGRPCBackend(t, nil)
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	dead.Close() // nothing listens there: connections are refused
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  g: {protocol: h2c, endpoints: [{address: %s}]}
  dead: {protocol: h2c, endpoints: [{address: %s}]}
routes:
  - {name: denied, match: {path_prefix: /grpc.testing.TestService/EmptyCall}, upstream: g, access: {deny: [127.0.0.0/8]}}
  - {name: keyed, match: {path_prefix: /grpc.testing.TestService/CacheableUnaryCall}, upstream: g, auth: api_key}
  - {name: limited, match: {path_prefix: /grpc.testing.TestService/StreamingOutputCall}, upstream: g, anonymous_limits: {rate: 0.001, burst: 1}}
  - {name: small, match: {path_prefix: /grpc.testing.TestService/StreamingInputCall}, upstream: g, max_body_bytes: 64}
  - {name: down, match: {path_prefix: /grpc.testing.TestService/HalfDuplexCall}, upstream: dead}
  - {name: g, match: {path_prefix: /grpc.testing.TestService/UnaryCall}, upstream: g}
`, b.addr, deadAddr))
	c := grpcClient(t, h.g.Addr().String(), nil)
	ctx := rpcCtx(t)
	check := func(name string, err error, md metadata.MD, code codes.Code, reason string) {
		t.Helper()
		st := status.Convert(err)
		if st.Code() != code || !strings.HasPrefix(st.Message(), "levee "+reason) {
			t.Errorf("%s: %v %q, want %v from levee's %s", name, st.Code(), st.Message(), code, reason)
		}
		if got := md.Get("levee-reason"); len(got) != 1 || got[0] != reason {
			t.Errorf("%s: levee-reason %q", name, got)
		}
	}
	var md metadata.MD
	_, err = c.EmptyCall(ctx, &testpb.Empty{}, grpc.Trailer(&md))
	check("address denied", err, md, codes.PermissionDenied, "address_denied")
	_, err = c.CacheableUnaryCall(ctx, &testpb.SimpleRequest{}, grpc.Trailer(&md))
	check("no credentials", err, md, codes.Unauthenticated, "unauthenticated")
	_, err = testpb.NewUnimplementedServiceClient(grpcDial(t, h.g.Addr().String(), nil)).UnimplementedCall(ctx, &testpb.Empty{}, grpc.Trailer(&md))
	check("no route", err, md, codes.Unimplemented, "no_route")
	// The rate limit: the first call passes, the second is refused.
	for i := range 2 {
		ss, err := c.StreamingOutputCall(ctx, &testpb.StreamingOutputCallRequest{ResponseParameters: []*testpb.ResponseParameters{{Size: 1}}})
		if err == nil {
			_, err = ss.Recv()
			md = ss.Trailer()
		}
		if i == 0 && err != nil {
			t.Fatalf("first call under the rate limit: %v", err)
		}
		if i == 1 {
			check("rate limited", err, md, codes.ResourceExhausted, "rate_limited")
		}
	}
	cs, err := c.StreamingInputCall(ctx)
	if err == nil {
		_ = cs.Send(&testpb.StreamingInputCallRequest{Payload: &testpb.Payload{Body: make([]byte, 1000)}})
		_, err = cs.CloseAndRecv()
		md = cs.Trailer()
	}
	check("body too large", err, md, codes.ResourceExhausted, "body_too_large")
	hs, err := c.HalfDuplexCall(ctx)
	if err == nil {
		_ = hs.CloseSend()
		_, err = hs.Recv()
		md = hs.Trailer()
	}
	check("upstream down", err, md, codes.Unavailable, "upstream_unavailable")
	// The same refusal to a plain HTTP client is still JSON.
	resp := h.get("/grpc.testing.TestService/EmptyCall")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(body), `"reason":"address_denied"`) {
		t.Errorf("plain HTTP: %d %s", resp.StatusCode, body)
	}
	if b.svc.calls.Load() != 0 {
		t.Errorf("%d calls reached the backend", b.svc.calls.Load())
	}
}

// TestGRPCDeadline: grpc-timeout is the call's deadline, bounded by the
// route's timeout, and goes upstream as the time left; when levee's
// deadline passes first the client gets DEADLINE_EXCEEDED long before its
// own.
func TestGRPCDeadline(t *testing.T) {
	b := startGRPCBackend(t, nil)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  g: {protocol: h2c, endpoints: [{address: %s}]}
routes:
  - {name: short, match: {path_prefix: /grpc.testing.TestService/UnaryCall}, upstream: g, timeout: 300ms}
  - {name: long, match: {path_prefix: /}, upstream: g}
`, b.addr))
	c := grpcClient(t, h.g.Addr().String(), nil)
	// The client's 20 s against the route's 300 ms: the route's wins.
	began := time.Now()
	_, err := c.UnaryCall(rpcCtx(t), &testpb.SimpleRequest{FillServerId: true})
	took := time.Since(began)
	if st := status.Convert(err); st.Code() != codes.DeadlineExceeded || took > 5*time.Second {
		t.Fatalf("after %v: %v %q, want DEADLINE_EXCEEDED at about 300ms", took, st.Code(), st.Message())
	}
	if d := time.Duration(b.svc.deadline.Load()); d <= 0 || d > 300*time.Millisecond {
		t.Errorf("the upstream's deadline was %v, want at most 300ms", d)
	}
	// Without a route timeout the client's own goes upstream, less the
	// time already spent.
	h2 := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  g: {protocol: h2c, endpoints: [{address: %s}]}
routes:
  - {name: g, match: {path_prefix: /}, upstream: g}
`, b.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := grpcClient(t, h2.g.Addr().String(), nil).UnaryCall(ctx, &testpb.SimpleRequest{}); err != nil {
		t.Fatal(err)
	}
	if d := time.Duration(b.svc.deadline.Load()); d <= time.Second || d > 3*time.Second {
		t.Errorf("the upstream's deadline was %v, want the client's 3s less the way there", d)
	}
}

// TestGRPCRetryByStatus: with retry.on naming unavailable, a call an
// endpoint answers UNAVAILABLE (trailers-only) is sent again, its body
// kept as it streamed, to the other endpoint, and succeeds; a status the
// policy does not name (NOT_FOUND) goes to the client at once.
func TestGRPCRetryByStatus(t *testing.T) {
	busy, good := startGRPCBackend(t, nil), startGRPCBackend(t, nil)
	busy.svc.unavailable.Store(1 << 30)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  g:
    protocol: h2c
    endpoints: [{address: %s}, {address: %s}]
    retry: {attempts: 2, on: [unavailable], backoff: {base: 1ms, max: 1ms}, budget: {ratio: 1, min_per_second: 100}}
routes:
  - {name: g, match: {path_prefix: /}, upstream: g}
`, busy.addr, good.addr))
	c := grpcClient(t, h.g.Addr().String(), nil)
	ctx := rpcCtx(t)
	payload := bytes.Repeat([]byte("k"), 10000)
	for i := range 20 {
		resp, err := c.UnaryCall(ctx, &testpb.SimpleRequest{Payload: &testpb.Payload{Body: payload}})
		if err != nil || !bytes.Equal(resp.GetPayload().GetBody(), payload) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if busy.svc.calls.Load() == 0 {
		t.Fatal("no call went to the busy endpoint first: the retry was not exercised")
	}
	m := testkit.Scrape(t, h.admin+"/metrics")
	if v := m.Value(t, `levee_retries_total{reason="grpc_unavailable",upstream="g"}`); v != float64(busy.svc.calls.Load()) {
		t.Errorf("%v retries counted for %d UNAVAILABLE answers", v, busy.svc.calls.Load())
	}
	before := good.svc.calls.Load() + busy.svc.calls.Load()
	_, err := c.UnaryCall(ctx, &testpb.SimpleRequest{ResponseStatus: &testpb.EchoStatus{Code: int32(codes.NotFound), Message: "nope"}})
	if st := status.Convert(err); st.Code() != codes.NotFound && st.Code() != codes.Unavailable {
		t.Errorf("NOT_FOUND: %v %q", st.Code(), st.Message())
	}
	if n := good.svc.calls.Load() + busy.svc.calls.Load() - before; n > 2 {
		t.Errorf("%d attempts", n)
	}
}

// TestGRPCRetryStorm: every endpoint answers UNAVAILABLE to many clients
// at once; the retry budget (ratio 0.1, no floor) sheds the retries, so
// the endpoints see about one attempt per call, not three, and each
// client gets the upstream's own status.
func TestGRPCRetryStorm(t *testing.T) {
	b1, b2 := startGRPCBackend(t, nil), startGRPCBackend(t, nil)
	b1.svc.unavailable.Store(1 << 30)
	b2.svc.unavailable.Store(1 << 30)
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  g:
    protocol: h2c
    endpoints: [{address: %s}, {address: %s}]
    retry: {attempts: 3, on: [unavailable], backoff: {base: 1ms, max: 2ms}, budget: {ratio: 0.1, min_per_second: 0}}
routes:
  - {name: g, match: {path_prefix: /}, upstream: g}
`, b1.addr, b2.addr))
	const clients, calls = 8, 25
	errs := make(chan error, clients*calls)
	done := make(chan struct{})
	for range clients {
		go func() {
			defer func() { done <- struct{}{} }()
			c := grpcClient(t, h.g.Addr().String(), nil)
			for range calls {
				_, err := c.UnaryCall(context.Background(), &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("x")}})
				errs <- err
			}
		}()
	}
	for range clients {
		select {
		case <-done:
		case <-time.After(60 * time.Second):
			t.Fatal("the clients did not finish")
		}
	}
	close(errs)
	for err := range errs {
		if st := status.Convert(err); st.Code() != codes.Unavailable || st.Message() != "backend busy" {
			t.Fatalf("a client got %v %q, want the upstream's UNAVAILABLE", st.Code(), st.Message())
		}
	}
	attempts := b1.svc.calls.Load() + b2.svc.calls.Load()
	t.Logf("%d calls made %d attempts", clients*calls, attempts)
	if limit := int64(clients * calls * 13 / 10); attempts > limit {
		t.Errorf("%d attempts for %d calls: the budget did not shed the retries (at most %d)", attempts, clients*calls, limit)
	}
	m := testkit.Scrape(t, h.admin+"/metrics")
	if v := m.Value(t, `levee_retry_budget_exhausted_total{upstream="g"}`); v == 0 {
		t.Error("no retry was refused by the budget")
	}
}
