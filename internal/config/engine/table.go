package engine

// The field tables: a Block describes one mapping of the file, a Field one
// of its keys (its kind, bounds, default, reload rule, doc line and where
// its value is stored). Package config writes one table per YAML block,
// beside the block's Go type; everything generic (reading, defaults, the
// JSON Schema, the effective rendering, the reload rule and the docs'
// field reference) is driven by them.

import (
	"reflect"

	"gopkg.in/yaml.v3"
)

// fieldKind is how a field's value is written.
type Kind uint8

const (
	KindString   Kind = iota + 1 // a string
	KindEnum                     // a string, one of field.enum
	KindInt                      // a YAML integer from lo to hi
	KindNumber                   // a YAML integer or float from flo to fhi
	KindFraction                 // a number greater than 0 and at most 1
	KindBool                     // true or false
	KindDuration                 // a Go duration string, greater than 0
	KindSize                     // a byte count: an integer or "64KiB", from lo to hi
	KindBlock                    // a mapping described by sub (null: every default)
	KindMap                      // a mapping of names to blocks described by sub
	KindList                     // a sequence of items described by item
	KindEither                   // any one of the forms in field.either
)

// Field describes one key of a block.
type Field struct {
	Name string
	Kind Kind
	Doc  string
	// lo and hi bound kindInt and kindSize; flo and fhi kindNumber.
	Lo, Hi   int64
	Flo, Fhi float64
	Enum     []string
	// def is the value an omitted field takes, as the Go value of the
	// typed field (a time.Duration for a duration); nil when there is no
	// fixed default (required, or it depends on other fields).
	Def any
	// required fields must be set (and non-empty for strings). The
	// walker reports an omitted bound one with missing ("required" when
	// empty), at the enclosing mapping.
	Required bool
	Missing  string
	// nonEmpty strings may be omitted but not set to "". The walker
	// reports a bound string or enum that is required or nonEmpty and set
	// to "" with empty ("required" for a required field, "must not be
	// empty" otherwise).
	NonEmpty bool
	Empty    string
	// check is a bound field's own rule (a readable file, an address, a
	// name), run after its value was read and stored: it gets the pointer
	// bind returned, may rewrite the value (normalise it), reports what
	// is wrong and says whether the value is valid. See the check*
	// helpers below.
	Check func(p *Parser, path string, n *yaml.Node, ptr any) bool
	// sub describes a kindBlock's or kindMap's values.
	Sub *Block
	// item describes a kindList's items.
	Item *Field
	// either lists the forms of a kindEither value.
	Either []Field
	// minItems and maxItems bound the items of a kindList, or the entries
	// of a kindMap (maxItems 0: no bound).
	MinItems, MaxItems int
	// pattern is a regular expression a kindString must match (the schema
	// only: the walker checks the same rule by hand).
	Pattern string
	// omit names fields of sub that this use of the block refuses (a
	// route's retry has no budget); they stay keys, for a better message.
	Omit []string
	// bind returns where the value is stored in the struct that the block
	// is read into; nil when the field is read by hand.
	Bind func(dst any) any
	// secret fields hold a credential (or what stands for one, such as a
	// key's digest): GET /api/v1/config shows config.Redacted instead
	// (Renderer). NotSecret says why a field whose name sounds like a
	// secret is not one (TestSecretFieldsMarked wants one or the other).
	Secret    bool
	NotSecret string
	// reload is what a reload does with a change to the field: apply it
	// (reloadApplied, the zero value) or refuse it, a restart needed
	// (ReloadRule). ReloadRefusals and Reference read it.
	Reload ReloadRule
}

// Block is the description of one mapping of the file.
type Block struct {
	Fields []Field
	Keys   []string // the field names in order: the walker's allowed keys
}

// NewBlock returns a block of fields, its keys in the order given.
func NewBlock(fields ...Field) *Block {
	b := &Block{Fields: fields, Keys: make([]string, len(fields))}
	for i, f := range fields {
		b.Keys[i] = f.Name
	}
	return b
}

// At returns a bind that takes a *T and returns the address of one of
// its fields.
func At[T, V any](f func(*T) *V) func(any) any {
	return func(dst any) any { return f(dst.(*T)) }
}

// Opt returns a bind of an optional block held by pointer (nil when
// omitted): it allocates the block with mk, which gives its defaults,
// when the field is set.
func Opt[T, V any](f func(*T) **V, mk func() *V) func(any) any {
	return func(dst any) any {
		pp := f(dst.(*T))
		if *pp == nil {
			*pp = mk()
		}
		return *pp
	}
}

// WithDefaults sets each field of v that block b binds and gives a
// default (def) to that default, and returns v: the default* constructors
// take their values from the tables this way, so a default is written
// once, in its field's entry. Sub-blocks are not entered (a bind may
// allocate an optional one); their constructors call WithDefaults in
// turn. Values that are not one table default (lists such as retry's on,
// limits that depend on max_concurrency) are set by the constructor.
func WithDefaults[T any](b *Block, v *T) *T {
	for i := range b.Fields {
		f := &b.Fields[i]
		if f.Bind == nil || f.Def == nil || f.Kind == KindBlock || f.Kind == KindMap {
			continue
		}
		reflect.ValueOf(f.Bind(v)).Elem().Set(reflect.ValueOf(f.Def))
	}
	return v
}

// Field returns b's field of that name; it panics if there is none, so
// that a misspelt name fails every test that reaches it.
func (b *Block) Field(name string) *Field {
	for i := range b.Fields {
		if b.Fields[i].Name == name {
			return &b.Fields[i]
		}
	}
	panic("config: no field " + name)
}

// NoUpperBound is the hi of an int field that has no bound of its own
// (the largest int on every platform): its message says "from lo up".
const NoUpperBound = 1<<31 - 1

// ReloadRule is what a reload does with a change to one field (its
// Field.Reload): ReloadRefusals applies the rule and the docs' field
// reference shows it, so a reload check and the docs cannot disagree with
// the table.
type ReloadRule uint8

const (
	// ReloadApplied: a reload applies the new value (the zero value, so
	// a field says nothing unless it needs a restart).
	ReloadApplied ReloadRule = iota
	// Restart: any change to the field (a block: to any of its fields,
	// or setting or omitting it) needs a restart.
	Restart
	// RestartOnOff: setting or omitting the block needs a restart; a
	// change inside it is applied (tls: new certificate files are read).
	RestartOnOff
)

// The messages of a refused reload, by rule.
const (
	ReloadRestartMessage = "cannot change on reload (restart levee)"
	ReloadOnOffMessage   = "cannot be turned on or off on reload (restart levee)"
)

// Describe returns the rule as the docs' field reference shows it.
func (r ReloadRule) Describe() string {
	switch r {
	case Restart:
		return "restart"
	case RestartOnOff:
		return "restart to set or omit"
	default:
		return "reload"
	}
}
