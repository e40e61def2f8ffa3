package config

import (
	"fmt"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// checkRouteClientCert checks, after listeners and routes are read, that
// a route with auth: client_cert is served only by listeners that ask for
// client certificates: every listener serves every route, so each one
// that serves routes (not a redirect_https one) needs tls.client_auth. A
// listener without it would answer every request on the route 401
// client_cert_missing, which is a configuration mistake to name now.
func (p *parser) checkRouteClientCert(c *Config, root *yaml.Node) {
	var without []string
	for i, l := range c.ListenerSet() {
		if l.RedirectHTTPS != nil || (l.TLS != nil && l.TLS.ClientAuth != nil) {
			continue
		}
		where := "tls.client_auth"
		if len(c.Listeners) > 0 {
			where = fmt.Sprintf("%s.tls.client_auth", engine.Index("listeners", i))
		}
		without = append(without, fmt.Sprintf("listener %s has no %s", engine.Quote(l.Name), where))
	}
	if len(without) == 0 {
		return
	}
	for i, r := range c.Routes {
		if r.Auth != AuthClientCert {
			continue
		}
		p.Add(root, engine.Key(engine.Index("routes", i), "auth"),
			"auth: client_cert (route %s) needs tls.client_auth on every listener that serves routes: %s", engine.Quote(r.Name), without[0])
	}
}
