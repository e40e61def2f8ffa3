package config

import (
	"net/textproto"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// An upstream's balancer (`balancer`) and its options' blocks
// (`least_request`, `consistent_hash`).

// The field tables of this file's blocks (fields.go says how a table is read).
var (
	leastRequestBlock = engine.NewBlock(
		engine.Field{Name: "ewma", Kind: engine.KindBool, Def: DefaultLeastRequestEWMA, Doc: "weigh in-flight requests by a moving average of latency",
			Bind: engine.At(func(l *LeastRequest) *bool { return &l.EWMA })},
		engine.Field{Name: "tau", Kind: engine.KindDuration, Def: DefaultLeastRequestTau, Doc: "time constant of the latency average",
			Bind: engine.At(func(l *LeastRequest) *time.Duration { return &l.Tau })},
	)
	consistentHashBlock = engine.NewBlock(
		engine.Field{Name: "hash_on", Kind: engine.KindString, Required: true, Doc: hashOnForms,
			Check: checkHashOn, Bind: engine.At(func(c *ConsistentHash) *string { return &c.HashOn })},
	)
)

// LeastRequest tunes the least_request balancer (`least_request`): power
// of two choices over the endpoints' in-flight requests, scaled by weight.
type LeastRequest struct {
	// EWMA, when true, also weighs each endpoint's decayed latency
	// estimate (an exponentially weighted moving average) into the choice
	// (`ewma`, true or false). Default DefaultLeastRequestEWMA (false):
	// in-flight requests only.
	EWMA bool
	// Tau is the decay time of the latency estimate: a sample's influence
	// falls to 1/e after Tau (`tau`, a duration greater than 0). Default
	// DefaultLeastRequestTau (10s). Used only when EWMA is true, but
	// validated either way.
	Tau time.Duration
}

// ConsistentHash configures the consistent_hash balancer
// (`consistent_hash`): requests with the same key go to the same endpoint
// while the endpoint set is stable.
type ConsistentHash struct {
	// HashOn names the request property hashed (`hash_on`, required), in
	// normalised form: "header:NAME" with NAME canonicalised as
	// textproto.CanonicalMIMEHeaderKey does ("header:X-User"),
	// "cookie:NAME" and "query:NAME" with NAME as written (case matters),
	// "client_ip" or "path". NAME is 1 to 128 bytes: an RFC 7230 token
	// for a header or a cookie name; for a query key any bytes except
	// control characters, compared with the decoded key. Use Key to split
	// it.
	HashOn string
}

// Key splits HashOn into its kind (HashOnHeader, HashOnCookie,
// HashOnQuery, HashOnClientIP or HashOnPath) and the name it carries,
// which is empty for client_ip and path.
func (c ConsistentHash) Key() (kind, name string) {
	kind, name, _ = strings.Cut(c.HashOn, ":")
	return kind, name
}

// balancerOptions reads `least_request` and `consistent_hash` of the
// upstream at path (mapping n, fields f) and checks that each appears only
// with its balancer, which must have been read into u.Balancer already.
// balancerOK is false when `balancer` itself was invalid: the pairing is
// then not checked, since the balancer meant is unknown.
func (p *parser) balancerOptions(u *Upstream, path string, n *yaml.Node, f map[string]*yaml.Node, balancerOK bool) {
	mismatch := func(field, balancer string) {
		was := engine.Quote(u.Balancer)
		if f["balancer"] == nil {
			was += " (the default)"
		}
		p.Add(firstKey(n, field), engine.Key(path, field), "only allowed with balancer %s; balancer is %s", balancer, was)
	}
	if v := f["least_request"]; v != nil {
		lr := p.leastRequest(engine.Key(path, "least_request"), v)
		if u.Balancer == BalancerLeastRequest {
			u.LeastRequest = lr
		} else if balancerOK {
			mismatch("least_request", BalancerLeastRequest)
		}
	} else if u.Balancer == BalancerLeastRequest {
		u.LeastRequest = defaultLeastRequest()
	}
	if v := f["consistent_hash"]; v != nil {
		ch := p.consistentHash(engine.Key(path, "consistent_hash"), v)
		if u.Balancer == BalancerConsistentHash {
			u.ConsistentHash = ch
		} else if balancerOK {
			mismatch("consistent_hash", BalancerConsistentHash)
		}
	} else if u.Balancer == BalancerConsistentHash {
		p.Add(f["balancer"], engine.Key(path, "consistent_hash"), `required with balancer %s, as in {hash_on: "header:X-User"}`, BalancerConsistentHash)
	}
}

// leastRequest reads `least_request`.
func (p *parser) leastRequest(path string, n *yaml.Node) *LeastRequest {
	lr := defaultLeastRequest()
	f, ok := p.Block(path, n, leastRequestBlock)
	if !ok {
		return lr
	}
	p.Bind(f, n, path, leastRequestBlock, lr)
	return lr
}

// consistentHash reads `consistent_hash`, whose hash_on is required.
func (p *parser) consistentHash(path string, n *yaml.Node) *ConsistentHash {
	ch := &ConsistentHash{}
	f, ok := p.Block(path, n, consistentHashBlock)
	if !ok {
		return ch
	}
	p.Bind(f, n, path, consistentHashBlock, ch) // hash_on
	return ch
}

// checkHashOn normalises a `hash_on` value (normalizeHashOn).
var checkHashOn = engine.CheckStr(func(p *engine.Parser, path string, n *yaml.Node, s *string) bool {
	norm, problem := normalizeHashOn(*s)
	if problem != "" {
		p.Add(n, path, "%s, got %s", problem, engine.Quote(*s))
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
		return s, engine.Quote(kind) + " takes no name"
	default:
		return s, "must be " + hashOnForms
	}
	switch {
	case !found || name == "":
		return s, "needs a name after " + engine.Quote(kind+":")
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

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultBalancer is Upstream.Balancer when omitted.
	DefaultBalancer = BalancerWeightedRoundRobin
	// DefaultLeastRequestEWMA is LeastRequest.EWMA when omitted: in-flight
	// requests only.
	DefaultLeastRequestEWMA = false
	// DefaultLeastRequestTau is LeastRequest.Tau when omitted.
	DefaultLeastRequestTau = 10 * time.Second
)

const maxHashOnNameLen = 128

// The accepted values of Upstream.Balancer.
const (
	BalancerWeightedRoundRobin = "weighted_round_robin"
	BalancerLeastRequest       = "least_request"
	BalancerConsistentHash     = "consistent_hash"
)

// balancers are the accepted values of Upstream.Balancer.
var balancers = []string{BalancerWeightedRoundRobin, BalancerLeastRequest, BalancerConsistentHash}

// hashOnForms are the forms of ConsistentHash.HashOn, as error messages
// list them.
const hashOnForms = `"header:NAME", "cookie:NAME", "query:NAME", "client_ip" or "path"`

func defaultLeastRequest() *LeastRequest {
	return engine.WithDefaults(leastRequestBlock, &LeastRequest{})
}
