package config

import (
	"math"
	"net/textproto"
	"strings"

	"gopkg.in/yaml.v3"
)

// This file walks the parts of an upstream that choose and feed its
// balancer: `least_request`, `consistent_hash` and `discovery`.

// balancerOptions reads `least_request` and `consistent_hash` of the
// upstream at path (mapping n, fields f) and checks that each appears only
// with its balancer, which must have been read into u.Balancer already.
// balancerOK is false when `balancer` itself was invalid: the pairing is
// then not checked, since the balancer meant is unknown.
func (p *parser) balancerOptions(u *Upstream, path string, n *yaml.Node, f map[string]*yaml.Node, balancerOK bool) {
	mismatch := func(field, balancer string) {
		was := quote(u.Balancer)
		if f["balancer"] == nil {
			was += " (the default)"
		}
		p.add(firstKey(n, field), key(path, field), "only allowed with balancer %s; balancer is %s", balancer, was)
	}
	if v := f["least_request"]; v != nil {
		lr := p.leastRequest(key(path, "least_request"), v)
		if u.Balancer == BalancerLeastRequest {
			u.LeastRequest = lr
		} else if balancerOK {
			mismatch("least_request", BalancerLeastRequest)
		}
	} else if u.Balancer == BalancerLeastRequest {
		u.LeastRequest = defaultLeastRequest()
	}
	if v := f["consistent_hash"]; v != nil {
		ch := p.consistentHash(key(path, "consistent_hash"), v)
		if u.Balancer == BalancerConsistentHash {
			u.ConsistentHash = ch
		} else if balancerOK {
			mismatch("consistent_hash", BalancerConsistentHash)
		}
	} else if u.Balancer == BalancerConsistentHash {
		p.add(f["balancer"], key(path, "consistent_hash"), `required with balancer %s, as in {hash_on: "header:X-User"}`, BalancerConsistentHash)
	}
}

// leastRequest reads `least_request`.
func (p *parser) leastRequest(path string, n *yaml.Node) *LeastRequest {
	lr := defaultLeastRequest()
	f, ok := p.block(path, n, leastRequestBlock)
	if !ok {
		return lr
	}
	p.bind(f, n, path, leastRequestBlock, lr)
	return lr
}

// consistentHash reads `consistent_hash`, whose hash_on is required.
func (p *parser) consistentHash(path string, n *yaml.Node) *ConsistentHash {
	ch := &ConsistentHash{}
	f, ok := p.block(path, n, consistentHashBlock)
	if !ok {
		return ch
	}
	p.bind(f, n, path, consistentHashBlock, ch) // hash_on
	return ch
}

// checkHashOn normalises a `hash_on` value (normalizeHashOn).
var checkHashOn = checkStr(func(p *parser, path string, n *yaml.Node, s *string) bool {
	norm, problem := normalizeHashOn(*s)
	if problem != "" {
		p.add(n, path, "%s, got %s", problem, quote(*s))
		return false
	}
	*s = norm
	return true
})

// normalizeHashOn checks a `hash_on` value and returns its normalised
// form (see ConsistentHash.HashOn), or a problem phrased to precede
// ", got <value>".
func normalizeHashOn(s string) (string, string) {
	if s == HashOnClientIP || s == HashOnPath {
		return s, ""
	}
	kind, name, found := strings.Cut(s, ":")
	switch kind {
	case HashOnHeader, HashOnCookie, HashOnQuery:
	case HashOnClientIP, HashOnPath:
		return s, quote(kind) + " takes no name"
	default:
		return s, "must be " + hashOnForms
	}
	switch {
	case !found || name == "":
		return s, "needs a name after " + quote(kind+":")
	case len(name) > maxHashOnNameLen:
		return s, kind + " name must be at most 128 bytes"
	case kind == HashOnHeader && !validToken(name):
		return s, "header name must be an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"
	case kind == HashOnCookie && !validToken(name):
		return s, "cookie name must be an HTTP token (letters, digits and !#$%&'*+-.^_`|~)"
	case kind == HashOnQuery && strings.ContainsFunc(name, func(r rune) bool { return r < ' ' || r == 0x7f }):
		return s, "query key must not contain control characters"
	}
	if kind == HashOnHeader {
		name = textproto.CanonicalMIMEHeaderKey(name)
	}
	return kind + ":" + name, ""
}

