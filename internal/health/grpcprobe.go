package health

import (
	"context"
	"errors"
	"fmt"
)

// Serving statuses of grpc.health.v1.HealthCheckResponse.
const (
	grpcServing        = 1
	grpcNotServing     = 2
	grpcServiceUnknown = 3
)

// probeGRPC is Probe's grpc.health.v1 check: it passes only when the call
// answers grpc-status 0 (OK) and SERVING; NOT_SERVING, SERVICE_UNKNOWN,
// UNKNOWN, any other grpc-status, an answer that is not gRPC and the
// timeout fail it, each with its own text (the transition's reason).
func probeGRPC(ctx context.Context, addr string, c *CheckOptions) error {
	if c.GRPCCheck == nil {
		return errors.New("gRPC check without HTTP/2")
	}
	code, serving, err := c.GRPCCheck(ctx, addr, c.GRPCService)
	switch {
	case err != nil:
		return requestFailure(ctx, err, "no valid gRPC response")
	case code != 0:
		return fmt.Errorf("grpc-status %d", code)
	case serving == grpcServing:
		return nil
	case serving == grpcNotServing:
		return errors.New("NOT_SERVING")
	case serving == grpcServiceUnknown:
		return errors.New("SERVICE_UNKNOWN")
	}
	return fmt.Errorf("serving status %d", serving)
}
