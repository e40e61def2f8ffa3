package config

import (
	"time"

	"gopkg.in/yaml.v3"

	"github.com/levee-gw/levee/internal/config/engine"
)

// The protocol spoken to an upstream's endpoints (`upstreams.<name>.protocol`)
// and its HTTP/2 limits (`upstreams.<name>.http2`). http2 is HTTP/2 over
// TLS (ALPN h2: the upstream needs a tls block), h2c HTTP/2 over clear
// text with prior knowledge (no tls block), auto TLS with ALPN h2 and
// http/1.1 (the endpoint chooses; needs a tls block). The limits apply to
// the connections of every protocol but http1 (docs/http2.md).

// Protocol values.
const (
	UpstreamProtocolHTTP1 = "http1"
	UpstreamProtocolHTTP2 = "http2"
	UpstreamProtocolH2C   = "h2c"
	UpstreamProtocolAuto  = "auto"
)

var upstreamProtocols = []string{UpstreamProtocolHTTP1, UpstreamProtocolHTTP2, UpstreamProtocolH2C, UpstreamProtocolAuto}

// Bounds and defaults of the http2 block.
const (
	maxH2ConnsPerEndpoint = 64
	maxH2Streams          = 1000
	minH2HeaderListSize   = 4 << 10
	maxH2HeaderListSize   = 16 << 20

	DefaultUpstreamProtocol                  = UpstreamProtocolHTTP1
	DefaultH2MaxConnectionsPerEndpoint       = 4
	DefaultH2MaxConcurrentStreams            = 100
	DefaultH2ReadIdleTimeout                 = 30 * time.Second
	DefaultH2PingTimeout                     = 15 * time.Second
	DefaultH2MaxHeaderListSize         int64 = 1 << 20
)

// The field table of the http2 block (fields.go says how a table is read).
var upstreamHTTP2Block = engine.NewBlock(
	engine.Field{Name: "max_connections_per_endpoint", Kind: engine.KindInt, Lo: 1, Hi: maxH2ConnsPerEndpoint, Def: DefaultH2MaxConnectionsPerEndpoint,
		Doc:  "HTTP/2 connections open to one endpoint at most",
		Bind: engine.At(func(h *UpstreamHTTP2) *int { return &h.MaxConnectionsPerEndpoint })},
	engine.Field{Name: "max_concurrent_streams", Kind: engine.KindInt, Lo: 1, Hi: maxH2Streams, Def: DefaultH2MaxConcurrentStreams,
		Doc:  "streams open on one connection at most (lower when the endpoint says so)",
		Bind: engine.At(func(h *UpstreamHTTP2) *int { return &h.MaxConcurrentStreams })},
	engine.Field{Name: "read_idle_timeout", Kind: engine.KindDuration, Def: DefaultH2ReadIdleTimeout,
		Doc:  "a connection silent this long is sent a PING",
		Bind: engine.At(func(h *UpstreamHTTP2) *time.Duration { return &h.ReadIdleTimeout })},
	engine.Field{Name: "ping_timeout", Kind: engine.KindDuration, Def: DefaultH2PingTimeout,
		Doc:  "a PING unanswered this long closes the connection",
		Bind: engine.At(func(h *UpstreamHTTP2) *time.Duration { return &h.PingTimeout })},
	engine.Field{Name: "max_header_list_size", Kind: engine.KindSize, Lo: minH2HeaderListSize, Hi: maxH2HeaderListSize, Def: DefaultH2MaxHeaderListSize,
		Doc:  "largest response header list accepted (SETTINGS_MAX_HEADER_LIST_SIZE)",
		Bind: engine.At(func(h *UpstreamHTTP2) *int64 { return &h.MaxHeaderListSize })},
)

// UpstreamHTTP2 are the limits of an upstream's HTTP/2 connections
// (`upstreams.<name>.http2`, optional: every default when omitted). Read
// only with protocol http2, h2c or auto.
type UpstreamHTTP2 struct {
	// MaxConnectionsPerEndpoint bounds the connections to one endpoint
	// (`max_connections_per_endpoint`, 1 to 64). Default 4.
	MaxConnectionsPerEndpoint int
	// MaxConcurrentStreams bounds the streams on one connection
	// (`max_concurrent_streams`, 1 to 1000; the endpoint's own
	// SETTINGS_MAX_CONCURRENT_STREAMS when lower). Default 100. A request
	// finding every stream of every allowed connection taken waits for one
	// within its per-try timeout.
	MaxConcurrentStreams int
	// ReadIdleTimeout is the silence after which a PING is sent
	// (`read_idle_timeout`, > 0). Default 30s.
	ReadIdleTimeout time.Duration
	// PingTimeout closes a connection whose PING went unanswered this
	// long (`ping_timeout`, > 0). Default 15s.
	PingTimeout time.Duration
	// MaxHeaderListSize is the largest response header list, in bytes
	// (`max_header_list_size`, 4 KiB to 16 MiB). Default 1 MiB.
	MaxHeaderListSize int64
}

// H2 returns the upstream's HTTP/2 limits: its http2 block, or every
// default when it has none.
func (u *Upstream) H2() UpstreamHTTP2 {
	if u.HTTP2 != nil {
		return *u.HTTP2
	}
	return *engine.WithDefaults(upstreamHTTP2Block, &UpstreamHTTP2{})
}

// upstreamHTTP2 reads `upstreams.<name>.http2`; null reads as every
// default.
func (p *parser) upstreamHTTP2(path string, n *yaml.Node) *UpstreamHTTP2 {
	h := engine.WithDefaults(upstreamHTTP2Block, &UpstreamHTTP2{})
	if f, ok := p.Block(path, n, upstreamHTTP2Block); ok {
		p.Bind(f, n, path, upstreamHTTP2Block, h)
	}
	return h
}

// upstreamProtocol checks `protocol` against `tls` and `http2` once the
// upstream's fields are read: http2 and auto need tls, h2c refuses it,
// and http2 limits go with a protocol that uses them.
func (p *parser) upstreamProtocol(path string, n *yaml.Node, f map[string]*yaml.Node, u *Upstream) {
	key := engine.Key(path, "protocol")
	at := f["protocol"]
	if at == nil {
		at = n
	}
	switch u.Protocol {
	case UpstreamProtocolHTTP2, UpstreamProtocolAuto:
		if f["tls"] == nil {
			p.Add(at, key, "%s requires a tls block (%s); h2c is HTTP/2 over clear text", u.Protocol, engine.Key(path, "tls"))
		}
	case UpstreamProtocolH2C:
		if f["tls"] != nil {
			p.Add(at, key, "h2c is HTTP/2 over clear text: it cannot go with a tls block (%s); http2 is HTTP/2 over TLS", engine.Key(path, "tls"))
		}
	}
	if v := f["http2"]; v != nil && u.Protocol == UpstreamProtocolHTTP1 {
		p.Add(v, engine.Key(path, "http2"), "applies only with protocol http2, h2c or auto (%s is %s)", key, u.Protocol)
	}
}
