// Package urlpath normalises the path of an HTTP request target, so that
// the path a gateway routes and authorizes is the path every backend
// behind it resolves, whatever its own URL handling.
//
// Normalize brings a path to one canonical form (RFC 3986 sections 6.2.2
// and 5.2.4): percent-encoded unreserved characters are decoded, the other
// escapes are upper-cased, dot segments are removed, repeated slashes are
// merged. What a backend could read in two ways is refused instead: NUL,
// invalid escapes, a raw backslash or '#', invalid or overlong UTF-8,
// characters that Unicode compatibility folding turns into '.', '/', '\'
// or '%' (fullwidth and small forms), a dot segment carrying ';'
// parameters (Tomcat reads "/..;/" as "/../"), and, by default, encoded
// slashes and backslashes. Paths are case-sensitive (RFC 3986 section
// 6.2.2.1): letters are never folded.
//
// A path already in normal form is returned as is, without allocating;
// the work is linear in the path's length (one pass; removing a ".."
// segment scans back over output it then drops, so each byte is scanned
// at most twice).
package urlpath

import "errors"

// EscapedSlashes is what Normalize does with %2F and %5C (any case).
type EscapedSlashes uint8

const (
	// Reject refuses a path with an escaped slash or backslash
	// (ErrEscapedSlash), the safe default: backends disagree on whether
	// %2F separates segments.
	Reject EscapedSlashes = iota
	// Keep leaves them encoded (upper-cased) as ordinary bytes of their
	// segment, for backends that treat them as data (RFC 3986).
	Keep
	// Decode turns them into '/' (a backslash too, as Windows servers and
	// browsers read it) before dot segments are removed and slashes
	// merged.
	Decode
)

// String returns the configuration word for m.
func (m EscapedSlashes) String() string {
	switch m {
	case Keep:
		return "keep"
	case Decode:
		return "decode"
	}
	return "reject"
}

// The reasons Normalize refuses a path. Each says what was wrong, never
// echoing the path.
var (
	ErrNotOriginForm = errors.New("urlpath: path does not start with /")
	ErrBadEscape     = errors.New("urlpath: invalid percent-encoding")
	ErrNUL           = errors.New("urlpath: NUL in path")
	ErrBadByte       = errors.New("urlpath: path contains a space, control byte, backslash or #")
	ErrBadUTF8       = errors.New("urlpath: path is not valid UTF-8 (overlong, surrogate or truncated sequence)")
	ErrConfusable    = errors.New("urlpath: path contains a character that compatibility folding turns into . / \\ or %")
	ErrDotParam      = errors.New("urlpath: dot segment with ; parameters")
	ErrEscapedSlash  = errors.New("urlpath: escaped slash or backslash (%2F, %5C) in path")
)

// Byte classes of a path, by the byte as decoded.
const (
	clsKeep    = iota // unreserved, sub-delims, ':' '@': stands for itself raw
	clsEscape         // must be (or stay) percent-encoded
	clsInvalid        // refused raw (space, control bytes, '\', '#')
)

var class = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		switch {
		case c < 0x20 || c == 0x7f || c == ' ' || c == '\\' || c == '#':
			t[c] = clsInvalid
		case c >= 0x80:
			t[c] = clsEscape
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			t[c] = clsKeep
		default:
			t[c] = clsEscape
		}
	}
	for _, c := range []byte("-._~!$&'()*+,;=:@") {
		t[c] = clsKeep
	}
	return t
}()

// unreserved reports whether an escape of c is decoded (RFC 3986 section
// 2.3: ALPHA DIGIT - . _ ~).
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

const upperHex = "0123456789ABCDEF"

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// Normalize returns the normal form of p, the path of an origin-form
// request target (from its leading '/' up to, not including, a '?'), or
// one of the Err* values. The result starts with '/', never contains
// "//" or a "." or ".." segment, and Normalize(result) == result.
func Normalize(p string, mode EscapedSlashes) (string, error) {
	if p == "" || p[0] != '/' {
		return "", ErrNotOriginForm
	}
	b := lazybuf{s: p}
	b.append('/')
	var u utf8State
	i := 1
	for i < len(p) {
		segStart := b.w
		n, dots := 0, 0 // decoded bytes before any ';', and how many are '.'
		param := false
		sep := false
		for i < len(p) {
			c := p[i]
			escape := false
			if c == '%' {
				if i+2 >= len(p) {
					return "", ErrBadEscape
				}
				hi, ok1 := unhex(p[i+1])
				lo, ok2 := unhex(p[i+2])
				if !ok1 || !ok2 {
					return "", ErrBadEscape
				}
				c = hi<<4 | lo
				i += 3
				switch {
				case c == 0:
					return "", ErrNUL
				case c == '/' || c == '\\':
					switch mode {
					case Keep:
						escape = true
					case Decode:
						sep = true
					default:
						return "", ErrEscapedSlash
					}
				case !unreserved(c):
					escape = true
				}
			} else {
				i++
				switch {
				case c == '/':
					sep = true
				case c == 0:
					return "", ErrNUL
				case class[c] == clsInvalid:
					return "", ErrBadByte
				case class[c] == clsEscape:
					escape = true
				}
			}
			if sep {
				break
			}
			if c >= 0x80 || u.need > 0 {
				if !u.feed(c) {
					return "", ErrBadUTF8
				}
				if u.folds() {
					return "", ErrConfusable
				}
			}
			if !param {
				if c == ';' {
					param = true
				} else {
					n++
					if c == '.' {
						dots++
					}
				}
			}
			if escape {
				b.append('%')
				b.append(upperHex[c>>4])
				b.append(upperHex[c&15])
			} else {
				b.append(c)
			}
		}
		if u.need > 0 {
			return "", ErrBadUTF8 // a sequence cut by a separator or the end
		}
		if b.w == segStart {
			continue // an empty segment: repeated slashes merge
		}
		if n == dots && (n == 1 || n == 2) {
			if param {
				return "", ErrDotParam
			}
			b.w = segStart // "." goes
			if n == 2 && segStart > 1 {
				// ".." takes the segment before it along (RFC 3986
				// section 5.2.4, step 2C); at the root there is none.
				j := segStart - 2
				for b.at(j) != '/' {
					j--
				}
				b.w = j + 1
			}
			continue
		}
		if sep {
			b.append('/')
		}
	}
	return b.string(), nil
}

