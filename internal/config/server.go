package config

import (
	"github.com/levee-gw/levee/internal/config/engine"
	"time"
)

// The server block: client-facing connections (`server`, `server.paths`);
// (the data-plane listener's TLS, `tls`, is tls.go's).

// Bounds of this file's fields, used by their table entries and readers.
const (
	// maxAnswerBuffer bounds server.answer_buffer: every answer read whole
	// is reserved from the memory budget, and one this large per slow
	// client is already a lot.
	maxAnswerBuffer = 64 << 20
	// The bounds of server.body_timeout and the send timeouts.
	minClientTimeout = 100 * time.Millisecond
	maxClientTimeout = time.Hour
)

// The field tables of this file's blocks (fields.go says how a table is read).
var (
	serverPathsBlock = engine.NewBlock(
		engine.Field{Name: "escaped_slashes", Kind: engine.KindEnum, Enum: escapedSlashesModes, Def: DefaultEscapedSlashes,
			Doc:  "what a %2F in a request path does: refuse it, keep it encoded, or decode it",
			Bind: engine.At(func(s *ServerPaths) *string { return &s.EscapedSlashes })},
	)
	serverBlock = engine.NewBlock(
		engine.Field{Name: "max_header_bytes", Kind: engine.KindSize, Lo: minMaxHeaderBytes, Hi: maxMaxHeaderBytes, Def: DefaultMaxHeaderBytes,
			Doc:  "largest request head accepted",
			Bind: engine.At(func(s *Server) *int64 { return &s.MaxHeaderBytes })},
		engine.Field{Name: "read_header_timeout", Kind: engine.KindDuration, Def: DefaultReadHeaderTimeout,
			Doc:  "time a client has to send the request head",
			Bind: engine.At(func(s *Server) *time.Duration { return &s.ReadHeaderTimeout })},
		engine.Field{Name: "idle_timeout", Kind: engine.KindDuration, Def: DefaultIdleTimeout,
			Doc:  "how long an idle client connection stays open",
			Bind: engine.At(func(s *Server) *time.Duration { return &s.IdleTimeout })},
		engine.Field{Name: "shutdown_timeout", Kind: engine.KindDuration, Def: DefaultShutdownTimeout,
			Doc:  "how long a shutdown waits for requests in flight",
			Bind: engine.At(func(s *Server) *time.Duration { return &s.ShutdownTimeout })},
		engine.Field{Name: "drain_timeout", Kind: engine.KindDuration, Def: DefaultDrainTimeout,
			Doc:  "how long a WebSocket or streamed answer may run on after a reload, publish or apps change replaced its configuration; closed past it",
			Bind: engine.At(func(s *Server) *time.Duration { return &s.DrainTimeout })},
		engine.Field{Name: "max_connections", Kind: engine.KindInt, Lo: 0, Hi: maxMaxConnections, Def: DefaultMaxConnections,
			Doc:  "client connections open at once; 0 is unlimited",
			Bind: engine.At(func(s *Server) *int { return &s.MaxConnections })},
		engine.Field{Name: "max_connections_per_ip", Kind: engine.KindInt, Lo: 0, Hi: maxMaxConnections, Def: DefaultMaxConnectionsPerIP,
			Doc:  "client connections open at once from one address; 0 is unlimited",
			Bind: engine.At(func(s *Server) *int { return &s.MaxConnectionsPerIP })},
		engine.Field{Name: "http2_max_concurrent_streams", Kind: engine.KindInt, Lo: minHTTP2Streams, Hi: maxHTTP2Streams, Def: DefaultHTTP2MaxConcurrentStreams,
			Doc:  "streams one HTTP/2 client connection may have open",
			Bind: engine.At(func(s *Server) *int { return &s.HTTP2MaxConcurrentStreams })},
		engine.Field{Name: "paths", Kind: engine.KindBlock, Sub: serverPathsBlock, Doc: "how request paths are normalised",
			Bind: engine.At(func(s *Server) *ServerPaths { return &s.Paths })},
		engine.Field{Name: "underscores_in_headers", Kind: engine.KindEnum, Enum: underscoreModes, Def: DefaultUnderscoresInHeaders, Reload: engine.Restart,
			Doc:  "what a request header name with an underscore does: dropped, allowed or refused",
			Bind: engine.At(func(s *Server) *string { return &s.UnderscoresInHeaders })},
		engine.Field{Name: "body_timeout", Kind: engine.KindDuration, Def: DefaultBodyTimeout,
			Doc:   "longest wait for the next bytes of a request body; 408 past it; 100ms to 1h",
			Check: engine.CheckDurationWithin(minClientTimeout, maxClientTimeout), Bind: engine.At(func(s *Server) *time.Duration { return &s.BodyTimeout })},
		engine.Field{Name: "send_timeout", Kind: engine.KindDuration, Def: DefaultSendTimeout,
			Doc:   "longest wait for the client to accept each write of an answer; the connection or stream is aborted past it; 100ms to 1h",
			Check: engine.CheckDurationWithin(minClientTimeout, maxClientTimeout), Bind: engine.At(func(s *Server) *time.Duration { return &s.SendTimeout })},
		engine.Field{Name: "answer_buffer", Kind: engine.KindSize, Lo: 0, Hi: maxAnswerBuffer, Def: int64(DefaultAnswerBuffer),
			Doc:  "largest upstream answer of known length read whole before it is written to the client, so its admission slot is released at once; 0: 32 KiB",
			Bind: engine.At(func(s *Server) *int64 { return &s.AnswerBuffer })},
		engine.Field{Name: "proxy_protocol", Kind: engine.KindBlock, Sub: proxyProtocolBlock, Reload: engine.Restart, Doc: "read a PROXY protocol header (v1 or v2) from trusted peers first; none when omitted",
			Bind: engine.Opt(func(s *Server) **ProxyProtocol { return &s.ProxyProtocol }, func() *ProxyProtocol { return &ProxyProtocol{} })},
		engine.Field{Name: "trusted_proxies", Kind: engine.KindList, MinItems: 1, MaxItems: MaxTrustedPrefixes, Item: &engine.Field{Kind: engine.KindString}, Reload: engine.Restart,
			Doc:   "peers (CIDR prefixes or addresses) whose trusted_proxies_header names the client; from any other peer it is replaced",
			Check: checkPrefixList, Bind: engine.At(func(s *Server) *[]string { return &s.TrustedProxies })},
		engine.Field{Name: "trusted_proxies_header", Kind: engine.KindEnum, Enum: trustedHeaders, Def: DefaultTrustedProxiesHeader, Reload: engine.Restart,
			Doc:  "the header trusted_proxies' addresses are read from: x-forwarded-for or forwarded (RFC 7239)",
			Bind: engine.At(func(s *Server) *string { return &s.TrustedProxiesHeader })},
		engine.Field{Name: "access", Kind: engine.KindBlock, Sub: accessBlock, Doc: "the client addresses allowed and denied on every route without its own access (access.go)",
			Bind: engine.Opt(func(s *Server) **Access { return &s.Access }, func() *Access { return &Access{} })},
	)
)

