package health

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"time"
)

// tlsFailed reports whether err, from a Dial hook, is not a failed
// connect (a *net.OpError of Op "dial"): the handshake after it failed.
func tlsFailed(err error) bool {
	var op *net.OpError
	return !errors.As(err, &op) || op.Op != "dial"
}

// maxProbeBody bounds what is read of a check's response body.
const maxProbeBody = 4 << 10

// Probe runs one check of the endpoint at addr: a TCP connect, or an HTTP
// GET of c.HTTPPath over a fresh connection (Connection: close) whose
// status must be in c.Expect (200 when empty). It returns nil when the
// check passes. Every step is bounded by ctx's deadline (the Manager sets
// it to c.Timeout); no connection outlives the call.
func Probe(ctx context.Context, addr string, c *CheckOptions) error {
	if c.GRPC {
		return probeGRPC(ctx, addr, c)
	}
	if c.HTTPGet != nil && !c.TCP {
		return probeGet(ctx, addr, c)
	}
	var conn net.Conn
	var err error
	if c.Dial != nil {
		conn, err = c.Dial(ctx, addr)
	} else {
		var d net.Dialer
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		if ctx.Err() != nil {
			return errors.New("connect timed out")
		}
		if c.Dial != nil && tlsFailed(err) {
			return errors.New("TLS handshake failed")
		}
		return errors.New("connect failed")
	}
	defer conn.Close()
	if c.TCP {
		return nil
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: levee-health-check\r\nConnection: close\r\n\r\n", c.HTTPPath, addr); err != nil {
		return errors.New("sending the check failed")
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), nil)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return errors.New("timed out")
		}
		return errors.New("no valid HTTP response")
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxProbeBody))
	resp.Body.Close()
	return checkStatus(c, resp.StatusCode)
}

func checkStatus(c *CheckOptions, status int) error {
	expect := c.Expect
	if len(expect) == 0 {
		expect = []int{http.StatusOK}
	}
	if !slices.Contains(expect, status) {
		return fmt.Errorf("status %d", status)
	}
	return nil
}

// probeGet is Probe through c.HTTPGet (an HTTP/2 upstream's check), with
// the same failure texts.
func probeGet(ctx context.Context, addr string, c *CheckOptions) error {
	status, err := c.HTTPGet(ctx, addr, c.HTTPPath)
	if err == nil {
		return checkStatus(c, status)
	}
	return requestFailure(ctx, err, "no valid HTTP response")
}

// requestFailure is the failure text of a check's request that failed
// with err; other is the text of an answer that is not the protocol's.
func requestFailure(ctx context.Context, err error, other string) error {
	var op *net.OpError
	dialFailed := errors.As(err, &op) && op.Op == "dial"
	switch {
	case ctx.Err() != nil && dialFailed:
		return errors.New("connect timed out")
	case ctx.Err() != nil:
		return errors.New("timed out")
	case dialFailed:
		return errors.New("connect failed")
	case errors.As(err, new(interface{ TLSHandshakeFailed() bool })):
		return errors.New("TLS handshake failed")
	}
	return errors.New(other)
}
