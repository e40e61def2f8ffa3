// Command otlpsink is an OTLP/HTTP trace receiver that discards what it
// is sent, for benchmarks with tracing on (bench/levee-extra.sh starts it
// with LEVEE_TRACING=1): it reads each POST's body, answers 200 with an
// empty ExportTraceServiceResponse (an empty protobuf message) and, on
// SIGTERM or SIGINT, prints how many requests and bytes it took.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:4318", "address to listen on")
	flag.Parse()
	var posts, bytes atomic.Int64
	srv := &http.Server{
		Addr:              *listen,
		ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, 64<<20))
			posts.Add(1)
			bytes.Add(n)
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK)
		}),
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "otlpsink:", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "otlpsink: %d export requests, %d bytes\n", posts.Load(), bytes.Load())
}
