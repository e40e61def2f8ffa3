package config

import (
	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// The listeners block: more than one data-plane listener (`listeners`),
// each with its own address, TLS, PROXY protocol and connection caps, or
// one that only redirects to HTTPS (and answers ACME HTTP-01 challenges).
// The one-listener form (`listen`, `tls`, server.max_connections, ...)
// stays; both are one list inside (Config.ListenerSet). Writing both is an
// error naming both.

// maxListeners bounds `listeners` (each is a socket, a server and its
// goroutines).
const maxListeners = 16

// DefaultListenerName is the name of the one listener of the
// one-listener form (`listen`), in ListenerSet and in logs.
const DefaultListenerName = "default"

// DefaultRedirectHTTPSPort is RedirectHTTPS.Port when omitted.
const DefaultRedirectHTTPSPort = 443

// The field tables of this file's blocks (fields.go says how a table is read).
var (
	redirectHTTPSBlock = engine.NewBlock(
		engine.Field{Name: "port", Kind: engine.KindInt, Lo: 1, Hi: 65535, Def: DefaultRedirectHTTPSPort,
			Doc:  "the HTTPS port redirects name (omitted from the URL when 443)",
			Bind: engine.At(func(r *RedirectHTTPS) *int { return &r.Port })},
	)
	listenerBlock = engine.NewBlock(
		engine.Field{Name: "name", Kind: engine.KindString, Required: true, Doc: "the listener's name, distinct; in logs",
			Check: checkName, Bind: engine.At(func(l *Listener) *string { return &l.Name })},
		engine.Field{Name: "listen", Kind: engine.KindString, Required: true, Doc: "host:port; no two listeners (nor admin.listen) on one port",
			Check: checkListen, Bind: engine.At(func(l *Listener) *string { return &l.Listen })},
		engine.Field{Name: "tls", Kind: engine.KindBlock, Sub: tlsBlock, Doc: "serve HTTPS (and HTTP/2), as the top-level tls block; clear text when omitted"},
		engine.Field{Name: "proxy_protocol", Kind: engine.KindBlock, Sub: proxyProtocolBlock, Doc: "as server.proxy_protocol, for this listener; server.proxy_protocol when omitted",
			Bind: engine.Opt(func(l *Listener) **ProxyProtocol { return &l.ProxyProtocol }, func() *ProxyProtocol { return &ProxyProtocol{} })},
		engine.Field{Name: "max_connections", Kind: engine.KindInt, Lo: 0, Hi: maxMaxConnections,
			Doc:  "client connections open at once on this listener; 0 is unlimited; server.max_connections when omitted",
			Bind: engine.At(func(l *Listener) *int { return &l.MaxConnections })},
		engine.Field{Name: "max_connections_per_ip", Kind: engine.KindInt, Lo: 0, Hi: maxMaxConnections,
			Doc:  "client connections open at once from one address on this listener; 0 is unlimited; server.max_connections_per_ip when omitted",
			Bind: engine.At(func(l *Listener) *int { return &l.MaxConnectionsPerIP })},
		engine.Field{Name: "redirect_https", Kind: engine.KindBlock, Sub: redirectHTTPSBlock, Doc: "serve nothing but a 308 redirect to https://host[:port]/path?query (and ACME HTTP-01 challenges); clear text only",
			Bind: engine.Opt(func(l *Listener) **RedirectHTTPS { return &l.RedirectHTTPS }, func() *RedirectHTTPS {
				return engine.WithDefaults(redirectHTTPSBlock, &RedirectHTTPS{})
			})},
	)
	listenersField = engine.Field{Name: "listeners", Kind: engine.KindList, MinItems: 1, MaxItems: maxListeners, Item: &engine.Field{Kind: engine.KindBlock, Sub: listenerBlock}, Reload: engine.Restart,
		Doc: "data-plane listeners, instead of listen and tls; a change needs a restart (new contents of the same certificate files are loaded on reload)"}
)

// Listener is one data-plane listener (an item of `listeners`, or the
// one-listener form's, see Config.ListenerSet).
type Listener struct {
	// Name is the listener's name (`name`, distinct).
	Name string
	// Listen is its "host:port" (`listen`).
	Listen string
	// TLS, when not nil, makes it serve HTTPS (`tls`, as the top-level tls).
	TLS *TLS
	// ProxyProtocol, when not nil, reads a PROXY header from trusted
	// peers first (`proxy_protocol`; server.proxy_protocol when omitted).
	ProxyProtocol *ProxyProtocol
	// MaxConnections and MaxConnectionsPerIP cap this listener's open
	// connections (0: unlimited; server's values when omitted).
	MaxConnections      int
	MaxConnectionsPerIP int
	// RedirectHTTPS, when not nil, makes the listener answer every
	// request with a 308 to HTTPS (`redirect_https`), but ACME HTTP-01
	// challenges. Such a listener has no TLS.
	RedirectHTTPS *RedirectHTTPS
}

// RedirectHTTPS is a listener's `redirect_https`.
type RedirectHTTPS struct {
	// Port is the HTTPS port named in the redirect (`port`, default
	// DefaultRedirectHTTPSPort; omitted from the URL when 443).
	Port int
}

// ListenerSet is every data-plane listener: Listeners, or the
// one-listener form's one (named DefaultListenerName, with server's
// proxy_protocol and connection caps). Not nil for a parsed Config.
func (c *Config) ListenerSet() []Listener {
	if len(c.Listeners) > 0 {
		return c.Listeners
	}
	return []Listener{{
		Name: DefaultListenerName, Listen: c.Listen, TLS: c.TLS, ProxyProtocol: c.Server.ProxyProtocol,
		MaxConnections: c.Server.MaxConnections, MaxConnectionsPerIP: c.Server.MaxConnectionsPerIP,
	}}
}

// PrimaryListener is the first listener that serves routes (not only
// redirects); Parse makes sure there is one.
func (c *Config) PrimaryListener() Listener {
	set := c.ListenerSet()
	for _, l := range set {
		if l.RedirectHTTPS == nil {
			return l
		}
	}
	return set[0]
}

// listeners reads `listeners` (n: its value; f: the root's fields) into
// c.Listeners, after server was bound (its caps are the defaults).
func (p *parser) listeners(c *Config, f map[string]*yaml.Node, root *yaml.Node) {
	n := f["listeners"]
	if n == nil {
		if f["listen"] == nil {
			p.Add(root, "listen", "required unless listeners is set")
		}
		return
	}
	const path = "listeners"
	if f["listen"] != nil {
		p.Add(f["listen"], "listen", "not with listeners (write the one-listener form, listen and tls, or listeners, not both)")
	}
	if f["tls"] != nil {
		p.Add(f["tls"], "tls", "not with listeners (give each listener its own tls)")
	}
	items, ok := p.Sequence(path, n)
	if !ok {
		return
	}
	switch {
	case len(items) == 0:
		p.Add(n, path, "must list at least one listener (omit it for listen)")
		return
	case len(items) > maxListeners:
		p.Add(n, path, "at most %d listeners, got %d", maxListeners, len(items))
		return
	}
	names := map[string]bool{}
	serving := false
	for i, item := range items {
		ip := engine.Index(path, i)
		if engine.IsNull(item) || item.Kind != yaml.MappingNode {
			p.Add(item, ip, "must be a mapping {name, listen, ...}, got %s", engine.Describe(item))
			continue
		}
		lf, fok := p.Block(ip, item, listenerBlock)
		if !fok {
			continue
		}
		l := Listener{ProxyProtocol: c.Server.ProxyProtocol, MaxConnections: c.Server.MaxConnections, MaxConnectionsPerIP: c.Server.MaxConnectionsPerIP}
		bad := p.Bind(lf, item, ip, listenerBlock, &l)
		if v := lf["tls"]; v != nil {
			l.TLS = p.tlsAt(engine.Key(ip, "tls"), v)
		}
		if !bad["name"] {
			if names[l.Name] {
				p.Add(lf["name"], engine.Key(ip, "name"), "listener %s is named twice", engine.Quote(l.Name))
			}
			names[l.Name] = true
		}
		if !bad["listen"] {
			for _, prev := range c.Listeners {
				if sameBinding(prev.Listen, l.Listen) {
					p.Add(lf["listen"], engine.Key(ip, "listen"), "must not bind the same port as listener %s (%q), got %q", engine.Quote(prev.Name), prev.Listen, l.Listen)
				}
			}
		}
		if l.RedirectHTTPS != nil && lf["tls"] != nil {
			p.Add(lf["redirect_https"], engine.Key(ip, "redirect_https"), "a redirecting listener is clear text: not with tls")
		}
		if lf["redirect_https"] == nil {
			serving = true
		}
		c.Listeners = append(c.Listeners, l)
	}
	acmeAt := ""
	for i, l := range c.Listeners {
		if l.TLS != nil && l.TLS.ACME != nil {
			if acmeAt != "" {
				p.Add(items[i], engine.Key(engine.Key(engine.Index(path, i), "tls"), "acme"), "only one listener may order certificates (%s has tls.acme): one ACME account answers the challenges", acmeAt)
			}
			acmeAt = engine.Index(path, i)
		}
	}
	if !serving {
		p.Add(n, path, "at least one listener must serve routes (one without redirect_https)")
	}
}

// listenAddrs are the data-plane listeners' addresses (admin.listen may
// bind none of their ports).
func (c *Config) listenAddrs() []string {
	var out []string
	for _, l := range c.ListenerSet() {
		if l.Listen != "" {
			out = append(out, l.Listen)
		}
	}
	return out
}