// discovery reads `discovery`, which names exactly one source. A source
// key whose value is null, and `push: false`, name none.
func (p *parser) discovery(path string, n *yaml.Node) *Discovery {
	d := defaultDiscovery()
	f, ok := p.block(path, n, discoveryBlock)
	if !ok {
		return d
	}
	// file, push, max_drop_fraction, confirm_after and max_weight.
	bad := p.bind(f, n, path, discoveryBlock, d)
	sources := 0
	if f["file"] != nil {
		sources++
	}
	if v := f["etcd"]; v != nil {
		sources++
		d.Etcd = p.etcd(key(path, "etcd"), v)
	}
	// A push that is not a boolean still names the source meant, so that
	// it is not also reported as missing.
	if d.Push || bad["push"] {
		sources++
	}
	if sources != 1 {
		p.add(n, path, "exactly one of file, etcd or push is required")
	}
	return d
}

// fraction returns a YAML integer or float greater than 0 and at most 1.
func (p *parser) fraction(path string, n *yaml.Node) (float64, bool) {
	if n.Kind == yaml.AliasNode {
		return 0, false
	}
	var v float64
	tag := n.ShortTag()
	if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") || n.Decode(&v) != nil ||
		math.IsNaN(v) || v <= 0 || v > maxDropFraction {
		p.add(n, path, "must be a number greater than 0 and at most 1, got %s", describe(n))
		return 0, false
	}
	return v, true
}

// etcd reads `discovery.etcd`.
func (p *parser) etcd(path string, n *yaml.Node) *EtcdDiscovery {
	e := defaultEtcdDiscovery()
	f, ok := p.block(path, n, etcdBlock)
	if !ok {
		return e
	}
	e.Endpoints = p.etcdEndpoints(key(path, "endpoints"), f["endpoints"], n)
	p.bind(f, n, path, etcdBlock, e) // prefix and dial_timeout
	return e
}

// checkEtcdPrefix checks an etcd key prefix.
var checkEtcdPrefix = checkStr(func(p *parser, path string, n *yaml.Node, s *string) bool {
	if !strings.HasPrefix(*s, "/") || !strings.HasSuffix(*s, "/") {
		p.add(n, path, `must start and end with "/", as in "/levee/services/video/", got %s`, quote(*s))
		return false
	}
	return true
})

// checkNoNUL refuses a file name holding a NUL byte.
var checkNoNUL = checkStr(func(p *parser, path string, n *yaml.Node, s *string) bool {
	if strings.IndexByte(*s, 0) >= 0 {
		p.add(n, path, "must not contain a NUL byte, got %s", quoteMax(*s, maxPathShown))
		return false
	}
	return true
})

// etcdEndpoints reads `etcd.endpoints`: 1 to 16 distinct addresses.
func (p *parser) etcdEndpoints(path string, n, parent *yaml.Node) []string {
	if n == nil {
		p.add(parent, path, "required")
		return nil
	}
	items, ok := p.sequence(path, n)
	if !ok {
		return nil
	}
	if len(items) == 0 || len(items) > maxEtcdEndpoints {
		p.add(n, path, "must list 1 to %d etcd endpoints, got %d", maxEtcdEndpoints, len(items))
		return nil
	}
	out := make([]string, 0, len(items))
	first := make(map[string]int, len(items))
	for i, item := range items {
		ip := index(path, i)
		s, ok := p.str(ip, item)
		if !ok {
			continue
		}
		if problem := checkEtcdEndpoint(s); problem != "" {
			p.add(item, ip, "invalid etcd endpoint %s: %s", quote(s), problem)
			continue
		}
		norm := strings.ToLower(s)
		if j, dup := first[norm]; dup {
			p.add(item, ip, "duplicate etcd endpoint %s (first at endpoints[%d])", quote(s), j)
			continue
		}
		first[norm] = i
		out = append(out, s)
	}
	return out
}

// checkEtcdEndpoint checks an etcd member address: "host:port",
// "http://host:port" or "https://host:port", host:port as for an endpoint.
func checkEtcdEndpoint(s string) string {
	rest := s
	if scheme, after, found := strings.Cut(s, "://"); found {
		if scheme != "http" && scheme != "https" {
			return `scheme must be "http" or "https"`
		}
		rest = after
	}
	if strings.ContainsAny(rest, "/?#@") {
		return "must be host:port or http(s)://host:port, with no path, query or user"
	}
	return checkAddress(rest, false)
}
