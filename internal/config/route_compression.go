package config

import (
	"slices"
	"strings"

	"github.com/levee-gw/levee/internal/config/engine"
	"gopkg.in/yaml.v3"
)

// A route's `compression` block: which answers levee compresses, and how
// (docs/configuration.md "Compression"). Per route only: there is no
// server-wide default, so that turning it on is a decision about each
// route's answers (see the BREACH note in the docs).

var compressionBlock = engine.NewBlock(
	engine.Field{Name: "types", Kind: engine.KindList, MinItems: 1, MaxItems: MaxCompressionTypes, Item: &engine.Field{Kind: engine.KindString},
		Doc: `media types compressed, "type/subtype" or "type/*"; ["application/json", "application/x-ndjson", "text/*"] when omitted`},
	engine.Field{Name: "min_bytes", Kind: engine.KindSize, Lo: 0, Hi: 64 << 20, Def: DefaultCompressionMinBytes,
		Doc:  "an answer of known length below this is sent as is (one of unknown length is compressed)",
		Bind: engine.At(func(c *Compression) *int64 { return &c.MinBytes })},
	engine.Field{Name: "level", Kind: engine.KindEnum, Enum: compressionLevels, Def: DefaultCompressionLevel,
		Doc:  "CPU spent per byte: fast (gzip 1, zstd fastest, brotli 1), default (gzip 5, zstd default, brotli 4) or best (gzip 9, zstd better, brotli 7)",
		Bind: engine.At(func(c *Compression) *string { return &c.Level })},
	engine.Field{Name: "encodings", Kind: engine.KindList, MinItems: 1, MaxItems: 3, Item: &engine.Field{Kind: engine.KindEnum, Enum: compressionEncodings},
		Doc: `codings offered, in order of preference (which breaks ties of q-values); ["zstd", "br", "gzip"] when omitted`},
)

// Compression is a route's `compression`: its answers are compressed by
// the client's Accept-Encoding.
type Compression struct {
	// Types are the media types compressed (`types`), stored lower case:
	// "type/subtype" or "type/*". Default DefaultCompressionTypes.
	Types []string
	// MinBytes (`min_bytes`, a size): an answer of known length below it
	// is not compressed. Default DefaultCompressionMinBytes (1 KiB).
	MinBytes int64
	// Level (`level`): "fast" (the default), "default" or "best".
	Level string
	// Encodings (`encodings`): "zstd", "br" and "gzip", in levee's order
	// of preference. Default DefaultCompressionEncodings.
	Encodings []string
}

// MaxCompressionTypes bounds compression.types.
const MaxCompressionTypes = 32

// Defaults of compression's fields.
const (
	DefaultCompressionMinBytes int64 = 1024
	DefaultCompressionLevel          = "fast"
)

// DefaultCompressionTypes is compression.types when omitted. A new slice
// each call.
func DefaultCompressionTypes() []string {
	return []string{"application/json", "application/x-ndjson", "text/*"}
}

// DefaultCompressionEncodings is compression.encodings when omitted. A
// new slice each call.
func DefaultCompressionEncodings() []string { return []string{"zstd", "br", "gzip"} }

var (
	compressionLevels    = []string{"fast", "default", "best"}
	compressionEncodings = []string{"zstd", "br", "gzip"}
)

// compression reads a route's `compression`.
func (p *parser) compression(path string, n *yaml.Node) *Compression {
	f, ok := p.Block(path, n, compressionBlock)
	if !ok {
		return nil
	}
	c := engine.WithDefaults(compressionBlock, &Compression{Types: DefaultCompressionTypes(), Encodings: DefaultCompressionEncodings()})
	bad := p.Bind(f, n, path, compressionBlock, c)
	if v := f["types"]; v != nil {
		c.Types = p.compressionTypes(engine.Key(path, "types"), v)
	}
	if v := f["encodings"]; v != nil {
		c.Encodings = p.compressionEncodings(engine.Key(path, "encodings"), v)
	}
	if len(bad) > 0 || c.Types == nil || c.Encodings == nil {
		return nil
	}
	return c
}

// compressionTypes reads compression.types: each "type/subtype" or
// "type/*" (tokens, no parameters), stored lower case, no duplicates.
func (p *parser) compressionTypes(path string, n *yaml.Node) []string {
	items, ok := p.Sequence(path, n)
	if !ok {
		return nil
	}
	switch {
	case len(items) == 0:
		p.Add(n, path, "must list at least one media type (omit compression to compress nothing)")
		return nil
	case len(items) > MaxCompressionTypes:
		p.Add(n, path, "at most %d media types, got %d", MaxCompressionTypes, len(items))
		return nil
	}
	out, good := distinctStrings(p.Parser, path, items, "media type ", func(s string) (string, string) {
		typ, sub, found := strings.Cut(s, "/")
		if !found || !validToken(typ) || typ == "*" || !(sub == "*" || validToken(sub)) {
			return "", `must be a media type "type/subtype" or "type/*" without parameters, such as "application/json" or "text/*", got ` + engine.Quote(s)
		}
		return strings.ToLower(s), ""
	})
	if !good {
		return nil
	}
	return out
}

// compressionEncodings reads compression.encodings: zstd, br and gzip, no
// duplicates.
func (p *parser) compressionEncodings(path string, n *yaml.Node) []string {
	items, ok := p.Sequence(path, n)
	if !ok {
		return nil
	}
	if len(items) == 0 || len(items) > len(compressionEncodings) {
		p.Add(n, path, "must list 1 to %d of %s, got %d", len(compressionEncodings), engine.QuotedList(compressionEncodings), len(items))
		return nil
	}
	out, good := distinctStrings(p.Parser, path, items, "encoding ", func(s string) (string, string) {
		if !slices.Contains(compressionEncodings, s) {
			return "", "must be one of " + engine.QuotedList(compressionEncodings) + ", got " + engine.Quote(s) + engine.Suggest(s, compressionEncodings)
		}
		return s, ""
	})
	if !good {
		return nil
	}
	return out
}