// Server holds limits for downstream (client-facing) connections
// (`server`). Every field is optional.
type Server struct {
	// MaxHeaderBytes caps the size of a request's header block, in bytes
	// (`max_header_bytes`, a size). Default DefaultMaxHeaderBytes (64KiB);
	// allowed 1KiB to 16MiB. Zero is not allowed.
	MaxHeaderBytes int64
	// ReadHeaderTimeout is how long a client may take to send the request
	// headers (`read_header_timeout`, a duration). Default
	// DefaultReadHeaderTimeout (10s); must be greater than 0.
	ReadHeaderTimeout time.Duration
	// IdleTimeout is how long a keep-alive client connection may sit idle
	// between requests (`idle_timeout`, a duration). Default
	// DefaultIdleTimeout (60s); must be greater than 0.
	IdleTimeout time.Duration
	// ShutdownTimeout is how long a SIGTERM waits for in-flight requests
	// to finish before connections are closed (`shutdown_timeout`, a
	// duration). Default DefaultShutdownTimeout (15s); must be greater
	// than 0.
	ShutdownTimeout time.Duration
	// DrainTimeout is how long a long connection (a tunnel, a streamed
	// answer) may run on the configuration it started with once a reload,
	// a data-API publish or an apps change replaced it
	// (`drain_timeout`). Default DefaultDrainTimeout (10m).
	DrainTimeout time.Duration
	// MaxConnections caps concurrent client connections
	// (`max_connections`, a whole number). Default 0, which means
	// unlimited; must be 0 or more. A connection over the cap is answered
	// 503 with reason connection_limit and closed.
	MaxConnections int
	// MaxConnectionsPerIP caps the open data-plane connections from one
	// client IP address (`max_connections_per_ip`, a whole number).
	// Default DefaultMaxConnectionsPerIP (0), which means unlimited; must
	// be 0 or more. A connection over the cap is answered 503 with reason
	// connection_limit and closed. IPv6 addresses are compared whole.
	MaxConnectionsPerIP int
	// HTTP2MaxConcurrentStreams caps the concurrent streams (requests)
	// one HTTP/2 client connection may open (`http2_max_concurrent_streams`,
	// a whole number 1 to 10000). Default DefaultHTTP2MaxConcurrentStreams
	// (250). Zero is not allowed.
	HTTP2MaxConcurrentStreams int
	// Paths is how request-target paths are normalised before routing
	// (`paths`).
	Paths ServerPaths
	// UnderscoresInHeaders is what becomes of a request header whose name
	// holds "_" (`underscores_in_headers`): UnderscoresDrop ("drop", the
	// default, DefaultUnderscoresInHeaders: removed before routing, auth
	// and forwarding, as NGINX does), UnderscoresAllow ("allow": kept) or
	// UnderscoresReject ("reject": 400 bad_header_name). Some backends
	// (CGI, PHP, Django) read X-Api_Key and X-Api-Key as one name, so a
	// header levee does not look at could stand in for one it does.
	UnderscoresInHeaders string
	// BodyTimeout is the longest a request body may go without a byte
	// arriving, between two reads of it (`body_timeout`, a duration from
	// 100ms to 1h; NGINX's client_body_timeout), over HTTP/1.1, TLS and
	// HTTP/2 alike. Default DefaultBodyTimeout (30s); it cannot be turned
	// off. Past it the client gets 408 body_timeout (when nothing of the
	// answer was sent yet), the upstream request, if one was under way,
	// is cancelled, and the endpoint is not blamed. A body of known length
	// up to the route's buffer limit is read whole before admission (see
	// docs/admission.md), so a stalled one never holds a slot.
	BodyTimeout time.Duration
	// SendTimeout is the longest the client may take to accept each write
	// of an answer (`send_timeout`, a duration from 100ms to 1h; NGINX's
	// send_timeout), HTTP/2 streams stalled by flow control included: past
	// it the connection (HTTP/2: the stream) is aborted. Default
	// DefaultSendTimeout (60s). A route's own send_timeout replaces it; a
	// data route's data.send_timeout (10s by default) applies when the
	// route sets none.
	SendTimeout time.Duration
	// AnswerBuffer is the largest upstream answer of known length that is
	// read whole before any of it is written to the client
	// (`answer_buffer`, a size from 0 to 64MiB; NGINX's proxy_buffering):
	// the attempt then ends and the admission slot is released at once,
	// so a client that reads slowly, or never, holds its own connection
	// and the buffer (reserved from the memory budget; without room the
	// answer streams), never the upstream's capacity. Answers up to the
	// 32 KiB copy buffer are always read whole; larger ones, and answers
	// of unknown length, stream with the slot held. Default
	// DefaultAnswerBuffer (1MiB); 0: only the copy buffer.
	AnswerBuffer int64
	// ProxyProtocol, when set, makes the data listener read a PROXY
	// protocol header from trusted peers first (`proxy_protocol`; nil:
	// none is read). See proxy_protocol.go.
	ProxyProtocol *ProxyProtocol
	// TrustedProxies are the peers whose TrustedProxiesHeader names the
	// client (`trusted_proxies`, CIDR prefixes or addresses, canonical
	// after parsing; nil: none, every peer is the client and the header
	// is replaced). TrustedProxiesHeader is that header
	// (`trusted_proxies_header`: TrustedHeaderXFF, the default, or
	// TrustedHeaderForwarded).
	TrustedProxies       []string
	TrustedProxiesHeader string
	// Access is the default address allow and deny list of every route
	// without its own (`access`, access.go); nil: every address.
	Access *Access
}

