// Package grpcwire is levee's gRPC vocabulary, the few parts of the gRPC
// over HTTP/2 protocol (github.com/grpc/grpc/blob/master/doc/PROTOCOL-HTTP2.md)
// a proxy needs without decoding a message: which requests are gRPC
// (IsGRPC), the status codes and their names (Code, CodeByName), the
// status of an answer (StatusOf), the mapping of levee's own HTTP refusals
// to statuses (FromHTTPStatus), the grpc-timeout header (ParseTimeout,
// AppendTimeout), the percent-encoded grpc-message (EncodeMessage,
// DecodeMessage) and the trailers-only answer levee writes itself
// (WriteTrailersOnly).
//
// It imports only the standard library: the proxy calls it on the request
// path, and the gRPC health check and gRPC-Web translation build on it.
// Nothing here allocates for a request that is not gRPC.
package grpcwire

import (
	"net/http"
	"strconv"
)

// Code is a gRPC status code (google.rpc.Code), 0 to 16.
type Code uint32

// The codes, in the order of the spec.
const (
	OK                 Code = 0
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	OutOfRange         Code = 11
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
)

// names are the codes' names as configuration writes them (lower snake
// case of the spec's names; "cancelled" as the spec spells it).
var names = [...]string{
	OK: "ok", Canceled: "cancelled", Unknown: "unknown", InvalidArgument: "invalid_argument",
	DeadlineExceeded: "deadline_exceeded", NotFound: "not_found", AlreadyExists: "already_exists",
	PermissionDenied: "permission_denied", ResourceExhausted: "resource_exhausted",
	FailedPrecondition: "failed_precondition", Aborted: "aborted", OutOfRange: "out_of_range",
	Unimplemented: "unimplemented", Internal: "internal", Unavailable: "unavailable",
	DataLoss: "data_loss", Unauthenticated: "unauthenticated",
}

// Name is c's configuration name ("unavailable"), or its number for a
// code outside 0 to 16.
func (c Code) Name() string {
	if int(c) < len(names) {
		return names[c]
	}
	return strconv.FormatUint(uint64(c), 10)
}

// CodeByName returns the code whose Name is name.
func CodeByName(name string) (Code, bool) {
	for i, n := range names {
		if n == name {
			return Code(i), true
		}
	}
	return 0, false
}

// Names lists the names of the codes 1 to 16 (every status but ok), in
// code order: the gRPC statuses a retry condition may name.
func Names() []string {
	return append([]string(nil), names[1:]...)
}

// IsGRPC reports whether a request's Content-Type (its first value) is
// gRPC's: "application/grpc" alone or followed by "+" (a codec such as
// +proto or +json) or ";" (parameters). gRPC-Web ("application/grpc-web")
// is not: it is a different framing. No allocation.
func IsGRPC(contentType string) bool {
	const p = "application/grpc"
	if len(contentType) < len(p) || !equalFoldASCII(contentType[:len(p)], p) {
		return false
	}
	rest := contentType[len(p):]
	return rest == "" || rest[0] == '+' || rest[0] == ';'
}

// IsGRPCRequest reports whether r is a gRPC request (IsGRPC of its
// Content-Type). No allocation.
func IsGRPCRequest(h http.Header) bool {
	ct := h["Content-Type"]
	return len(ct) > 0 && IsGRPC(ct[0])
}

func equalFoldASCII(a, b string) bool {
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// StatusOf returns the grpc-status in h (an answer's headers, for a
// trailers-only answer, or its trailers) and whether h had a valid one:
// 1 to 3 ASCII digits. A number past 16 (a code a newer spec might add)
// is returned as is; the caller treats it as a status it does not name.
func StatusOf(h http.Header) (Code, bool) {
	v := h["Grpc-Status"]
	if len(v) == 0 {
		return 0, false
	}
	s := v[0]
	if len(s) == 0 || len(s) > 3 {
		return 0, false
	}
	var c Code
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		c = c*10 + Code(s[i]-'0')
	}
	return c, true
}

// FromHTTPStatus is the status levee's own refusal with HTTP status
// answers a gRPC request with (docs/grpc.md has the table):
//
//	400 → INTERNAL: levee's 400s are framing faults (a bad path, header
//	      name or body) that a conforming gRPC client never makes; the
//	      message was never looked at, so INVALID_ARGUMENT would wrongly
//	      blame the application's fields (and INTERNAL is what a gRPC
//	      client makes of a bare 400)
//	401 → UNAUTHENTICATED, 403 → PERMISSION_DENIED
//	404, 405 → UNIMPLEMENTED (no such method here)
//	408, 504 → DEADLINE_EXCEEDED
//	413, 429, 431 → RESOURCE_EXHAUSTED
//	499 → CANCELLED
//	502, 503 → UNAVAILABLE (retryable by gRPC clients)
//	any other 4xx or 500 → INTERNAL; anything else → UNKNOWN
func FromHTTPStatus(status int) Code {
	switch status {
	case http.StatusUnauthorized:
		return Unauthenticated
	case http.StatusForbidden:
		return PermissionDenied
	case http.StatusNotFound, http.StatusMethodNotAllowed:
		return Unimplemented
	case http.StatusRequestTimeout, http.StatusGatewayTimeout:
		return DeadlineExceeded
	case http.StatusRequestEntityTooLarge, http.StatusTooManyRequests, http.StatusRequestHeaderFieldsTooLarge:
		return ResourceExhausted
	case 499:
		return Canceled
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return Unavailable
	}
	if status >= 400 && status <= 500 {
		return Internal
	}
	return Unknown
}
