package discovery

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// A walker over JSON that encoding/json has already validated (json.Valid):
// it splits arrays into items and objects into members without copying or
// decoding, so that each field reaches its own typed parser as raw bytes,
// and a field given twice can be seen (encoding/json keeps the last one
// silently). Every function is a single forward pass, O(len) in total, and
// stays within bounds on any input; on invalid JSON the result is
// meaningless but safe.

// skipSpace returns the index of the first non-whitespace byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && isJSONSpace(b[i]) {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && !isJSONSpace(b[i]) {
		i++
	}
	return i
}

// eachItem calls fn with each item of the array arr (valid JSON, leading
// whitespace allowed) until fn returns false.
func eachItem(arr []byte, fn func(item []byte) bool) {
	i := skipSpace(arr, 0) + 1 // past '['
	for {
		i = skipSpace(arr, i)
		if i < len(arr) && arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
		if i >= len(arr) || arr[i] == ']' {
			return
		}
		end := skipValue(arr, i)
		if end <= i || !fn(arr[i:end]) {
			return
		}
		i = end
	}
}

// eachMember calls fn with each member's raw key (quoted) and raw value of
// the object obj (valid JSON, leading whitespace allowed) until fn returns
// false.
func eachMember(obj []byte, fn func(key, value []byte) bool) {
	i := skipSpace(obj, 0) + 1 // past '{'
	for {
		i = skipSpace(obj, i)
		if i < len(obj) && obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		kEnd := skipString(obj, i)
		key := obj[i:kEnd]
		i = skipSpace(obj, kEnd)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = skipSpace(obj, i+1)
		vEnd := skipValue(obj, i)
		if vEnd <= i || !fn(key, obj[i:vEnd]) {
			return
		}
		i = vEnd
	}
}

// decodeString decodes a raw JSON string exactly as encoding/json does
// (escapes resolved, invalid UTF-8 replaced by U+FFFD), without calling it
// in the common case of no escapes and valid UTF-8.
func decodeString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// keyIs reports whether the raw JSON key names field, matched
// case-insensitively as encoding/json matches struct fields.
func keyIs(key []byte, field string) bool {
	if len(key) >= 2 && bytes.IndexByte(key, '\\') < 0 {
		return bytes.EqualFold(key[1:len(key)-1], []byte(field))
	}
	s, ok := decodeString(key)
	return ok && bytes.EqualFold([]byte(s), []byte(field))
}
