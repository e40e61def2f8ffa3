package config

import (
	"net/textproto"
	"strings"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// underscoreModes are the accepted values of Server.UnderscoresInHeaders.
var underscoreModes = []string{UnderscoresDrop, UnderscoresAllow, UnderscoresReject}

// forbiddenTrailers are the fields that frame, route, authenticate,
// identify or modify a request (RFC 9110 section 6.5.1): never accepted
// in Route.ForwardTrailers. Canonical names.
var forbiddenTrailers = map[string]bool{
	// framing and connection
	"Content-Length": true, "Transfer-Encoding": true, "Trailer": true, "Te": true,
	"Connection": true, "Keep-Alive": true, "Proxy-Connection": true, "Upgrade": true,
	"Http2-Settings": true,
	// routing and request modifiers
	"Host": true, "Max-Forwards": true, "Expect": true, "Range": true,
	"Cache-Control": true, "Pragma": true,
	// how to process the content
	"Content-Type": true, "Content-Encoding": true, "Content-Range": true,
	// authentication and signatures (internal/auth signs Authorization and Date)
	"Authorization": true, "Proxy-Authorization": true, "Proxy-Authenticate": true,
	"Www-Authenticate": true, "Cookie": true, "Set-Cookie": true, "X-Api-Key": true,
	"Date": true, "Signature": true, "Signature-Input": true, "Digest": true, "Content-Digest": true,
	// identity levee sets or vouches for
	"X-Request-Id": true, "Forwarded": true, "X-Real-Ip": true,
}

// forbiddenTrailerPrefixes are families of forbidden names: levee's own
// (Levee-App, Levee-Attempt, ...), the proxy identity headers it writes,
// and the conditionals.
var forbiddenTrailerPrefixes = []string{"Levee-", "X-Forwarded-", "If-"}

// ForbiddenTrailer reports whether the field name (any case) may never be
// forwarded as a request trailer.
func ForbiddenTrailer(name string) bool {
	c := textproto.CanonicalMIMEHeaderKey(name)
	if forbiddenTrailers[c] {
		return true
	}
	for _, p := range forbiddenTrailerPrefixes {
		if strings.HasPrefix(c, p) {
			return true
		}
	}
	return false
}

// forwardTrailers reads a route's `forward_trailers`: distinct field
// names, none forbidden, stored canonical.
func (p *parser) forwardTrailers(path string, n *yaml.Node) []string {
	items, ok := p.Sequence(path, n)
	if !ok {
		return nil
	}
	out, _ := distinctStrings(p.Parser, path, items, "trailer ", func(s string) (string, string) {
		if !validToken(s) || strings.IndexByte(s, '_') >= 0 {
			return "", "must be a header field name (a token without \"_\"), got " + engine.Quote(s)
		}
		c := textproto.CanonicalMIMEHeaderKey(s)
		if ForbiddenTrailer(c) {
			return "", engine.Quote(c) + " frames, routes, authenticates or identifies a request and is never forwarded as a trailer (RFC 9110 section 6.5.1)"
		}
		return c, ""
	})
	return out
}

// upgrades reads a route's `upgrades`: distinct protocol names, stored
// lower-case; h2c is refused. An explicit empty list allows none.
func (p *parser) upgrades(path string, n *yaml.Node) []string {
	items, ok := p.Sequence(path, n)
	if !ok {
		return DefaultUpgrades()
	}
	out, _ := distinctStrings(p.Parser, path, items, "protocol ", func(s string) (string, string) {
		if !validToken(s) {
			return "", "must be a protocol name such as \"websocket\", got " + engine.Quote(s)
		}
		l := strings.ToLower(s)
		if l == "h2c" {
			return "", "h2c is never forwarded: an upstream that switched would serve every later request on the connection past levee's routing, auth and limits; got " + engine.Quote(s)
		}
		return l, ""
	})
	return out
}
