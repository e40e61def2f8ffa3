package dataformat

import "strings"

// Bounds of Negotiate's work: the Accept value it reads and the media ranges
// it considers. Browsers send under 200 bytes and under 10 ranges.
const (
	// MaxAcceptLen is the longest Accept value Negotiate reads; a longer one
	// is refused whole (406), not truncated, since a cut range could read as
	// another. Callers joining several Accept fields bound the joined value.
	MaxAcceptLen = 4096
	// MaxMediaRanges is how many (non-empty) ranges Negotiate considers;
	// the ones after it are ignored.
	MaxMediaRanges = 32
)

// Negotiate picks the format of an answer from a request's Accept value
// (RFC 9110 section 12.5.1) among allowed, which is in the route's order of
// preference. It reports false when none is acceptable: the caller answers
// 406.
//
// An absent or empty Accept (only spaces) means anything: the first allowed
// format. Otherwise each allowed format takes the q-value of the most
// specific range that matches it (text/csv over text/* over */*; a range
// with parameters over one without), a format no range matches is not
// acceptable, and q=0 excludes. The highest q wins; ties go to the route's
// order (the order of ranges in the header carries no preference, as RFC
// 9110 says). The media types matched are application/json,
// application/x-ndjson (also application/ndjson) and text/csv. A range's
// parameters do not restrict the match except charset, which must be utf-8.
//
// Parsing is strict per range and lenient across them: a malformed range is
// skipped and the others count, so one odd entry does not cost a client its
// answer; a header with no well-formed range is refused. Two legacy forms
// that clients still send are read as meant: a bare "*" as "*/*" and a
// q-value missing its leading zero (q=.2; Java's HttpURLConnection sends
// both). Work is bounded by MaxAcceptLen and MaxMediaRanges.
func Negotiate(accept string, allowed []Format) (Format, bool) {
	if len(allowed) == 0 || len(accept) > MaxAcceptLen {
		return 0, false
	}
	// Fast paths for what most clients send: curl's */*, an API client's
	// one media type.
	if accept == "*/*" {
		accept = ""
	}
	for _, f := range allowed {
		if f.Valid() && accept == f.MediaType() {
			return f, true
		}
	}
	if strings.Trim(accept, " \t") == "" {
		for _, f := range allowed {
			if f.Valid() {
				return f, true
			}
		}
		return 0, false
	}
	// Per format (indexed by its value): the q of the most specific range
	// matching it so far, in thousandths, and that range's specificity
	// (0: no range matched yet).
	var q, spec [CSV + 1]int
	wellFormed := false
	considered := 0
	for rest := accept; rest != "" && considered < MaxMediaRanges; {
		var member string
		member, rest = nextMember(rest)
		member = strings.Trim(member, " \t")
		if member == "" {
			continue // empty list elements are allowed (RFC 9110 5.6.1)
		}
		considered++
		r, ok := parseRange(member)
		if !ok {
			continue
		}
		wellFormed = true
		for _, f := range Formats {
			s := r.matches(f)
			if s == 0 {
				continue
			}
			if s > spec[f] || (s == spec[f] && r.q > q[f]) {
				spec[f], q[f] = s, r.q
			}
		}
	}
	if !wellFormed {
		return 0, false
	}
	var best Format
	bestQ := 0
	for _, f := range allowed {
		if f.Valid() && spec[f] > 0 && q[f] > bestQ {
			best, bestQ = f, q[f]
		}
	}
	return best, bestQ > 0
}

