package dataquery

import (
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The reasons a request's query string is refused. Every one is the
// client's fault (HTTP 400). With the data routes' other reasons they are
// declared in reasons.go, from which the request path's refusal table
// derives its rows.
// Compile-time problems (configuration) are plain errors, never *Error.
const (
	// ReasonMissingParameter: a required parameter was not given.
	ReasonMissingParameter = "missing_parameter"
	// ReasonInvalidParameter: a value did not parse as its kind, was out of
	// its bounds or length, or a list had too many or empty items.
	ReasonInvalidParameter = "invalid_parameter"
	// ReasonUnknownParameter: a query key that is neither a declared
	// parameter (a filterable column in table mode) nor a paging key.
	ReasonUnknownParameter = "unknown_parameter"
	// ReasonDuplicateParameter: a key given more than once where only one
	// value is allowed (every key in SQL mode; limit and cursor always).
	ReasonDuplicateParameter = "duplicate_parameter"
	// ReasonOperatorNotAllowed: a table-mode filter whose operator is
	// unknown or not allowed for that column.
	ReasonOperatorNotAllowed = "operator_not_allowed"
	// ReasonInvalidCursor: a cursor that is malformed, over-long, tampered
	// with, or issued for another route, version or parameter set.
	ReasonInvalidCursor = "invalid_cursor"
	// ReasonInvalidLimit: limit= is not a decimal integer in [1, Page.Max],
	// or paging keys were sent where the answer is not paged.
	ReasonInvalidLimit = "invalid_limit"
)

// Error is a refusal of one request's query string. Param names the
// parameter, column or query key at fault (at most maxEcho bytes of it when
// it came from the request); Reason is one of the Reason constants; Message
// is a sentence for the client that quotes at most maxEcho bytes of the
// offending value.
type Error struct {
	Param   string
	Reason  string
	Message string
}

func (e *Error) Error() string { return e.Message }

// maxEcho bounds how much of a request's bytes an error repeats: enough to
// recognise the value, never enough to reflect a payload.
const maxEcho = 64

// clip returns at most maxEcho bytes of s, cut at a rune boundary, valid
// UTF-8 (bad bytes as U+FFFD), with "..." appended when cut.
func clip(s string) string {
	if len(s) <= maxEcho && utf8.ValidString(s) {
		return s
	}
	cut := len(s) > maxEcho
	if cut {
		s = s[:maxEcho]
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) > maxEcho {
		s = s[:maxEcho]
		cut = true
	}
	if cut {
		if i := lastRuneStart(s); !utf8.FullRuneInString(s[i:]) {
			s = s[:i]
		}
		s += "..."
	}
	return s
}

func lastRuneStart(s string) int {
	i := len(s) - 1
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// quote is clip in Go quotes, so control bytes show as escapes.
func quote(s string) string { return strconv.Quote(clip(s)) }

func paramErr(param, reason, msg string) *Error {
	return &Error{Param: param, Reason: reason, Message: msg}
}

func invalid(param, msg string) *Error {
	return paramErr(param, ReasonInvalidParameter, "parameter "+strconv.Quote(param)+": "+msg)
}

func validUTF8(s string) bool { return utf8.ValidString(s) }

var (
	errNotPaged  = errors.New("dataquery: the query has no page")
	errKeysetLen = errors.New("dataquery: the row's keyset values do not match the keyset")
)
