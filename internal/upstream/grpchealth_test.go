package upstream

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
)

// startGRPCHealth starts a real grpc-go server (h2c) with the standard
// health service; the returned server sets the statuses.
func startGRPCHealth(t *testing.T) (string, *health.Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String(), hs
}

// TestGRPCHealthCheck: the check calls a real grpc-go health service over
// h2c and reads each serving status; an unknown service is grpc-status
// NOT_FOUND (5); a closed port is a dial error; an HTTP/1.1 upstream has
// no gRPC check.
func TestGRPCHealthCheck(t *testing.T) {
	addr, hs := startGRPCHealth(t)
	hs.SetServingStatus("app", healthpb.HealthCheckResponse_NOT_SERVING)
	check := protoTransport(t, Options{Protocol: ProtoH2C}, nil).HealthGRPC()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, tt := range []struct {
		service string
		want    GRPCHealthResult
	}{
		{"", GRPCHealthResult{Serving: GRPCHealthServing}},
		{"app", GRPCHealthResult{Serving: GRPCHealthNotServing}},
		{"nope", GRPCHealthResult{Code: 5, Message: "unknown service"}},
	} {
		got, err := check(ctx, addr, tt.service)
		if err != nil || got != tt.want {
			t.Errorf("service %q: %+v, %v; want %+v", tt.service, got, err, tt.want)
		}
	}
	hs.SetServingStatus("app", healthpb.HealthCheckResponse_SERVING)
	if got, err := check(ctx, addr, "app"); err != nil || got.Serving != GRPCHealthServing {
		t.Errorf("app after SERVING: %+v, %v", got, err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	_, err := check(ctx, dead, "")
	var op *net.OpError
	if !asOpError(err, &op) || op.Op != "dial" {
		t.Errorf("check of a closed port: %v", err)
	}
	if protoTransport(t, Options{}, nil).HealthGRPC() != nil {
		t.Error("an HTTP/1.1 upstream has a gRPC health check")
	}
}

// TestGRPCHealthCodec: the hand-written request is what protobuf encodes
// for the generated message, and the parser reads what protobuf encodes
// for each status, and refuses bad frames.
func TestGRPCHealthCodec(t *testing.T) {
	for _, svc := range []string{"", "a", "grpc.health.v1.Health"} {
		want, _ := proto.Marshal(&healthpb.HealthCheckRequest{Service: svc})
		got := AppendGRPCHealthRequest(nil, svc)
		if !bytes.Equal(got[5:], want) || int(got[4]) != len(want) || got[0] != 0 {
			t.Errorf("request %q: % x, protobuf % x", svc, got, want)
		}
	}
	for st := range int32(4) {
		msg, _ := proto.Marshal(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_ServingStatus(st)})
		got, err := ParseGRPCHealthAnswer(append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...))
		if err != nil || got != st {
			t.Errorf("status %d: %d, %v", st, got, err)
		}
	}
	for name, b := range map[string][]byte{
		"empty":           nil,
		"short prefix":    {0, 0, 0},
		"compressed":      {1, 0, 0, 0, 2, 8, 1},
		"length too long": {0, 0, 0, 0, 3, 8, 1},
		"trailing byte":   {0, 0, 0, 0, 2, 8, 1, 0},
		"huge length":     {0, 0xff, 0xff, 0xff, 0xff},
		"status bytes":    {0, 0, 0, 0, 3, 10, 1, 1},
		"bad varint":      {0, 0, 0, 0, 2, 8, 0x80},
		"bad tag":         {0, 0, 0, 0, 1, 0x80},
		"group":           {0, 0, 0, 0, 1, 0x13},
	} {
		if st, err := ParseGRPCHealthAnswer(b); err == nil {
			t.Errorf("%s: accepted as %d", name, st)
		}
	}
}

// FuzzGRPCHealthAnswer: the parser never panics, reads at most the bytes
// given, and agrees with protobuf on every message it accepts.
func FuzzGRPCHealthAnswer(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 2, 8, 1})
	f.Add([]byte{0, 0, 0, 0, 0})
	f.Add([]byte{0, 0, 0, 0, 5, 8, 2, 18, 1, 'x'})
	f.Add([]byte{0, 0, 0, 0, 4, 8, 1, 8, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := ParseGRPCHealthAnswer(b)
		if err != nil {
			return
		}
		if len(b) < 5 || len(b)-5 > maxGRPCHealthMessage || b[0] != 0 {
			t.Fatalf("accepted a bad frame % x", b)
		}
		var m healthpb.HealthCheckResponse
		if perr := proto.Unmarshal(b[5:], &m); perr != nil {
			// protobuf refuses what the parser skips only for field
			// number 0 or a reserved range; the parser must too.
			t.Fatalf("accepted % x that protobuf refuses: %v", b, perr)
		}
		if int32(m.Status) != st {
			t.Fatalf("% x: status %d, protobuf %d", b, st, m.Status)
		}
	})
}

func asOpError(err error, op **net.OpError) bool { return errors.As(err, op) }
