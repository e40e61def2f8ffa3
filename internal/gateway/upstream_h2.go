package gateway

import (
	"context"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/upstream"
)

// HTTP/2 upstreams (upstreams.<name>.protocol, .http2): the validated
// fields turned into the transport's options, and the health check of an
// HTTP/2 upstream, which speaks its protocol (upstream.Transport.HealthGet).

// upstreamProtocol maps the config's protocol to the transport's.
func upstreamProtocol(p string) upstream.Protocol {
	switch p {
	case config.UpstreamProtocolHTTP2:
		return upstream.ProtoHTTP2
	case config.UpstreamProtocolH2C:
		return upstream.ProtoH2C
	case config.UpstreamProtocolAuto:
		return upstream.ProtoAuto
	}
	return upstream.ProtoHTTP1
}

// h2Options are upstream uc's HTTP/2 limits (defaults without a block;
// unused by http1).
func h2Options(uc *config.Upstream) upstream.H2Options {
	h := uc.H2()
	return upstream.H2Options{
		MaxConnsPerEndpoint:  h.MaxConnectionsPerEndpoint,
		MaxConcurrentStreams: h.MaxConcurrentStreams,
		ReadIdleTimeout:      h.ReadIdleTimeout,
		PingTimeout:          h.PingTimeout,
		MaxHeaderListSize:    uint32(h.MaxHeaderListSize), // at most 16 MiB (validated)
	}
}

// healthGet returns the HTTP check of upstream name when it speaks HTTP/2
// (nil otherwise: internal/health writes HTTP/1.1 itself). Called with
// g.mu held, after the upstream's transport was built.
func (g *Gateway) healthGet(name string) func(ctx context.Context, addr, path string) (int, error) {
	t, ok := g.pools.transports[name]
	if !ok {
		return nil
	}
	return t.transport.HealthGet()
}

// healthGRPC returns the grpc.health.v1 check of upstream name when it
// speaks HTTP/2 (nil otherwise; config refuses a grpc check on http1).
// Called with g.mu held, after the upstream's transport was built.
func (g *Gateway) healthGRPC(name string) func(ctx context.Context, addr, service string) (int, int32, error) {
	t, ok := g.pools.transports[name]
	if !ok {
		return nil
	}
	check := t.transport.HealthGRPC()
	if check == nil {
		return nil
	}
	return func(ctx context.Context, addr, service string) (int, int32, error) {
		res, err := check(ctx, addr, service)
		return res.Code, res.Serving, err
	}
}
