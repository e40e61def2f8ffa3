package upstream

import (
	"context"
	"net"
	"net/http"
)

// The protocol spoken to an upstream's endpoints (Options.Protocol).
//
// HTTP/1.1 (the default) takes levee's fast path for bodiless idempotent
// requests and net/http's transport for the rest. The others go through
// the HTTP/2 pool (h2.go), which bounds connections per endpoint and
// streams per connection:
//   - ProtoHTTP2: HTTP/2 over TLS (ALPN "h2" only; an endpoint that does
//     not agree fails the handshake);
//   - ProtoH2C: HTTP/2 over clear text with prior knowledge;
//   - ProtoAuto: TLS with ALPN "h2" and "http/1.1", the endpoint chooses
//     (auto.go: one that chose http/1.1 gets net/http's transport).
//
// Configured by upstreams.<name>.protocol (docs/http2.md).
type Protocol uint8

const (
	ProtoHTTP1 Protocol = iota
	ProtoHTTP2
	ProtoH2C
	ProtoAuto
)

// alpn returns the ALPN protocols offered for p over TLS.
func (p Protocol) alpn() []string {
	switch p {
	case ProtoHTTP2:
		return []string{"h2"}
	case ProtoAuto:
		return []string{"h2", "http/1.1"}
	}
	return []string{"http/1.1"}
}

// configure sets std up for protocol p: the protocols it may speak and,
// over TLS for HTTP/2, the dial that handshakes with ALPN (net/http then
// reads the negotiated protocol). tlsDial is nil without TLS.
func configure(std *http.Transport, p Protocol, tlsDial func(ctx context.Context, addr string) (net.Conn, error)) {
	if p == ProtoHTTP1 {
		return
	}
	protos := new(http.Protocols)
	switch p {
	case ProtoHTTP2:
		protos.SetHTTP2(true)
	case ProtoH2C:
		protos.SetUnencryptedHTTP2(true)
	case ProtoAuto:
		protos.SetHTTP1(true)
		protos.SetHTTP2(true)
	}
	std.Protocols = protos
	if tlsDial != nil {
		std.DialTLSContext = func(ctx context.Context, _, addr string) (net.Conn, error) { return tlsDial(ctx, addr) }
	}
}