// ServerPaths is the request-path normalisation policy (`server.paths`).
// Every path is normalised (dot segments removed, slashes merged, escapes
// made canonical) before it is routed, authorized and forwarded; see
// "Request paths" in docs/configuration.md.
type ServerPaths struct {
	// EscapedSlashes is what a path's %2F or %5C (any case) gets
	// (`escaped_slashes`): EscapedSlashesReject ("reject", the default,
	// DefaultEscapedSlashes: 400 bad_path, except on raw_path routes),
	// EscapedSlashesKeep ("keep": left encoded, an ordinary byte of its
	// segment) or EscapedSlashesDecode ("decode": read as '/' before
	// normalising). Never empty after parsing.
	EscapedSlashes string
}

// The accepted values of ServerPaths.EscapedSlashes.
const (
	EscapedSlashesReject = "reject"
	EscapedSlashesKeep   = "keep"
	EscapedSlashesDecode = "decode"
)

// The accepted values of Server.UnderscoresInHeaders.
const (
	UnderscoresDrop   = "drop"
	UnderscoresAllow  = "allow"
	UnderscoresReject = "reject"
)

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultMaxHeaderBytes is Server.MaxHeaderBytes when omitted: 64KiB.
	DefaultMaxHeaderBytes int64 = 64 << 10
	// DefaultReadHeaderTimeout is Server.ReadHeaderTimeout when omitted.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultIdleTimeout is Server.IdleTimeout when omitted.
	DefaultIdleTimeout = 60 * time.Second
	// DefaultShutdownTimeout is Server.ShutdownTimeout when omitted.
	DefaultShutdownTimeout = 15 * time.Second
	// DefaultDrainTimeout is Server.DrainTimeout when omitted: 10 minutes,
	// Envoy's listener drain time, so a replaced configuration is freed
	// within it however long its connections would run.
	DefaultDrainTimeout = 10 * time.Minute
	// DefaultMaxConnections is Server.MaxConnections when omitted: 0,
	// unlimited.
	DefaultMaxConnections = 0
	// DefaultMaxConnectionsPerIP is Server.MaxConnectionsPerIP when
	// omitted: 0, unlimited.
	DefaultMaxConnectionsPerIP = 0
	// DefaultHTTP2MaxConcurrentStreams is Server.HTTP2MaxConcurrentStreams
	// when omitted.
	DefaultHTTP2MaxConcurrentStreams = 250
	// DefaultEscapedSlashes is ServerPaths.EscapedSlashes when omitted.
	DefaultEscapedSlashes = EscapedSlashesReject
	// DefaultUnderscoresInHeaders is Server.UnderscoresInHeaders when
	// omitted.
	DefaultUnderscoresInHeaders = UnderscoresDrop
	// DefaultBodyTimeout is Server.BodyTimeout when omitted.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultSendTimeout is Server.SendTimeout when omitted.
	DefaultSendTimeout = 60 * time.Second
	// DefaultAnswerBuffer is Server.AnswerBuffer when omitted.
	DefaultAnswerBuffer = 1 << 20
)

// Bounds of this file's fields, used by their table entries and readers.
const (
	minMaxHeaderBytes = 1 << 10
	maxMaxHeaderBytes = 16 << 20
	maxMaxConnections = 1<<31 - 1 // fits an int on every platform
	minHTTP2Streams   = 1
	maxHTTP2Streams   = 10000
)

// escapedSlashesModes are the accepted values of
// ServerPaths.EscapedSlashes.
var escapedSlashesModes = []string{EscapedSlashesReject, EscapedSlashesKeep, EscapedSlashesDecode}
