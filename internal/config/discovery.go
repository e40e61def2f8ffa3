package config

import (
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
	"github.com/levee-gw/levee/internal/endpoint"
	"gopkg.in/yaml.v3"
)

// The discovery block (`discovery`, an upstream's): where its endpoints
// come from besides the list, and its `etcd` source.

// discovery reads `discovery`, which names exactly one source. A source
// key whose value is null, and `push: false`, name none.
func (p *parser) discovery(path string, n *yaml.Node) *Discovery {
	d := defaultDiscovery()
	f, ok := p.Block(path, n, discoveryBlock)
	if !ok {
		return d
	}
	// file, push, max_drop_fraction, confirm_after and max_weight.
	bad := p.Bind(f, n, path, discoveryBlock, d)
	sources := 0
	if f["file"] != nil {
		sources++
	}
	if v := f["etcd"]; v != nil {
		sources++
		d.Etcd = p.etcd(engine.Key(path, "etcd"), v)
	}
	if v := f["dns"]; v != nil {
		sources++
		d.DNS = p.dnsDiscovery(engine.Key(path, "dns"), v)
	}
	if v := f["dns_srv"]; v != nil {
		sources++
		d.DNSSRV = p.dnsSRVDiscovery(engine.Key(path, "dns_srv"), v)
	}
	// A push that is not a boolean still names the source meant, so that
	// it is not also reported as missing.
	if d.Push || bad["push"] {
		sources++
	}
	if sources != 1 {
		p.Add(n, path, "exactly one of file, etcd, dns, dns_srv or push is required")
	}
	return d
}

// etcd reads `discovery.etcd`.
func (p *parser) etcd(path string, n *yaml.Node) *EtcdDiscovery {
	e := defaultEtcdDiscovery()
	f, ok := p.Block(path, n, etcdBlock)
	if !ok {
		return e
	}
	e.Endpoints = p.etcdEndpoints(engine.Key(path, "endpoints"), f["endpoints"], n)
	p.Bind(f, n, path, etcdBlock, e) // prefix and dial_timeout
	return e
}

// checkEtcdPrefix checks an etcd key prefix.
var checkEtcdPrefix = engine.CheckStr(func(p *engine.Parser, path string, n *yaml.Node, s *string) bool {
	if !strings.HasPrefix(*s, "/") || !strings.HasSuffix(*s, "/") {
		p.Add(n, path, `must start and end with "/", as in "/levee/services/video/", got %s`, engine.Quote(*s))
		return false
	}
	return true
})

// checkNoNUL refuses a file name holding a NUL byte.
var checkNoNUL = engine.CheckStr(func(p *engine.Parser, path string, n *yaml.Node, s *string) bool {
	if strings.IndexByte(*s, 0) >= 0 {
		p.Add(n, path, "must not contain a NUL byte, got %s", engine.QuoteMax(*s, maxPathShown))
		return false
	}
	return true
})

