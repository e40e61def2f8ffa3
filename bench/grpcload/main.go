// Command grpcload is bench/grpc-compare.sh's gRPC backend and load
// generator, both grpc-go (the module levee already uses), on the
// grpc.testing.TestService of grpc-go's interop package:
//
//	grpcload serve -listen 127.0.0.1:18191 -size 64
//	grpcload load -target 127.0.0.1:18192 -conns 4 -streams 64 -d 10s
//
// serve answers UnaryCall with a payload of the requested size over h2c.
// load runs -streams closed-loop callers spread over -conns client
// connections (h2c, prior knowledge), each calling UnaryCall with a
// -size payload and asking for a -size answer, for -d after -warmup,
// and prints one line:
//
//	RESULT label=... rps=... requests=... errors=... p50_ms=... p99_ms=... calls=...
//
// requests are the successful calls of the measured time; calls all calls
// that ended, warm-up and errors included (what a CPU bracket around the
// whole run divides by).
//
// Latencies are kept in a fixed histogram per caller (10 us buckets up to
// 100 ms, 1 ms buckets up to 2.1 s, then one overflow bucket: 96 KB), so
// memory does not grow with the run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testpb "google.golang.org/grpc/interop/grpc_testing"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	switch os.Args[1] {
	case "serve":
		serve(os.Args[2:])
	case "load":
		load(os.Args[2:])
	default:
		usage()
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: grpcload serve -listen HOST:PORT | grpcload load -target HOST:PORT [-conns 4] [-streams 64] [-d 10s] [-size 64]")
	os.Exit(2)
}

// maxSize bounds -size and a request's response_size (the backend
// allocates that many bytes per answer).
const maxSize = 4 << 20

type server struct {
	testpb.UnimplementedTestServiceServer
}

func (server) UnaryCall(_ context.Context, in *testpb.SimpleRequest) (*testpb.SimpleResponse, error) {
	n := int(in.GetResponseSize())
	if n < 0 || n > maxSize {
		return nil, errors.New("response_size out of range")
	}
	return &testpb.SimpleResponse{Payload: &testpb.Payload{Body: make([]byte, n)}}, nil
}

func serve(args []string) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:18191", "listen address")
	fs.Parse(args)
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	s := grpc.NewServer()
	testpb.RegisterTestServiceServer(s, server{})
	go func() {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
		<-sig
		s.Stop()
	}()
	fmt.Fprintln(os.Stderr, "grpcload serving on", ln.Addr())
	if err := s.Serve(ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// hist counts latencies in fineStep buckets below fineMax, in
// coarseStep buckets from there to histMax, and above that in the last
// bucket: 12,001 counters (96 KB) per caller.
const (
	fineStep   = 10 * time.Microsecond
	fineMax    = 100 * time.Millisecond
	coarseStep = time.Millisecond
	histMax    = 2100 * time.Millisecond
	fineN      = int(fineMax / fineStep)
	histN      = fineN + int((histMax-fineMax)/coarseStep) + 1
)

type hist [histN]uint64

func (h *hist) add(d time.Duration) {
	var i int
	switch {
	case d < 0:
		i = 0
	case d < fineMax:
		i = int(d / fineStep)
	case d < histMax:
		i = fineN + int((d-fineMax)/coarseStep)
	default:
		i = histN - 1
	}
	h[i]++
}

// upper is bucket i's upper edge.
func upper(i int) time.Duration {
	if i < fineN {
		return time.Duration(i+1) * fineStep
	}
	return fineMax + time.Duration(i-fineN+1)*coarseStep
}

// quantile is the upper edge of the bucket holding the q-th latency, in
// ms (past histMax: histMax, read "at least").
func (h *hist) quantile(total uint64, q float64) float64 {
	want := uint64(q * float64(total))
	var seen uint64
	for i, n := range h {
		seen += n
		if seen > want {
			return float64(min(upper(i), histMax)) / 1e6
		}
	}
	return float64(histMax) / 1e6
}

func load(args []string) {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	target := fs.String("target", "", "host:port (h2c) to call")
	conns := fs.Int("conns", 4, "client connections")
	streams := fs.Int("streams", 64, "concurrent callers, spread over the connections")
	dur := fs.Duration("d", 10*time.Second, "measured time")
	warmup := fs.Duration("warmup", 2*time.Second, "calls before the measured time (not counted)")
	size := fs.Int("size", 64, "request and response payload bytes")
	timeout := fs.Duration("timeout", 2*time.Second, "per call (counted as an error)")
	label := fs.String("label", "", "echoed in the RESULT line")
	fs.Parse(args)
	if *target == "" || *conns < 1 || *streams < *conns || *dur <= 0 || *size < 0 || *size > maxSize {
		usage()
	}
	clients := make([]testpb.TestServiceClient, *conns)
	for i := range clients {
		// One ClientConn is one HTTP/2 connection (grpc-go does not open
		// more for one target): -conns of them.
		cc, err := grpc.NewClient(*target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		defer cc.Close()
		clients[i] = testpb.NewTestServiceClient(cc)
	}
	req := &testpb.SimpleRequest{ResponseSize: int32(*size), Payload: &testpb.Payload{Body: make([]byte, *size)}}
	// Each caller counts into its own histogram (no sharing on the hot
	// path); they are summed at the end.
	hists := make([]hist, *streams)
	var measuring atomic.Bool
	var errs, calls atomic.Uint64 // calls: all that ended, warm-up included
	var firstErr atomic.Value
	stop := time.Now().Add(*warmup + *dur)
	var wg sync.WaitGroup
	for i := range *streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, h := clients[i%len(clients)], &hists[i]
			n := uint64(0)
			defer func() { calls.Add(n) }()
			for time.Now().Before(stop) { // bounded by -warmup + -d
				ctx, cancel := context.WithTimeout(context.Background(), *timeout)
				t0 := time.Now()
				resp, err := c.UnaryCall(ctx, req)
				d := time.Since(t0)
				cancel()
				n++
				if !measuring.Load() {
					continue
				}
				if err == nil && len(resp.GetPayload().GetBody()) != *size {
					err = fmt.Errorf("answer of %d bytes, want %d", len(resp.GetPayload().GetBody()), *size)
				}
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				h.add(d)
			}
		}()
	}
	time.Sleep(*warmup)
	measuring.Store(true)
	start := time.Now()
	wg.Wait()
	elapsed := time.Since(start)
	var sum hist
	var total uint64
	for i := range hists {
		for j, n := range hists[i] {
			sum[j] += n
			total += n
		}
	}
	p50, p99 := "NA", "NA"
	if total > 0 {
		p50, p99 = fmt.Sprintf("%.3f", sum.quantile(total, 0.5)), fmt.Sprintf("%.3f", sum.quantile(total, 0.99))
	}
	fmt.Printf("RESULT label=%s rps=%.0f requests=%d errors=%d p50_ms=%s p99_ms=%s calls=%d\n",
		*label, float64(total)/elapsed.Seconds(), total, errs.Load(), p50, p99, calls.Load())
	if e, ok := firstErr.Load().(string); ok {
		fmt.Fprintln(os.Stderr, "first error:", e)
	}
}
