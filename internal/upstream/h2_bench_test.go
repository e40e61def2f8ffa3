package upstream

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkForwardProtocols: levee's transport to a local Go server over
// HTTP/1.1 (fast path for GET) and over h2c (the pool), 8 requests at
// once, a GET with a 1 KiB answer. A throughput figure to compare within
// one run: client and server share the process.
func BenchmarkForwardProtocols(b *testing.B) {
	payload := make([]byte, 1<<10)
	for _, c := range []struct {
		name  string
		proto Protocol
	}{{"http1", ProtoHTTP1}, {"h2c", ProtoH2C}} {
		b.Run(c.name, func(b *testing.B) {
			p := new(http.Protocols)
			p.SetHTTP1(true)
			p.SetUnencryptedHTTP2(true)
			srv := &http.Server{Protocols: p, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(payload) })}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			go srv.Serve(ln)
			defer srv.Close()
			tr := NewTransport(Options{Protocol: c.proto, Connect: time.Second, ResponseHeader: 5 * time.Second, Idle: time.Minute, MaxIdlePerEndpoint: 64})
			defer tr.Close()
			addr := ln.Addr().String()
			b.SetParallelism(4) // × GOMAXPROCS goroutines
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := httptest.NewRequest(http.MethodGet, "/x", nil)
					resp, err := tr.Forward(context.Background(), r, Outbound{Addr: addr, RequestID: "rid"})
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			})
		})
	}
}
