package gateway

import (
	"context"
	"fmt"
	"net"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/upstream"
)

// Upstream TLS (upstreams.<name>.tls): the files are read at start and at
// every reload, under reloadMu and before the table is built (buildTable,
// under mu, does no I/O). The pools keep an upstream's transport while its
// options and the files' contents are unchanged (upstream.Options.Equal);
// new contents make a new transport, so new connections use them while
// requests in flight finish on the old one.

// loadUpstreamTLS reads the TLS files of every upstream that has a tls
// block. It logs a warning for each upstream that skips verification (at
// start and at each reload). An error names the upstream and the file.
func (g *Gateway) loadUpstreamTLS(cfg *config.Config) (map[string]*upstream.ClientTLS, error) {
	out := map[string]*upstream.ClientTLS{}
	for _, name := range cfg.UpstreamOrder {
		t := cfg.Upstreams[name].TLS
		if t == nil {
			continue
		}
		c, err := upstream.LoadClientTLS(upstream.TLSOptions{
			CAFile: t.CAFile, ServerName: t.ServerName, CertFile: t.CertFile, KeyFile: t.KeyFile,
			InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: t.TLSVersion(),
		})
		if err != nil {
			return nil, fmt.Errorf("upstreams.%s.tls.%w", name, err)
		}
		if t.InsecureSkipVerify {
			g.logger.Warn("upstream TLS certificates are not verified (insecure_skip_verify: true): anyone on the path can pose as its endpoints",
				"upstream", name)
		}
		out[name] = c
	}
	return out, nil
}

// healthDial returns the dial of upstream name's health checks: its
// transport's (TCP and the TLS handshake) when it has TLS, nil (a plain
// TCP connect) otherwise. Called with g.mu held, after the upstream's
// transport was built.
func (g *Gateway) healthDial(name string) func(ctx context.Context, addr string) (net.Conn, error) {
	t, ok := g.pools.transports[name]
	if !ok || t.opts.TLS == nil {
		return nil
	}
	return t.transport.Dial
}
