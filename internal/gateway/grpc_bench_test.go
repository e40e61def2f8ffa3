package gateway

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"

	"github.com/levee-gw/levee/internal/config"
)

// BenchmarkGRPCUnary: small unary calls from one client connection,
// directly to the grpc-go server and through levee (h2c both sides), for
// the figure in docs/grpc.md's notes: go test -run '^$' -bench GRPCUnary
// ./internal/gateway/.
func BenchmarkGRPCUnary(b *testing.B) {
	srv := grpc.NewServer()
	svc := &grpcService{}
	testpb.RegisterTestServiceServer(srv, svc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Stop()
	dir := b.TempDir()
	cfg := filepath.Join(dir, "levee.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`state_dir: %s
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  g: {protocol: h2c, endpoints: [{address: %s}]}
routes:
  - {name: g, match: {path_prefix: /}, upstream: g}
`, filepath.Join(dir, "state"), ln.Addr())), 0o600); err != nil {
		b.Fatal(err)
	}
	g, err := New(Options{Load: func() (*config.Config, error) { return config.Load(cfg) }, LogOutput: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = g.Shutdown(ctx)
	}()
	for _, target := range []struct{ name, addr string }{{"direct", ln.Addr().String()}, {"levee", g.Addr().String()}} {
		b.Run(target.name, func(b *testing.B) {
			cc, err := grpc.NewClient("passthrough:///"+target.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			c := testpb.NewTestServiceClient(cc)
			req := &testpb.SimpleRequest{Payload: &testpb.Payload{Body: []byte("hello")}}
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := c.UnaryCall(context.Background(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}
