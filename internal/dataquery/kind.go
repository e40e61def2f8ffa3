package dataquery

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/levee-gw/levee/internal/valuekind"
)

// Kind is the type of a parameter or column value. It decides how a
// request's text is parsed and which Go type is bound for it:
//
//	Int64     int64      decimal, optional '-', no '+', no leading zeros, no spaces
//	Float64   float64    JSON number grammar, finite
//	Bool      bool       exactly "true" or "false"
//	String    string     valid UTF-8, no NUL, at most MaxLen bytes
//	Date      time.Time  YYYY-MM-DD, a real calendar date, 00:00 UTC
//	Timestamp time.Time  RFC 3339 with a zone (Z or ±hh:mm), normalised to UTC
//	UUID      string     canonical 8-4-4-4-12 hex, any case in, lower case out
//
// The zero Kind is invalid.
type Kind uint8

const (
	Int64 Kind = iota + 1
	Float64
	Bool
	String
	Date
	Timestamp
	UUID
)

// kindNames are the Kinds' names by Kind: package valuekind's parameter
// kinds, in its order (TestKindsAreValuekinds holds the constants above
// to it).
var kindNames = append([]string{""}, valuekind.ParamNames()...)

// String returns the kind's configuration name ("int64", ...).
func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

func (k Kind) valid() bool { return k > 0 && int(k) < len(kindNames) }

// UnmarshalText sets k from its configuration name: the config file's
// `type` binds straight into a Param through it.
func (k *Kind) UnmarshalText(b []byte) error {
	v, err := ParseKind(string(b))
	if err != nil {
		return err
	}
	*k = v
	return nil
}

