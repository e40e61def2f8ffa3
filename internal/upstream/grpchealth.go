//lint:file-ignore SA1019 x/net/http2's client connections are deprecated for net/http's Transport.NewClientConn, which dials itself and reads ALPN only from a *tls.Conn: the health check dials as the pool does (h2health.go).

package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// The grpc.health.v1 active check (`health_check.grpc`): one unary call of
// /grpc.health.v1.Health/Check over a fresh HTTP/2 connection of the
// upstream's protocol, the request and answer messages encoded by hand
// (two fields; no generated code, no grpc.ClientConn per endpoint).

// Serving statuses of grpc.health.v1.HealthCheckResponse.
const (
	GRPCHealthUnknown        = 0
	GRPCHealthServing        = 1
	GRPCHealthNotServing     = 2
	GRPCHealthServiceUnknown = 3
)

// Bounds of the check's answer.
const (
	// maxGRPCHealthMessage bounds the answer's message: a
	// HealthCheckResponse is 2 bytes; 256 leaves room for fields a newer
	// server adds (skipped).
	maxGRPCHealthMessage = 256
	// maxGRPCHealthBody bounds what is read of the answer's body: one
	// framed message (5-byte prefix), plus one byte to see there is more.
	maxGRPCHealthBody = 5 + maxGRPCHealthMessage
	// maxGRPCHealthService bounds the service name sent (config checks
	// the same bound).
	maxGRPCHealthService = 256
)

// GRPCHealthResult is the answer to one check: the call's grpc-status and
// grpc-message and, when the status is 0 (OK), the serving status.
type GRPCHealthResult struct {
	Code    int
	Message string
	Serving int32
}

// errGRPCAnswer is a check's answer that is not a valid gRPC one.
type errGRPCAnswer string

func (e errGRPCAnswer) Error() string { return "upstream: gRPC health check: " + string(e) }

// HealthGRPC returns the grpc.health.v1 check of an HTTP/2 upstream, or nil
// for an HTTP/1.1 one (gRPC needs HTTP/2). The function's errors are
// HealthGet's (a failed dial a *net.OpError "dial", a failed handshake a
// *TLSError) or an answer that is not gRPC; a call answered with a
// grpc-status is a result, whatever the status.
func (t *Transport) HealthGRPC() func(ctx context.Context, addr, service string) (GRPCHealthResult, error) {
	if t.h2 == nil {
		return nil
	}
	return t.healthGRPC
}

func (t *Transport) healthGRPC(ctx context.Context, addr, service string) (GRPCHealthResult, error) {
	if len(service) > maxGRPCHealthService {
		return GRPCHealthResult{}, errGRPCAnswer("service name too long")
	}
	body := AppendGRPCHealthRequest(make([]byte, 0, 5+3+len(service)), service)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/grpc.health.v1.Health/Check", strings.NewReader(string(body)))
	if err != nil {
		return GRPCHealthResult{}, err
	}
	req.ContentLength = int64(len(body))
	req.Header = http.Header{
		"Content-Type": {"application/grpc"},
		"Te":           {"trailers"},
		"User-Agent":   {"levee-health-check"},
	}
	if dl, ok := ctx.Deadline(); ok {
		req.Header["Grpc-Timeout"] = []string{grpcTimeout(time.Until(dl))}
	}
	nc, err := t.h2.dial(ctx, addr)
	if errors.Is(err, errNoH2) {
		return GRPCHealthResult{}, errGRPCAnswer("the endpoint chose HTTP/1.1 by ALPN")
	}
	if err != nil {
		return GRPCHealthResult{}, err
	}
	defer nc.Close()
	cc, err := t.h2.t2.NewClientConn(nc)
	if err != nil {
		return GRPCHealthResult{}, err
	}
	defer cc.Close()
	if t.h2.tls {
		req.URL.Scheme = "https"
	}
	resp, err := cc.RoundTrip(req)
	if err != nil {
		return GRPCHealthResult{}, asTLSError(err)
	}
	defer resp.Body.Close()
	return readGRPCHealth(resp)
}

// grpcTimeout is d as a grpc-timeout value in milliseconds (at least 1).
func grpcTimeout(d time.Duration) string {
	ms := max(d.Milliseconds(), 1)
	return strconv.FormatInt(ms, 10) + "m"
}

