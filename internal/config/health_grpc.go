package config

import (
	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// `health_check.grpc`: the grpc.health.v1 active check, a Check call for
// one service over the upstream's HTTP/2 (docs/grpc.md).

// maxGRPCServiceLen bounds a checked service's name.
const maxGRPCServiceLen = 256

// The field table of the grpc check block (fields.go says how a table is read).
var grpcCheckBlock = engine.NewBlock(
	engine.Field{Name: "service", Kind: engine.KindString, Def: "", Pattern: `^[A-Za-z0-9._/-]{0,256}$`,
		Doc:   `service asked about ("": the server as a whole); at most 256 of A-Z, a-z, 0-9, ".", "_", "/", "-"`,
		Check: engine.ProblemOf(checkGRPCService), Bind: engine.At(func(g *GRPCCheck) *string { return &g.Service })},
)

// GRPCCheck is a grpc.health.v1 health check (`health_check.grpc`): a
// /grpc.health.v1.Health/Check call whose answer must be SERVING. Needs
// protocol h2c, http2 or auto.
type GRPCCheck struct {
	// Service is the service asked about (`service`; "" the server as a
	// whole, the default; at most 256 of A-Z, a-z, 0-9, ".", "_", "/"
	// and "-").
	Service string
	// on is always true: it keeps a GRPCCheck with every default from
	// being a zero value, which the effective rendering would leave out
	// (and then `health_check` would have no kind).
	on bool
}

// grpcCheck reads `health_check.grpc`; null reads as every default.
func (p *parser) grpcCheck(path string, n *yaml.Node) *GRPCCheck {
	g := &GRPCCheck{on: true}
	if f, ok := p.Block(path, n, grpcCheckBlock); ok {
		p.Bind(f, n, path, grpcCheckBlock, g)
	}
	return g
}

// checkGRPCService returns the problem with a service name, or "".
func checkGRPCService(s string) string {
	if len(s) > maxGRPCServiceLen {
		return "must be at most 256 bytes"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '/' || c == '-') {
			return `must hold only A-Z, a-z, 0-9, ".", "_", "/" and "-"`
		}
	}
	return ""
}

// grpcCheckProtocol refuses a grpc health check on an upstream that does
// not speak HTTP/2 (gRPC runs over HTTP/2 only).
func (p *parser) grpcCheckProtocol(path string, f map[string]*yaml.Node, u *Upstream) {
	hc := f["health_check"]
	if u.HealthCheck == nil || u.HealthCheck.GRPC == nil || hc == nil || hc.Kind != yaml.MappingNode {
		return
	}
	if u.Protocol != UpstreamProtocolHTTP1 {
		return
	}
	key := engine.Key(engine.Key(path, "health_check"), "grpc")
	p.Add(firstKey(hc, "grpc"), key, "needs protocol h2c, http2 or auto: gRPC runs over HTTP/2 (%s is http1)", engine.Key(path, "protocol"))
}