// ParseKind turns a configuration name ("int64", "float64", "bool",
// "string", "date", "timestamp", "uuid") into a Kind.
func ParseKind(s string) (Kind, error) {
	for k := Int64; int(k) < len(kindNames); k++ {
		if kindNames[k] == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("unknown type %q (want one of %s)", clip(s), strings.Join(kindNames[1:], ", "))
}

// Bounds of parameters and values. They keep every loop over request data
// and every statement levee builds small.
const (
	// DefaultMaxLen is a String value's byte limit when MaxLen is 0.
	DefaultMaxLen = 1024
	// MaxMaxLen is the largest MaxLen a configuration may set.
	MaxMaxLen = 64 << 10
	// DefaultMaxItems is a list's item limit when MaxItems is 0 (also the
	// limit of a table-mode in.(...) filter).
	DefaultMaxItems = 100
	// MaxMaxItems is the largest MaxItems a configuration may set.
	MaxMaxItems = 1000
	// maxNumberLen bounds the text of an int64 or float64 value.
	maxNumberLen = 64
)

// Param declares one SQL-mode parameter, named :Name in the SQL and Name
// in the query string.
//
// Default, Min and Max are raw text parsed with the request's own rules when
// the query is compiled, so a bad one is a configuration error; "" means
// none (so a String parameter cannot default to the empty string). Min and
// Max apply to Int64, Float64, Date and Timestamp (inclusive; to each item
// of a list). MaxLen (String only) counts bytes, not runes; 0 means
// DefaultMaxLen. MaxItems (lists only) is 0 for DefaultMaxItems, at most
// MaxMaxItems.
//
// A key given with an empty value ("?region=") is a value: the empty
// string for String, refused for every other kind; it does not take the
// default. A missing optional scalar without a default binds SQL NULL
// (nil). A list
// must be Required or have a Default: an empty IN () is not SQL, and
// IN (NULL) matching nothing would surprise.
type Param struct {
	Name     string
	Type     Kind
	List     bool
	Required bool
	Default  string
	Min, Max string
	MaxLen   int
	MaxItems int
	// From, when set, binds the parameter to the caller's identity
	// (from.go): the client cannot send it, the data route fills it in
	// before Bind. Compiling ignores it.
	From string
}

// rule is a compiled value check: one parameter's or column's kind and
// bounds.
type rule struct {
	kind           Kind
	list           bool
	maxLen         int
	maxItems       int
	hasMin, hasMax bool
	minI, maxI     int64
	minF, maxF     float64
	minT, maxT     time.Time
}

// newRule checks a declaration's bounds and returns its rule. what names
// the declaration in errors ("param \"x\"").
func newRule(what string, k Kind, list bool, maxLen, maxItems int, min, max string) (rule, error) {
	r := rule{kind: k, list: list, maxLen: maxLen, maxItems: maxItems}
	if !k.valid() {
		return r, fmt.Errorf("%s: invalid type %v", what, k)
	}
	switch {
	case maxLen < 0 || maxLen > MaxMaxLen:
		return r, fmt.Errorf("%s: max_len %d out of range [0, %d]", what, maxLen, MaxMaxLen)
	case maxLen != 0 && k != String:
		return r, fmt.Errorf("%s: max_len applies to string parameters only, not %v", what, k)
	case maxItems < 0 || maxItems > MaxMaxItems:
		return r, fmt.Errorf("%s: max_items %d out of range [0, %d]", what, maxItems, MaxMaxItems)
	case maxItems != 0 && !list:
		return r, fmt.Errorf("%s: max_items applies to lists only", what)
	}
	if r.maxLen == 0 {
		r.maxLen = DefaultMaxLen
	}
	if r.maxItems == 0 {
		r.maxItems = DefaultMaxItems
	}
	for i, b := range [2]string{min, max} {
		if b == "" {
			continue
		}
		name := [2]string{"min", "max"}[i]
		if k != Int64 && k != Float64 && k != Date && k != Timestamp {
			return r, fmt.Errorf("%s: %s applies to int64, float64, date and timestamp, not %v", what, name, k)
		}
		v, msg := (&rule{kind: k, maxLen: r.maxLen}).parse(b)
		if msg != "" {
			return r, fmt.Errorf("%s: %s: %s", what, name, msg)
		}
		switch x := v.(type) {
		case int64:
			if i == 0 {
				r.hasMin, r.minI = true, x
			} else {
				r.hasMax, r.maxI = true, x
			}
		case float64:
			if i == 0 {
				r.hasMin, r.minF = true, x
			} else {
				r.hasMax, r.maxF = true, x
			}
		case time.Time:
			if i == 0 {
				r.hasMin, r.minT = true, x
			} else {
				r.hasMax, r.maxT = true, x
			}
		}
	}
	if r.hasMin && r.hasMax && (r.minI > r.maxI || r.minF > r.maxF || r.minT.After(r.maxT)) {
		return r, fmt.Errorf("%s: min %q is above max %q", what, min, max)
	}
	return r, nil
}

// value parses one query value: a scalar, or for a list a []any of
// scalars. param names the parameter in the *Error.
func (r *rule) value(param, s string) (any, *Error) {
	if !r.list {
		return r.scalar(param, s)
	}
	return r.items(param, s, r.maxItems)
}

// items parses a comma-separated list. A comma inside an item is written
// \, and a backslash \\; any other backslash, an empty item, or more than
// max items is refused.
func (r *rule) items(param, s string, max int) (any, *Error) {
	out := make([]any, 0, min(strings.Count(s, ",")+1, max))
	for {
		item, rest, more, err := nextItem(s)
		switch {
		case err != "":
			return nil, invalid(param, err)
		case item == "":
			return nil, invalid(param, "empty list item")
		case len(out) == max:
			return nil, invalid(param, "more than "+strconv.Itoa(max)+" list items")
		}
		v, msg := r.parse(item)
		if msg != "" {
			return nil, invalid(param, msg)
		}
		out = append(out, v)
		if !more {
			return out, nil
		}
		s = rest
	}
}

// nextItem splits s at its first unescaped comma (more reports one) and
// unescapes the item. It allocates only for items holding a backslash.
func nextItem(s string) (item, rest string, more bool, err string) {
	i := strings.IndexAny(s, `,\`)
	if i < 0 {
		return s, "", false, ""
	}
	if s[i] == ',' {
		return s[:i], s[i+1:], true, ""
	}
	var b strings.Builder
	for j := 0; j < len(s); j++ {
		switch c := s[j]; c {
		case ',':
			return b.String(), s[j+1:], true, ""
		case '\\':
			if j+1 == len(s) || (s[j+1] != ',' && s[j+1] != '\\') {
				return "", "", false, `a backslash in a list item must be followed by , or \`
			}
			j++
			b.WriteByte(s[j])
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), "", false, ""
}

// scalar parses one value of the rule's kind and checks its bounds.
func (r *rule) scalar(param, s string) (any, *Error) {
	v, msg := r.parse(s)
	if msg != "" {
		return nil, invalid(param, msg)
	}
	return v, nil
}

// parse is scalar with the refusal as a message ("" when v is good), so
// configuration errors can use the same words.
func (r *rule) parse(s string) (any, string) {
	switch r.kind {
	case Int64:
		v, ok := parseInt64(s)
		if !ok {
			return nil, "not an int64: " + quote(s)
		}
		if r.hasMin && v < r.minI || r.hasMax && v > r.maxI {
			return nil, strconv.FormatInt(v, 10) + " is outside " + r.boundsText()
		}
		return v, ""
	case Float64:
		v, ok := parseFloat64(s)
		if !ok {
			return nil, "not a finite float64: " + quote(s)
		}
		if r.hasMin && v < r.minF || r.hasMax && v > r.maxF {
			return nil, strconv.FormatFloat(v, 'g', -1, 64) + " is outside " + r.boundsText()
		}
		return v, ""
	case Bool:
		switch s {
		case "true":
			return true, ""
		case "false":
			return false, ""
		}
		return nil, "not true or false: " + quote(s)
	case String:
		switch {
		case len(s) > r.maxLen:
			return nil, "longer than " + strconv.Itoa(r.maxLen) + " bytes"
		case !utf8.ValidString(s):
			return nil, "not valid UTF-8"
		case strings.IndexByte(s, 0) >= 0:
			return nil, "holds a NUL byte"
		}
		return s, ""
	case Date, Timestamp:
		var t time.Time
		var ok bool
		if r.kind == Date {
			t, ok = parseDate(s)
		} else {
			t, ok = parseTimestamp(s)
		}
		if !ok {
			return nil, "not a valid " + r.kind.String() + ": " + quote(s)
		}
		if r.hasMin && t.Before(r.minT) || r.hasMax && t.After(r.maxT) {
			return nil, quote(s) + " is outside " + r.boundsText()
		}
		return t, ""
	case UUID:
		v, ok := parseUUID(s)
		if !ok {
			return nil, "not a canonical uuid: " + quote(s)
		}
		return v, ""
	}
	return nil, "has no type"
}

func (r *rule) boundsText() string {
	lo, hi := "-inf", "+inf"
	switch r.kind {
	case Int64:
		if r.hasMin {
			lo = strconv.FormatInt(r.minI, 10)
		}
		if r.hasMax {
			hi = strconv.FormatInt(r.maxI, 10)
		}
	case Float64:
		if r.hasMin {
			lo = strconv.FormatFloat(r.minF, 'g', -1, 64)
		}
		if r.hasMax {
			hi = strconv.FormatFloat(r.maxF, 'g', -1, 64)
		}
	default:
		if r.hasMin {
			lo = string(appendCanon(nil, r.kind, r.minT))
		}
		if r.hasMax {
			hi = string(appendCanon(nil, r.kind, r.maxT))
		}
	}
	return "[" + lo + ", " + hi + "]"
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseInt64 accepts -?(0|[1-9][0-9]*) within int64, and not "-0".
func parseInt64(s string) (int64, bool) {
	d := s
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(s) > 20 || d == "" || d[0] == '0' && (len(d) > 1 || len(s) > 1) {
		return 0, false
	}
	for i := 0; i < len(d); i++ {
		if !isDigit(d[i]) {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// parseFloat64 accepts the JSON number grammar
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? when the value is finite.
func parseFloat64(s string) (float64, bool) {
	if len(s) == 0 || len(s) > maxNumberLen {
		return 0, false
	}
	i := 0
	if s[i] == '-' {
		i++
	}
	digits := func() int {
		j := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		return i - j
	}
	start := i
	if n := digits(); n == 0 || n > 1 && s[start] == '0' {
		return 0, false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return 0, false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, false
		}
	}
	if i != len(s) {
		return 0, false
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, false
	}
	return v, true
}

// digitsAt reports whether s[i:i+n] are all ASCII digits.
func digitsAt(s string, i, n int) bool {
	if i+n > len(s) {
		return false
	}
	for j := i; j < i+n; j++ {
		if !isDigit(s[j]) {
			return false
		}
	}
	return true
}

// parseDate accepts YYYY-MM-DD, years 0001 to 9999, a real calendar date.
func parseDate(s string) (time.Time, bool) {
	if len(s) != 10 || !digitsAt(s, 0, 4) || s[4] != '-' || !digitsAt(s, 5, 2) || s[7] != '-' || !digitsAt(s, 8, 2) {
		return time.Time{}, false
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil || t.Year() < 1 {
		return time.Time{}, false
	}
	return t, true
}

// parseTimestamp accepts RFC 3339 with an upper-case T and a zone:
// YYYY-MM-DDThh:mm:ss[.f{1,9}](Z|±hh:mm), and returns it in UTC. Leap
// seconds (:60) are refused, as Go's time package cannot hold them.
func parseTimestamp(s string) (time.Time, bool) {
	if len(s) < 20 || len(s) > 35 {
		return time.Time{}, false
	}
	if _, ok := parseDate(s[:10]); !ok || s[10] != 'T' || !digitsAt(s, 11, 2) || s[13] != ':' ||
		!digitsAt(s, 14, 2) || s[16] != ':' || !digitsAt(s, 17, 2) {
		return time.Time{}, false
	}
	i := 19
	if s[i] == '.' {
		j := i + 1
		for j < len(s) && isDigit(s[j]) {
			j++
		}
		if j == i+1 || j-i-1 > 9 {
			return time.Time{}, false
		}
		i = j
	}
	switch z := s[i:]; {
	case z == "Z":
	case len(z) == 6 && (z[0] == '+' || z[0] == '-') && digitsAt(z, 1, 2) && z[3] == ':' && digitsAt(z, 4, 2):
		if z[1:3] > "23" || z[4:6] > "59" {
			return time.Time{}, false
		}
	default:
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	t = t.UTC()
	if t.Year() < 1 || t.Year() > 9999 {
		return time.Time{}, false
	}
	return t, true
}

// parseUUID accepts 8-4-4-4-12 hex digits in either case and returns the
// lower-case form (s itself when already lower case).
func parseUUID(s string) (string, bool) {
	if len(s) != 36 {
		return "", false
	}
	upper := false
	for i := 0; i < 36; i++ {
		c := s[i]
		switch {
		case i == 8 || i == 13 || i == 18 || i == 23:
			if c != '-' {
				return "", false
			}
		case isDigit(c) || 'a' <= c && c <= 'f':
		case 'A' <= c && c <= 'F':
			upper = true
		default:
			return "", false
		}
	}
	if upper {
		return strings.ToLower(s), true
	}
	return s, true
}

// appendCanon appends v's canonical text: the one spelling the parsers
// accept for it, with %, &, = and , percent-encoded in strings so a
// canonical parameter set splits only one way.
func appendCanon(b []byte, k Kind, v any) []byte {
	switch x := v.(type) {
	case int64:
		return strconv.AppendInt(b, x, 10)
	case float64:
		return strconv.AppendFloat(b, x, 'g', -1, 64)
	case bool:
		return strconv.AppendBool(b, x)
	case time.Time:
		if k == Date {
			return x.AppendFormat(b, time.DateOnly)
		}
		return x.AppendFormat(b, time.RFC3339Nano)
	case string:
		for i := 0; i < len(x); i++ {
			switch c := x[i]; c {
			case '%', '&', '=', ',':
				b = append(b, '%', "0123456789ABCDEF"[c>>4], "0123456789ABCDEF"[c&15])
			default:
				b = append(b, c)
			}
		}
		return b
	case []any:
		for i, it := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendCanon(b, k, it)
		}
	}
	return b
}