// readGRPCHealth reads a check's answer: HTTP 200, a gRPC content type,
// at most one framed message, then the grpc-status (in the trailers, or
// in the headers of a trailers-only answer).
func readGRPCHealth(resp *http.Response) (GRPCHealthResult, error) {
	if resp.StatusCode != http.StatusOK {
		return GRPCHealthResult{}, errGRPCAnswer("HTTP status " + strconv.Itoa(resp.StatusCode))
	}
	if !isGRPCContentType(resp.Header.Get("Content-Type")) {
		return GRPCHealthResult{}, errGRPCAnswer("not a gRPC content type")
	}
	var res GRPCHealthResult
	if st := resp.Header["Grpc-Status"]; len(st) > 0 { // trailers-only
		return statusResult(st, resp.Header)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxGRPCHealthBody+1))
	if err != nil {
		return res, err
	}
	if len(b) > maxGRPCHealthBody {
		return res, errGRPCAnswer("answer too long")
	}
	res, err = statusResult(resp.Trailer["Grpc-Status"], resp.Trailer)
	if err != nil || res.Code != 0 {
		return res, err
	}
	res.Serving, err = ParseGRPCHealthAnswer(b)
	return res, err
}

// statusResult reads grpc-status (one value of one or two digits: codes
// are 0 to 16, a server may send a newer one) and grpc-message (at most
// 128 bytes kept).
func statusResult(st []string, h http.Header) (GRPCHealthResult, error) {
	if len(st) != 1 || len(st[0]) == 0 || len(st[0]) > 2 {
		return GRPCHealthResult{}, errGRPCAnswer("no valid grpc-status")
	}
	code, err := strconv.Atoi(st[0])
	if err != nil || code < 0 {
		return GRPCHealthResult{}, errGRPCAnswer("no valid grpc-status")
	}
	msg := h.Get("Grpc-Message")
	if len(msg) > 128 {
		msg = msg[:128]
	}
	return GRPCHealthResult{Code: code, Message: msg}, nil
}

// isGRPCContentType reports whether ct is application/grpc or
// application/grpc+<codec> (or ;params).
func isGRPCContentType(ct string) bool {
	rest, ok := strings.CutPrefix(ct, "application/grpc")
	return ok && (rest == "" || rest[0] == '+' || rest[0] == ';')
}

// AppendGRPCHealthRequest appends a framed HealthCheckRequest{service} to b:
// the 5-byte gRPC prefix (uncompressed, big-endian length) and the message
// (field 1, bytes; omitted when empty, as proto3 does).
func AppendGRPCHealthRequest(b []byte, service string) []byte {
	var msg []byte
	if service != "" {
		msg = protowire.AppendTag(msg, 1, protowire.BytesType)
		msg = protowire.AppendString(msg, service)
	}
	n := len(msg)
	b = append(b, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	return append(b, msg...)
}

// ParseGRPCHealthAnswer parses the body of a Check answer: exactly one
// uncompressed framed HealthCheckResponse of at most 256 bytes, nothing
// after it. Its status is field 1 (a varint; the last one wins, as in
// protobuf; absent is UNKNOWN, 0); other fields are skipped if well
// formed. Every other input is an error.
func ParseGRPCHealthAnswer(b []byte) (int32, error) {
	if len(b) < 5 {
		return 0, errGRPCAnswer("no message")
	}
	if b[0] != 0 {
		return 0, errGRPCAnswer("compressed or unknown message flag")
	}
	n := uint32(b[1])<<24 | uint32(b[2])<<16 | uint32(b[3])<<8 | uint32(b[4])
	if n > maxGRPCHealthMessage {
		return 0, errGRPCAnswer("message too long")
	}
	if uint32(len(b)-5) != n {
		return 0, errGRPCAnswer("message length does not match the body")
	}
	msg := b[5:]
	var status int32
	for len(msg) > 0 { // bounded: each turn consumes at least one byte of at most 256
		num, typ, l := protowire.ConsumeTag(msg)
		if l < 0 {
			return 0, errGRPCAnswer("bad field tag")
		}
		msg = msg[l:]
		if num == 1 {
			if typ != protowire.VarintType {
				return 0, errGRPCAnswer("status is not a varint")
			}
			v, l := protowire.ConsumeVarint(msg)
			if l < 0 {
				return 0, errGRPCAnswer("bad status varint")
			}
			status = int32(v) // an enum: int32 on the wire, as protobuf reads it
			msg = msg[l:]
			continue
		}
		l = protowire.ConsumeFieldValue(num, typ, msg)
		if l < 0 {
			return 0, errGRPCAnswer("bad field value")
		}
		msg = msg[l:]
	}
	return status, nil
}
