//lint:file-ignore SA1019 x/net/http2's client connections are deprecated for net/http's Transport.NewClientConn, which dials itself and reads ALPN only from a *tls.Conn: the pool and its frame guard (h2guard.go) need a ClientConn over a net.Conn of ours, which only x/net's gives.

package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
)

// maxHealthBody bounds what a health check reads of a response body.
const maxHealthBody = 4 << 10

// HealthGet returns the health check of an HTTP/2 upstream (a GET of path
// over a fresh connection, closed after, that speaks the upstream's
// protocol: h2 over TLS, h2c, or with ProtoAuto what the endpoint chose by
// ALPN), or nil for an HTTP/1.1 upstream (internal/health then writes its
// own HTTP/1.1 request). The function returns the response status; its
// errors are those of a request, a failed dial a *net.OpError "dial" or a
// *TLSError.
func (t *Transport) HealthGet() func(ctx context.Context, addr, path string) (int, error) {
	if t.h2 == nil {
		return nil
	}
	return t.healthGet
}

func (t *Transport) healthGet(ctx context.Context, addr, path string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr, nil)
	if err != nil {
		return 0, err
	}
	u, err := url.ParseRequestURI(path)
	if err != nil {
		return 0, err
	}
	req.URL.Path, req.URL.RawPath, req.URL.RawQuery = u.Path, u.RawPath, u.RawQuery
	req.Header.Set("User-Agent", "levee-health-check")
	var resp *http.Response
	nc, err := t.h2.dial(ctx, addr)
	switch {
	case errors.Is(err, errNoH2) && t.auto:
		req.Close = true
		resp, err = t.std.RoundTrip(req)
	case err != nil:
		return 0, err
	default:
		defer nc.Close()
		cc, cerr := t.h2.t2.NewClientConn(nc)
		if cerr != nil {
			return 0, cerr
		}
		defer cc.Close()
		if t.h2.tls {
			req.URL.Scheme = "https"
		}
		resp, err = cc.RoundTrip(req)
	}
	if err != nil {
		return 0, asTLSError(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxHealthBody))
	resp.Body.Close()
	return resp.StatusCode, nil
}
