package config

import (
	"reflect"

	"gopkg.in/yaml.v3"
)

// This file is the one description of the config file's fields: for each
// block, its fields in the walker's order (of two names equally close to a
// misspelt key, "did you mean" offers the earlier), each with its
// name, kind, bounds, default and a doc line. The walker takes a block's
// allowed keys (and so its "did you mean" candidates) from here, reads
// every field that has a bind generically (bind.go: kind, bounds, whether
// it is required or may be empty and the messages then, and its own
// check), and the JSON Schema in deploy/levee.schema.json is generated
// from the same tables (schema.go). A field's default is its entry's def
// (the exported Default* constant it names): the default* constructors
// that the reader starts from take it from the table (withDefaults), so
// that the two cannot drift (TestFieldDefaults, and
// TestFieldTableDrivesDefaultsReloadAndDocs against Parse). So does
// whether a reload applies a change to the field (reload, reload.go) and
// docs/configuration.md's field reference (reference.go).
// Cross-field rules run in the block's reader once p.bind has read it,
// consulting the set of fields p.bind found missing or invalid.
//
// Every field that is a value has a bind. A field without one is read by
// hand in its block's file, for the reason given (its entry
// still gives the schema its kind and bounds):
//   - lists whose items are checked against each other (duplicates) or
//     against other parts of the file: admin.tokens, discovery.etcd.endpoints,
//     upstreams.*.endpoints (required unless discovery is set), retry.on
//     (conditions or statuses), health_check.http.expect, zones.failover
//     (not the local zone), routes, match.methods, forward_trailers,
//     upgrades, apps, api_key_sha256 (unique across apps) and grants
//     (routes of the file);
//   - maps of named blocks: upstreams, apps[].route_limits (keys are grants);
//   - limits.max_concurrency, of two forms whose kind decides min, max
//     and max_queue's default;
//   - blocks with a rule across their fields or with a field above, whose
//     reader runs p.bind and then the rule: admin (omitted, it reports
//     admin.listen), memory (soft below hard watermark), least_request and
//     consistent_hash (only with their balancer), discovery (exactly one
//     source), etcd, retry (an upstream's or a route's, which refuses
//     budget), backoff (max at least base), limits, health_check (http or
//     tcp; timeout at most interval), http, outlier_detection (ejection
//     times), zones, match (its methods feed the overlap check),
//     anonymous_limits (only with auth none) and apps[].limits (burst
//     needs rate; burst/rate bounded).

// fieldKind is how a field's value is written.
type fieldKind uint8

const (
	kindString   fieldKind = iota + 1 // a string
	kindEnum                          // a string, one of field.enum
	kindInt                           // a YAML integer from lo to hi
	kindNumber                        // a YAML integer or float from flo to fhi
	kindFraction                      // a number greater than 0 and at most 1
	kindBool                          // true or false
	kindDuration                      // a Go duration string, greater than 0
	kindSize                          // a byte count: an integer or "64KiB", from lo to hi
	kindBlock                         // a mapping described by sub (null: every default)
	kindMap                           // a mapping of names to blocks described by sub
	kindList                          // a sequence of items described by item
	kindEither                        // any one of the forms in field.either
)

// field describes one key of a block.
type field struct {
	name string
	kind fieldKind
	doc  string
	// lo and hi bound kindInt and kindSize; flo and fhi kindNumber.
	lo, hi   int64
	flo, fhi float64
	enum     []string
	// def is the value an omitted field takes, as the Go value of the
	// typed field (a time.Duration for a duration); nil when there is no
	// fixed default (required, or it depends on other fields).
	def any
	// required fields must be set (and non-empty for strings). The
	// walker reports an omitted bound one with missing ("required" when
	// empty), at the enclosing mapping.
	required bool
	missing  string
	// nonEmpty strings may be omitted but not set to "". The walker
	// reports a bound string or enum that is required or nonEmpty and set
	// to "" with empty ("required" for a required field, "must not be
	// empty" otherwise).
	nonEmpty bool
	empty    string
	// check is a bound field's own rule (a readable file, an address, a
	// name), run after its value was read and stored: it gets the pointer
	// bind returned, may rewrite the value (normalise it), reports what
	// is wrong and says whether the value is valid. See the check*
	// helpers below.
	check func(p *parser, path string, n *yaml.Node, ptr any) bool
	// sub describes a kindBlock's or kindMap's values.
	sub *block
	// item describes a kindList's items.
	item *field
	// either lists the forms of a kindEither value.
	either []field
	// minItems and maxItems bound the items of a kindList, or the entries
	// of a kindMap (maxItems 0: no bound).
	minItems, maxItems int
	// pattern is a regular expression a kindString must match (the schema
	// only: the walker checks the same rule by hand).
	pattern string
	// omit names fields of sub that this use of the block refuses (a
	// route's retry has no budget); they stay keys, for a better message.
	omit []string
	// bind returns where the value is stored in the struct that the block
	// is read into; nil when the field is read by hand.
	bind func(dst any) any
	// secret fields hold a credential (or what stands for one, such as a
	// key's digest): GET /api/v1/config shows config.Redacted instead
	// (effective.go). notSecret says why a field whose name sounds like a
	// secret is not one (TestSecretFieldsMarked wants one or the other).
	secret    bool
	notSecret string
	// reload is what a reload does with a change to the field: apply it
	// (reloadApplied, the zero value) or refuse it, a restart needed
	// (reload.go). ReloadRefusals and docs/configuration.md read it.
	reload reloadRule
}

// block is the description of one mapping of the file.
type block struct {
	fields []field
	keys   []string // the field names in order: the walker's allowed keys
}

// newBlock returns a block of fields, its keys in the order given.
func newBlock(fields ...field) *block {
	b := &block{fields: fields, keys: make([]string, len(fields))}
	for i, f := range fields {
		b.keys[i] = f.name
	}
	return b
}

// at returns a bind that takes a *T and returns the address of one of
// its fields.
func at[T, V any](f func(*T) *V) func(any) any {
	return func(dst any) any { return f(dst.(*T)) }
}

// opt returns a bind of an optional block held by pointer (nil when
// omitted): it allocates the block with mk, which gives its defaults,
// when the field is set.
func opt[T, V any](f func(*T) **V, mk func() *V) func(any) any {
	return func(dst any) any {
		pp := f(dst.(*T))
		if *pp == nil {
			*pp = mk()
		}
		return *pp
	}
}

// The blocks of the file, from the leaves up (a block names its sub-blocks).
var ()

// withDefaults sets each field of v that block b binds and gives a
// default (def) to that default, and returns v: the default* constructors
// take their values from the tables this way, so a default is written
// once, in its field's entry. Sub-blocks are not entered (a bind may
// allocate an optional one); their constructors call withDefaults in
// turn. Values that are not one table default (lists such as retry's on,
// limits that depend on max_concurrency) are set by the constructor.
func withDefaults[T any](b *block, v *T) *T {
	for i := range b.fields {
		f := &b.fields[i]
		if f.bind == nil || f.def == nil || f.kind == kindBlock || f.kind == kindMap {
			continue
		}
		reflect.ValueOf(f.bind(v)).Elem().Set(reflect.ValueOf(f.def))
	}
	return v
}
