package discovery

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/levee-gw/levee/internal/endpoint"
)

// maxAddressLen bounds a decoded address: a 253-byte name, brackets, colon
// and a 5-digit port, with room to spare.
const maxAddressLen = 300

// parseAddress checks an address's raw JSON and returns its canonical form,
// or a phrase that follows "address ". See the package doc for the rules.
func parseAddress(raw []byte) (string, string) {
	s, present, problem := stringField(raw, maxAddressLen)
	switch {
	case !present:
		return "", "is required"
	case problem == tooLong:
		return "", "is too long"
	case problem != "":
		return "", problem
	}
	return canonicalAddress(s)
}

// canonicalAddress validates "host:port" and canonicalises it.
func canonicalAddress(s string) (string, string) {
	host, portStr, err := net.SplitHostPort(s)
	if err != nil {
		return "", "must be host:port (IPv6 in brackets)"
	}
	port, ok := parsePort(portStr)
	if !ok || port == 0 {
		return "", "port must be a number from 1 to 65535"
	}
	if host == "" {
		return "", "host is required"
	}
	bracketed := strings.HasPrefix(s, "[")
	var buf [maxAddressLen + 8]byte
	b := buf[:0]
	if a, err := netip.ParseAddr(host); err == nil {
		switch {
		case a.Zone() != "":
			return "", "IPv6 zones (%) are not allowed"
		case bracketed && !a.Is6():
			return "", "brackets are only for IPv6 addresses"
		case !bracketed && a.Is6():
			return "", "IPv6 addresses must be in brackets"
		}
		if bracketed {
			b = append(a.AppendTo(append(b, '[')), ']')
		} else {
			b = a.AppendTo(b)
		}
	} else {
		if bracketed {
			return "", "brackets must hold an IPv6 address"
		}
		if !endpoint.ValidDNSName(strings.TrimSuffix(host, ".")) {
			return "", "host must be an IP address or a DNS name"
		}
		for i := 0; i < len(host); i++ {
			c := host[i]
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			b = append(b, c)
		}
	}
	b = strconv.AppendInt(append(b, ':'), int64(port), 10)
	if string(b) == s { // already canonical: keep the caller's string
		return s, ""
	}
	return string(b), ""
}

// parsePort parses a decimal port of at most 5 ASCII digits.
func parsePort(s string) (int, bool) {
	if len(s) == 0 || len(s) > 5 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n <= 65535
}
