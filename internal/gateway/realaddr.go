package gateway

import (
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/h1server"
	"github.com/levee-gw/levee/internal/netlimit"
	"github.com/levee-gw/levee/internal/proxy"
)

// The real client address: server.proxy_protocol turned into h1server's
// option (the per-address connection cap counted by netlimit.Claim on the
// header's client), server.trusted_proxies into the proxy's. Both need a
// restart to change (their table entries say so).

func proxyProtocolOf(pp *config.ProxyProtocol) *h1server.ProxyProtocol {
	if pp == nil {
		return nil
	}
	return &h1server.ProxyProtocol{Trusted: config.Prefixes(pp.Trusted), Claim: netlimit.Claim}
}

func trustedProxies(cfg *config.Config) *proxy.TrustedProxies {
	if len(cfg.Server.TrustedProxies) == 0 {
		return nil
	}
	return &proxy.TrustedProxies{
		Prefixes:  config.Prefixes(cfg.Server.TrustedProxies),
		Forwarded: cfg.Server.TrustedProxiesHeader == config.TrustedHeaderForwarded,
	}
}
