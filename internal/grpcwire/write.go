package grpcwire

import (
	"net/http"
	"strconv"
)

// ReasonHeader is the header in which levee's own gRPC answers carry its
// stable refusal reason (the "reason" of its JSON refusals), beside
// grpc-status and grpc-message.
const ReasonHeader = "Levee-Reason"

var (
	grpcContentType = []string{"application/grpc"}
	codeValues      = func() (v [17][]string) {
		for i := range v {
			v[i] = []string{strconv.Itoa(i)}
		}
		return v
	}()
)

// WriteTrailersOnly answers a gRPC request with status code and message
// msg as a trailers-only response (PROTOCOL-HTTP2.md): HTTP 200,
// content-type application/grpc, grpc-status and grpc-message (percent-
// encoded) in the one header block, and no body, so an HTTP/2 server ends
// the stream with that block. reason, when not empty, goes in the
// Levee-Reason header. Headers w already holds that a JSON refusal would
// carry (Content-Length, Content-Type) are replaced; others (Retry-After,
// a rate limit's headers) stay. It returns 200, the HTTP status written.
func WriteTrailersOnly(w http.ResponseWriter, code Code, msg, reason string) int {
	h := w.Header()
	delete(h, "Content-Length")
	delete(h, "X-Content-Type-Options")
	h["Content-Type"] = grpcContentType
	if int(code) < len(codeValues) {
		h["Grpc-Status"] = codeValues[code]
	} else {
		h["Grpc-Status"] = []string{strconv.FormatUint(uint64(code), 10)}
	}
	if msg != "" {
		h["Grpc-Message"] = []string{EncodeMessage(msg)}
	}
	if reason != "" {
		h[ReasonHeader] = []string{reason}
	}
	w.WriteHeader(http.StatusOK)
	return http.StatusOK
}
