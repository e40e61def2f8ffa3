package h1server

import (
	"bufio"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// BenchmarkServeTLS is one keep-alive HTTP/1.1 connection over TLS on
// loopback, a request at a time: levee's loop (which serves HTTP/1.1 over
// TLS since it frames strictly) against net/http's ServeTLS (which served
// it before), same handler, same request. Kernel and TLS included.
func BenchmarkServeTLS(b *testing.B) {
	cert := testCertificate(b)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}}
	run := func(b *testing.B, serve func(ln net.Listener) (stop func())) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		stop := serve(ln)
		defer stop()
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		br := bufio.NewReader(c)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := io.WriteString(c, benchRequest); err != nil {
				b.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	shutdown := func(stopFn func(context.Context) error, done chan struct{}) func() {
		return func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			stopFn(ctx)
			<-done
		}
	}
	b.Run("h1server", func(b *testing.B) {
		run(b, func(ln net.Listener) func() {
			p := new(http.Protocols)
			p.SetHTTP1(true)
			p.SetHTTP2(true)
			srv, err := New(Options{Handler: refusalLike, Fallback: &http.Server{Handler: refusalLike, Protocols: p},
				ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, TLSConfig: cfg})
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan struct{})
			go func() { srv.Serve(ln); close(done) }()
			return shutdown(srv.Shutdown, done)
		})
	})
	b.Run("net-http", func(b *testing.B) {
		run(b, func(ln net.Listener) func() {
			srv := &http.Server{Handler: refusalLike, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute, TLSConfig: cfg.Clone()}
			done := make(chan struct{})
			go func() { srv.ServeTLS(ln, "", ""); close(done) }()
			return shutdown(srv.Shutdown, done)
		})
	})
}
