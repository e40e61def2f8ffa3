package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode"
)

// This file refuses JSON bodies in which one object holds a key twice,
// at any depth. encoding/json keeps the last value silently, so
// {"id":"a","id":"b"} would create b while a reader of the body (a log, a
// review, a proxy's filter) sees a: the admin API refuses the ambiguity,
// as the configuration's, the data-API definitions' and the registry's
// parsers do. Theirs cannot be shared: the configuration's runs over YAML
// nodes in package config and the registry's over an instance's known
// fields in package discovery, neither of which this package may import
// (docs/architecture.md).

// duplicateKey returns the path of the first key that appears twice in
// one object of data ("limits.rate", "route_limits.a.burst",
// "items[2].id"; "" for the empty key at the top) and true, or false when
// none does before the end or before data stops being JSON (the decoder
// reports that). With fold, keys equal under Unicode simple case
// folding count as one, as encoding/json matches them to a struct's
// fields; without it only identical keys do (maps with case-distinct
// keys). The work is linear in data, whose size the caller bounds; the
// nesting is bounded by encoding/json's own depth limit.
func duplicateKey(data []byte, fold bool) (string, bool) {
	type frame struct {
		object bool
		path   string
		keys   map[string]struct{}
		key    string // the current member's key (objects)
		index  int    // the current item's index (arrays)
		atKey  bool   // the next token is a key (objects)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []frame
	// valueDone moves the innermost container past the value just read.
	valueDone := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].atKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	childPath := func() string {
		n := len(stack)
		switch {
		case n == 0:
			return ""
		case stack[n-1].object:
			return joinKey(stack[n-1].path, stack[n-1].key)
		}
		return stack[n-1].path + "[" + strconv.Itoa(stack[n-1].index) + "]"
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false // io.EOF: the end; anything else is the decoder's to report
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].atKey {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:n-1]
				valueDone()
				continue
			}
			k, _ := tok.(string) // a key is always a string
			canon := k
			if fold {
				canon = foldKey(k)
			}
			top := &stack[n-1]
			if _, dup := top.keys[canon]; dup {
				return joinKey(top.path, k), true
			}
			top.keys[canon] = struct{}{}
			top.key, top.atKey = k, false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{object: true, path: childPath(), keys: map[string]struct{}{}, atKey: true})
		case json.Delim('['):
			stack = append(stack, frame{path: childPath()})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// joinKey appends key to an object's path.
func joinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// foldKey maps every rune of s to the smallest rune of its simple case
// folding orbit (k, K and the Kelvin sign all become K), so that two keys
// are equal under strings.EqualFold exactly when their foldKeys are equal.
func foldKey(s string) string {
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) { // an orbit has at most 4 runes
			least = min(least, f)
		}
		return least
	}, s)
}

// refuseDuplicateKey answers 400 duplicate_key naming the key when body
// holds one twice in an object, and reports whether it did.
func refuseDuplicateKey(w http.ResponseWriter, body []byte, fold bool) bool {
	path, dup := duplicateKey(body, fold)
	if !dup {
		return false
	}
	writeJSON(w, http.StatusBadRequest, map[string]string{
		"error":  "key " + quoteShort(path) + " appears more than once in one object; send each key once",
		"reason": "duplicate_key", "field": path,
	})
	return true
}

// readBody reads r's body, at most max bytes; on failure it has answered
// 413 or 400 and returns false.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return body, true
	case errors.As(err, &tooBig):
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "the body may be at most "+strconv.FormatInt(max, 10)+" bytes")
	default:
		writeError(w, http.StatusBadRequest, "bad_request", "reading the body: "+err.Error())
	}
	return nil, false
}