// nextMember splits s at its first comma outside a quoted string (a
// parameter value may be one and hold commas).
func nextMember(s string) (member, rest string) {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++ // quoted-pair: the next byte is literal
		case c == '"':
			inQuote = !inQuote
		case c == ',' && !inQuote:
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// mediaRange is one parsed range of an Accept value.
type mediaRange struct {
	typ, sub  string // lower case; "*" for a wildcard
	q         int    // thousandths, 0..1000
	params    bool   // it has parameters other than q
	charsetOK bool   // no charset parameter, or charset=utf-8
}

// matches returns how specifically r names f's media type: 0 not at all, 1
// */*, 2 type/*, 3 type/subtype, 4 type/subtype with parameters.
func (r *mediaRange) matches(f Format) int {
	if !r.charsetOK {
		return 0
	}
	typ, sub := "application", "json"
	switch f {
	case NDJSON:
		sub = "x-ndjson"
	case CSV:
		typ, sub = "text", "csv"
	}
	switch {
	case r.typ == "*" && r.sub == "*":
		return 1
	case r.typ != typ:
		return 0
	case r.sub == "*":
		return 2
	case r.sub == sub || (f == NDJSON && r.sub == "ndjson"):
		if r.params {
			return 4
		}
		return 3
	}
	return 0
}

// parseRange parses one media range with its parameters:
//
//	media-range = ( "*/*" / ( type "/" "*" ) / ( type "/" subtype ) ) parameters
//	parameters  = *( OWS ";" OWS [ parameter ] )
//	parameter   = token "=" ( token / quoted-string )
//
// where a parameter named q is the weight. m has no surrounding spaces.
func parseRange(m string) (mediaRange, bool) {
	r := mediaRange{q: 1000, charsetOK: true}
	head, params, _ := strings.Cut(m, ";")
	head = strings.TrimRight(head, " \t")
	if head == "*" { // legacy for */*
		r.typ, r.sub = "*", "*"
	} else {
		typ, sub, ok := strings.Cut(head, "/")
		if !ok || !isToken(typ) || !isToken(sub) || (typ == "*" && sub != "*") {
			return r, false
		}
		r.typ, r.sub = strings.ToLower(typ), strings.ToLower(sub)
	}
	sawQ := false
	for params != "" {
		var p string
		p, params = nextParam(params)
		p = strings.Trim(p, " \t")
		if p == "" {
			continue
		}
		name, value, ok := strings.Cut(p, "=")
		if !ok || !isToken(name) {
			return r, false
		}
		if len(value) > 0 && value[0] == '"' {
			v, ok := unquote(value)
			if !ok {
				return r, false
			}
			value = v
		} else if !isToken(value) {
			return r, false
		}
		switch {
		case strings.EqualFold(name, "q"):
			if sawQ {
				return r, false
			}
			q, ok := parseQ(value)
			if !ok {
				return r, false
			}
			r.q, sawQ = q, true
		case sawQ:
			// An accept-extension after the weight (RFC 7231; RFC 9110 has
			// none): it does not make the range more specific.
		case strings.EqualFold(name, "charset"):
			r.params = true
			r.charsetOK = strings.EqualFold(value, "utf-8") || strings.EqualFold(value, "utf8")
		default:
			r.params = true
		}
	}
	return r, true
}

// nextParam splits s at its first semicolon outside a quoted string.
func nextParam(s string) (param, rest string) {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case c == ';' && !inQuote:
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// unquote returns the content of a quoted-string that is the whole of s.
func unquote(s string) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	for i := 1; i < len(s)-1; i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++
			if i >= len(s)-1 {
				return "", false
			}
			c = s[i]
		case c == '"':
			return "", false
		}
		if c != '\t' && (c < 0x20 || c == 0x7f) {
			return "", false
		}
		b.WriteByte(c)
	}
	return b.String(), true
}

// parseQ parses a weight, in thousandths:
//
//	qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] )
//
// plus the legacy form without the leading zero (".5").
func parseQ(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	whole := 0
	switch s[0] {
	case '0':
		s = s[1:]
	case '1':
		whole, s = 1000, s[1:]
	case '.':
		if len(s) == 1 {
			return 0, false
		}
	default:
		return 0, false
	}
	if s == "" {
		return whole, true
	}
	if s[0] != '.' || len(s) > 4 {
		return 0, false
	}
	frac, scale := 0, 100
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		frac += int(c-'0') * scale
		scale /= 10
	}
	if whole == 1000 && frac != 0 {
		return 0, false
	}
	return whole + frac, true
}

// isToken reports whether s is an RFC 9110 token (1*tchar).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 || !tchar[c] {
			return false
		}
	}
	return true
}

// tchar marks the bytes RFC 9110 section 5.6.2 allows in a token.
var tchar = func() (t [0x80]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()
