package route

import (
	"net/textproto"
	"net/url"
	"regexp"
	"strings"
)

// Header and query conditions (`match.headers`, `match.query`).

// CondKind is how a Cond tests its header or query parameter.
type CondKind uint8

// The kinds of Cond.
const (
	// CondExact holds when a value equals Value (byte for byte).
	CondExact CondKind = iota + 1
	// CondPrefix holds when a value starts with Value.
	CondPrefix
	// CondRegex holds when a value matches Value, an RE2 pattern that
	// NewTable anchors at both ends.
	CondRegex
	// CondPresent holds when the header or parameter is present, with
	// any value (even empty).
	CondPresent
	// CondAbsent holds when it is not.
	CondAbsent
)

// MaxRegexLen bounds the length of a path or condition regex.
const MaxRegexLen = 1024

// Cond is one header or query condition of a rule.
//
// A header condition tests each field line of the header as received (not
// split at commas) and holds when one of them matches; header names are
// case-insensitive. A query condition tests the first value of the
// parameter in the request's query string (split at "&", then at the first
// "=", each side %-decoded with "+" as a space, as url.ParseQuery does;
// pairs that do not decode are skipped); query names are case-sensitive.
type Cond struct {
	Name  string
	Kind  CondKind
	Value string // CondExact, CondPrefix, CondRegex
}

// cond is a Cond ready to test: the header name canonical, the regex
// compiled.
type cond struct {
	name  string
	kind  CondKind
	value string
	re    *regexp.Regexp
}

// CompileRegex compiles an RE2 pattern the way NewTable does for a path or
// condition regex: anchored at both ends, at most MaxRegexLen bytes.
// Callers validating configuration use it to report the error.
func CompileRegex(pattern string) (*regexp.Regexp, error) {
	if len(pattern) > MaxRegexLen {
		return nil, errRegexLen
	}
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, err // the error quotes the pattern as written
	}
	return regexp.Compile(`^(?:` + pattern + `)$`)
}

type regexLenError struct{}

func (regexLenError) Error() string { return "must be at most 1024 bytes" }

var errRegexLen error = regexLenError{}

func newConds(cs []Cond, header bool) []cond {
	if len(cs) == 0 {
		return nil
	}
	out := make([]cond, 0, len(cs))
	for _, c := range cs {
		x := cond{name: c.Name, kind: c.Kind, value: c.Value}
		if header {
			x.name = textproto.CanonicalMIMEHeaderKey(c.Name)
		}
		if c.Kind == CondRegex {
			re, err := CompileRegex(c.Value)
			if err != nil {
				re = neverRegex // refused by the caller's validation; match nothing
			}
			x.re = re
		}
		out = append(out, x)
	}
	return out
}

// neverRegex matches no string: the stand-in for a pattern that does not
// compile (the caller validates, so only a caller bug reaches it).
var neverRegex = regexp.MustCompile(`[^\x00-\x{10FFFF}]`)

func (c *cond) test(v string) bool {
	switch c.kind {
	case CondExact:
		return v == c.value
	case CondPrefix:
		return strings.HasPrefix(v, c.value)
	case CondRegex:
		return c.re.MatchString(v)
	}
	return false
}

// headerHolds tests a header condition against hdr (canonical keys, as
// net/http keeps them).
func (c *cond) headerHolds(hdr map[string][]string) bool {
	vals := hdr[c.name]
	switch c.kind {
	case CondPresent:
		return len(vals) > 0
	case CondAbsent:
		return len(vals) == 0
	}
	for _, v := range vals {
		if c.test(v) {
			return true
		}
	}
	return false
}

// queryHolds tests a query condition against a raw query string.
func (c *cond) queryHolds(query string) bool {
	v, found := firstQuery(query, c.name)
	switch c.kind {
	case CondPresent:
		return found
	case CondAbsent:
		return !found
	}
	return found && c.test(v)
}

// firstQuery returns the first value of parameter name in a raw query.
// Work is linear in len(query); it allocates only to decode a pair that
// holds "%" or "+".
func firstQuery(query, name string) (string, bool) {
	for query != "" {
		var pair string
		pair, query, _ = strings.Cut(query, "&")
		k, v, _ := strings.Cut(pair, "=")
		if strings.ContainsAny(k, "%+") {
			var err error
			if k, err = url.QueryUnescape(k); err != nil {
				continue
			}
		}
		if k != name {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			d, err := url.QueryUnescape(v)
			if err != nil {
				continue
			}
			v = d
		}
		return v, true
	}
	return "", false
}
