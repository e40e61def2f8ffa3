package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/endpoint"
	"github.com/levee-gw/levee/internal/limits"
	"golang.org/x/net/http/httpguts"
	"gopkg.in/yaml.v3"
)

// This file holds the checks on single values. Each returns a problem
// phrased to follow "invalid address "x": " or to precede ", got <value>",
// or "" when the value is fine. None of them panics on any input.

// nameRule is the rule for route and upstream names, as error messages
// state it.
const nameRule = limits.IDRule

// validName reports whether s follows nameRule.
func validName(s string) bool { return limits.ValidID(s) }

// checkAddress checks a "host:port" address. For an endpoint the host is
// required and is an IP address (IPv6 in brackets) or a DNS name, and the
// port is 1 to 65535. For a listener the host may also be empty (every
// interface) and the port may be 0 (a free port chosen by the OS, as
// net.Listen does; tests and the demo rely on it).
func checkAddress(s string, listener bool) string {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			return ae.Err
		}
		return err.Error()
	}
	if n, ok := parsePort(port); !ok || n == 0 && !listener {
		if listener {
			return "port must be a number from 0 to 65535"
		}
		return "port must be a number from 1 to 65535"
	}
	if host == "" {
		if !listener {
			return "host is required"
		}
		return ""
	}
	bracketed := strings.HasPrefix(s, "[")
	if a, err := netip.ParseAddr(host); err == nil {
		if bracketed && !a.Is6() {
			return "brackets are only for IPv6 addresses"
		}
		return ""
	}
	if bracketed {
		return "brackets must hold an IPv6 address"
	}
	if !endpoint.ValidDNSName(strings.TrimSuffix(host, ".")) {
		return "host must be an IP address or a DNS name"
	}
	return ""
}

// parsePort parses a decimal port from 0 to 65535.
func parsePort(s string) (int, bool) {
	if len(s) == 0 || len(s) > 5 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n <= 65535
}

// sameBinding reports whether listening on a and on b (both valid
// listener addresses) would claim the same port: the ports are equal and
// not 0 (each port 0 gets its own free port), and the hosts are equal, or
// either host is empty or an unspecified address (0.0.0.0, [::]), which
// covers every interface. Names are not resolved, so "localhost:80" and
// "127.0.0.1:80" are not caught here; the second listener fails at start
// instead.
func sameBinding(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return false
	}
	na, _ := parsePort(pa)
	nb, _ := parsePort(pb)
	if na != nb || na == 0 {
		return false
	}
	return strings.EqualFold(ha, hb) || coversAll(ha) || coversAll(hb)
}

// coversAll reports whether listening on host means every interface.
func coversAll(host string) bool {
	if host == "" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsUnspecified()
}

// normalizeMatchHost lower-cases a route's match host and checks it: an
// IPv4 address, a DNS name, or "*." followed by a DNS name; no port.
func normalizeMatchHost(s string) (string, string) {
	h := strings.ToLower(s)
	if h == "" {
		return "", ""
	}
	if strings.Contains(h, ":") {
		return h, "must be a host name or IPv4 address without a port"
	}
	rest, wildcard := strings.CutPrefix(h, "*.")
	if strings.Contains(rest, "*") {
		return h, `wildcard must be the whole leftmost label, as in "*.example.com"`
	}
	if !wildcard {
		if a, err := netip.ParseAddr(rest); err == nil && a.Is4() {
			return h, ""
		}
	}
	if !endpoint.ValidDNSName(rest) {
		return h, `must be a host name such as "api.example.com" or "*.example.com"`
	}
	return h, ""
}

// checkPathPrefix checks a route's path prefix: it starts with "/" and
// holds no query, fragment, space or control character.
func checkPathPrefix(s string) string {
	switch {
	case !strings.HasPrefix(s, "/"):
		return `must start with "/"`
	case strings.ContainsAny(s, "?#"):
		return `must not contain "?" or "#"`
	case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return "must not contain spaces or control characters"
	}
	return ""
}

// validToken reports whether s is an RFC 9110 token (1*tchar), the
// syntax of an HTTP method and a field name.
func validToken(s string) bool { return httpguts.ValidHeaderFieldName(s) }

// maxPathShown bounds how much of a file path an error message repeats.
const maxPathShown = 512

// checkReadableFile checks that name is a regular file this process can
// open for reading. It checks the type before opening, so that a FIFO or
// device named by mistake cannot block or have side effects.
func checkReadableFile(name string) string {
	q := engine.QuoteMax(name, maxPathShown)
	fi, err := os.Stat(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Sprintf("file not found: %s", q)
		}
		return fmt.Sprintf("cannot read %s: %v", q, pathErrCause(err))
	}
	if !fi.Mode().IsRegular() {
		return fmt.Sprintf("not a regular file: %s", q)
	}
	f, err := os.Open(name)
	if err != nil {
		return fmt.Sprintf("cannot read %s: %v", q, pathErrCause(err))
	}
	f.Close()
	return ""
}

// pathErrCause strips the operation and path from a *fs.PathError, which
// the message already shows.
func pathErrCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// address reports whether s is a valid host:port for a listener or an
// endpoint (see checkAddress), reporting it if not.
func (p *parser) address(path string, n *yaml.Node, s string, listener bool) bool {
	if problem := checkAddress(s, listener); problem != "" {
		p.Add(n, path, "invalid address %s: %s", engine.Quote(s), problem)
		return false
	}
	return true
}

const maxNameLen = limits.MaxIDLen