// Unescape decodes every escape of s, a path Normalize returned (so its
// escapes are valid). It returns s itself when s has none.
func Unescape(s string) string {
	k := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '%' {
			k++
		}
	}
	if k == 0 {
		return s
	}
	out := make([]byte, 0, len(s)-2*k)
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				c = hi<<4 | lo
				i += 2
			}
		}
		out = append(out, c)
	}
	return string(out)
}

// lazybuf builds the output over the input string, copying only once the
// output stops being a prefix of the input (as path.Clean does), so a
// path in normal form costs no allocation.
type lazybuf struct {
	s   string
	buf []byte
	w   int
}

func (b *lazybuf) append(c byte) {
	if b.buf == nil {
		if b.w < len(b.s) && b.s[b.w] == c {
			b.w++
			return
		}
		b.buf = make([]byte, b.w, len(b.s)+16)
		copy(b.buf, b.s[:b.w])
	}
	b.buf = append(b.buf[:b.w], c)
	b.w++
}

func (b *lazybuf) at(i int) byte {
	if b.buf != nil {
		return b.buf[i]
	}
	return b.s[i]
}

func (b *lazybuf) string() string {
	if b.buf == nil {
		return b.s[:b.w]
	}
	return string(b.buf[:b.w])
}

// utf8State validates the decoded bytes of a path as UTF-8 one byte at a
// time (RFC 3629 section 4: no overlong forms, no surrogates, nothing
// above U+10FFFF) and keeps the code point being read.
type utf8State struct {
	need   int  // continuation bytes still expected
	lo, hi byte // range of the next continuation byte
	cp     rune // the code point so far
	done   rune // the last complete multi-byte code point, 0 if none
}

// feed takes the next decoded byte and reports whether the bytes so far
// may still be valid UTF-8.
func (u *utf8State) feed(c byte) bool {
	u.done = 0
	if u.need > 0 {
		if c < u.lo || c > u.hi {
			return false
		}
		u.cp = u.cp<<6 | rune(c&0x3f)
		u.lo, u.hi = 0x80, 0xbf
		u.need--
		if u.need == 0 {
			u.done = u.cp
		}
		return true
	}
	switch {
	case c < 0x80:
		return true
	case c >= 0xc2 && c <= 0xdf:
		u.need, u.lo, u.hi, u.cp = 1, 0x80, 0xbf, rune(c&0x1f)
	case c == 0xe0:
		u.need, u.lo, u.hi, u.cp = 2, 0xa0, 0xbf, rune(c&0x0f)
	case c == 0xed:
		u.need, u.lo, u.hi, u.cp = 2, 0x80, 0x9f, rune(c&0x0f)
	case c >= 0xe1 && c <= 0xef:
		u.need, u.lo, u.hi, u.cp = 2, 0x80, 0xbf, rune(c&0x0f)
	case c == 0xf0:
		u.need, u.lo, u.hi, u.cp = 3, 0x90, 0xbf, rune(c&0x07)
	case c >= 0xf1 && c <= 0xf3:
		u.need, u.lo, u.hi, u.cp = 3, 0x80, 0xbf, rune(c&0x07)
	case c == 0xf4:
		u.need, u.lo, u.hi, u.cp = 3, 0x80, 0x8f, rune(c&0x07)
	default:
		return false // a stray continuation byte, an overlong lead (C0 C1), F5..FF
	}
	return true
}

// folds reports whether the code point just completed is one that NFKC
// (compatibility) folding, which some backends and frameworks apply to
// paths, turns into '.', "..", '/', '\' or '%': a path that reads one way
// here and another way there.
func (u *utf8State) folds() bool {
	switch u.done {
	case 0xff0e, // FULLWIDTH FULL STOP
		0xff0f, // FULLWIDTH SOLIDUS
		0xff3c, // FULLWIDTH REVERSE SOLIDUS
		0xff05, // FULLWIDTH PERCENT SIGN
		0xfe52, // SMALL FULL STOP
		0xfe68, // SMALL REVERSE SOLIDUS
		0xfe6a, // SMALL PERCENT SIGN
		0x2024, // ONE DOT LEADER
		0x2025: // TWO DOT LEADER
		return true
	}
	return false
}