// etcdEndpoints reads `etcd.endpoints`: 1 to 16 distinct addresses.
func (p *parser) etcdEndpoints(path string, n, parent *yaml.Node) []string {
	if n == nil {
		p.Add(parent, path, "required")
		return nil
	}
	items, ok := p.Sequence(path, n)
	if !ok {
		return nil
	}
	if len(items) == 0 || len(items) > maxEtcdEndpoints {
		p.Add(n, path, "must list 1 to %d etcd endpoints, got %d", maxEtcdEndpoints, len(items))
		return nil
	}
	out := make([]string, 0, len(items))
	first := make(map[string]int, len(items))
	for i, item := range items {
		ip := engine.Index(path, i)
		s, ok := p.Str(ip, item)
		if !ok {
			continue
		}
		if problem := checkEtcdEndpoint(s); problem != "" {
			p.Add(item, ip, "invalid etcd endpoint %s: %s", engine.Quote(s), problem)
			continue
		}
		norm := strings.ToLower(s)
		if j, dup := first[norm]; dup {
			p.Add(item, ip, "duplicate etcd endpoint %s (first at endpoints[%d])", engine.Quote(s), j)
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

// The field tables of this file's blocks (fields.go says how a table is read).
var (
	etcdBlock = engine.NewBlock(
		engine.Field{Name: "endpoints", Kind: engine.KindList, Required: true, MinItems: 1, MaxItems: maxEtcdEndpoints, Item: &engine.Field{Kind: engine.KindString},
			Doc: "etcd members: host:port or http(s)://host:port, distinct"},
		engine.Field{Name: "prefix", Kind: engine.KindString, Required: true, Pattern: "^/(.*/)?$", Doc: `key prefix of the upstream's instances, starting and ending with "/"`,
			Check: checkEtcdPrefix, Bind: engine.At(func(e *EtcdDiscovery) *string { return &e.Prefix })},
		engine.Field{Name: "dial_timeout", Kind: engine.KindDuration, Def: DefaultEtcdDialTimeout, Doc: "time to connect to etcd",
			Bind: engine.At(func(e *EtcdDiscovery) *time.Duration { return &e.DialTimeout })},
	)
	discoveryBlock = engine.NewBlock(
		engine.Field{Name: "file", Kind: engine.KindString, NonEmpty: true, Doc: "JSON file of instances, watched for changes",
			Check: checkNoNUL, Bind: engine.At(func(d *Discovery) *string { return &d.File })},
		engine.Field{Name: "etcd", Kind: engine.KindBlock, Sub: etcdBlock, Doc: "instances under a prefix of an etcd cluster"},
		engine.Field{Name: "dns", Kind: engine.KindBlock, Sub: dnsBlock, Doc: "every A/AAAA address of a name, re-resolved on the TTL"},
		engine.Field{Name: "dns_srv", Kind: engine.KindBlock, Sub: dnsSRVBlock, Doc: "the targets of a SRV name, re-resolved on the TTL"},
		engine.Field{Name: "push", Kind: engine.KindBool, Doc: "instances pushed through the admin API",
			Bind: engine.At(func(d *Discovery) *bool { return &d.Push })},
		engine.Field{Name: "max_drop_fraction", Kind: engine.KindFraction, Def: DefaultDiscoveryMaxDropFraction,
			Doc:  "largest share of endpoints one update may remove before it is held for confirmation",
			Bind: engine.At(func(d *Discovery) *float64 { return &d.MaxDropFraction })},
		engine.Field{Name: "confirm_after", Kind: engine.KindDuration, Def: DefaultDiscoveryConfirmAfter, Doc: "how long a held update must persist to apply",
			Bind: engine.At(func(d *Discovery) *time.Duration { return &d.ConfirmAfter })},
		engine.Field{Name: "max_weight", Kind: engine.KindInt, Lo: minDiscoveryMaxWeight, Hi: maxDiscoveryMaxWeight, Def: DefaultDiscoveryMaxWeight,
			Doc:  "cap on a discovered instance's weight",
			Bind: engine.At(func(d *Discovery) *uint32 { return &d.MaxWeight })},
	)
)

// Discovery takes an upstream's endpoints from a registry (`discovery`).
// Exactly one source is set: File, Etcd, DNS, DNSSRV or Push. Instances from any source
// are normalised and checked before use; see "Discovery" in
// docs/configuration.md.
type Discovery struct {
	// File is the path of a JSON file holding an array of instances
	// (`file`, a non-empty string). It need not exist when the
	// configuration is parsed: the source waits for it. A relative path
	// is relative to the process's working directory. Empty when another
	// source is set.
	File string
	// Etcd reads instances from an etcd v3 cluster, one key per instance
	// under a prefix (`etcd`). nil when another source is set.
	Etcd *EtcdDiscovery
	// DNS takes the endpoints from a name's A and AAAA records (`dns`).
	// nil when another source is set.
	DNS *DNSDiscovery
	// DNSSRV takes the endpoints from SRV records (`dns_srv`). nil when
	// another source is set.
	DNSSRV *DNSSRVDiscovery
	// Push, when true, takes instances only from the admin API,
	// PUT /api/v1/upstreams/{name}/endpoints (`push`, true or false).
	// `push: false` counts as no source. false when another source is set.
	Push bool
	// MaxDropFraction is the delta guard: an update that would drain or
	// remove more than this share of the upstream's active weight at once
	// is held until it has persisted for ConfirmAfter or an operator
	// confirms it (`max_drop_fraction`, a number greater than 0 and at
	// most 1). Default DefaultDiscoveryMaxDropFraction (0.5). 1 turns the
	// guard off.
	MaxDropFraction float64
	// ConfirmAfter is how long a held update must persist before it is
	// applied without an operator's confirmation (`confirm_after`, a
	// duration greater than 0). Default DefaultDiscoveryConfirmAfter
	// (30s).
	ConfirmAfter time.Duration
	// MaxWeight is the largest weight, in whole units, that a registry
	// may send for one instance; a larger one is rejected as too_large
	// (`max_weight`, a whole number 1 to 1000000). Default
	// DefaultDiscoveryMaxWeight (10000). Registry weights may carry two
	// decimals; this bound applies to the value as sent.
	MaxWeight uint32
}

// Source returns the name of d's source as written in YAML: "file",
// "etcd", "dns", "dns_srv" or "push".
func (d *Discovery) Source() string {
	switch {
	case d.File != "":
		return "file"
	case d.Etcd != nil:
		return "etcd"
	case d.DNS != nil:
		return "dns"
	case d.DNSSRV != nil:
		return "dns_srv"
	default:
		return "push"
	}
}

// EtcdDiscovery reads instances from etcd v3 (`discovery.etcd`): the value
// of every key under Prefix is one instance.
type EtcdDiscovery struct {
	// Endpoints are the etcd cluster members to dial (`endpoints`, 1 to 16
	// distinct items), each "host:port", "http://host:port" or
	// "https://host:port", kept as written. host:port follows the rules
	// of Endpoint.Address.
	Endpoints []string
	// Prefix is the key prefix whose keys are this upstream's instances
	// (`prefix`, required): it starts and ends with "/", as in
	// "/levee/services/video/".
	Prefix string
	// DialTimeout bounds establishing a connection to etcd
	// (`dial_timeout`, a duration greater than 0). Default
	// DefaultEtcdDialTimeout (2s).
	DialTimeout time.Duration
}

// Defaults of this file's fields, each the def of its table entry.
const (
	// DefaultDiscoveryMaxDropFraction is Discovery.MaxDropFraction when
	// omitted.
	DefaultDiscoveryMaxDropFraction = 0.5
	// DefaultDiscoveryConfirmAfter is Discovery.ConfirmAfter when omitted.
	DefaultDiscoveryConfirmAfter = 30 * time.Second
	// DefaultDiscoveryMaxWeight is Discovery.MaxWeight when omitted: the
	// same cap as a static endpoint's weight.
	DefaultDiscoveryMaxWeight uint32 = endpoint.MaxWeight
	// DefaultEtcdDialTimeout is EtcdDiscovery.DialTimeout when omitted.
	DefaultEtcdDialTimeout = 2 * time.Second
)

// Bounds of this file's fields, used by their table entries and readers.
const (
	maxDropFraction       = 1.0
	minDiscoveryMaxWeight = 1
	maxDiscoveryMaxWeight = 1000000
	maxEtcdEndpoints      = 16
)

func defaultDiscovery() *Discovery { return engine.WithDefaults(discoveryBlock, &Discovery{}) }

func defaultEtcdDiscovery() *EtcdDiscovery { return engine.WithDefaults(etcdBlock, &EtcdDiscovery{}) }
