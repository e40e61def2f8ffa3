package dataformat

import (
	"errors"
	"fmt"
	"strconv"
)

// Limits caps one answer. A cap of zero or less is no cap; the gateway
// always sets both (the route's max_rows, default 10000, and max_bytes,
// default 8 MiB).
type Limits struct {
	// MaxRows is the most rows the answer holds.
	MaxRows int
	// MaxBytes is the most bytes of body from its first byte through the
	// last row: the JSON prelude or CSV header and the rows with their
	// separators. What follows the rows (Finish's trailing fields or
	// truncation line, Abort's error line) comes on top: at most about 100
	// bytes plus the cursor's length, or an abort line of a bounded
	// message.
	MaxBytes int64
	// Meter, when set, is charged each row and its bytes as written (an
	// app's row and byte quota): a row it refuses is not written and
	// ends the answer, truncated at QuotaCap. nil: no quota.
	Meter Meter
}

// Meter is charged an answer's rows as they are written.
type Meter interface {
	// Take charges rows and bytes; false when they do not fit.
	Take(rows, bytes int64) bool
}

// Tail is what Finish writes after the rows.
type Tail struct {
	// NextCursor is the cursor of the next page; empty writes null (the
	// last page). Only JSON carries it: NDJSON and CSV are not paged.
	NextCursor string
	// Truncated says the caller cut the answer itself at a cap (the writer
	// knows when it refused a row, and then says so whatever this is).
	Truncated bool
	// Reason is the cap the caller cut at, for Truncated; zero is MaxRowsCap.
	Reason Cap
}

// Cap names one of the caps of Limits.
type Cap uint8

// The caps.
const (
	MaxRowsCap  Cap = 1 // Limits.MaxRows
	MaxBytesCap Cap = 2 // Limits.MaxBytes
	QuotaCap    Cap = 3 // Limits.Meter: the app's row or byte quota
)

// String returns the cap's name as answers and configuration spell it.
func (c Cap) String() string {
	switch c {
	case MaxRowsCap:
		return "max_rows"
	case MaxBytesCap:
		return "max_bytes"
	case QuotaCap:
		return "quota_exhausted"
	}
	return "Cap(" + strconv.Itoa(int(c)) + ")"
}

// Errors a Writer returns. Classify with errors.Is and errors.As.
var (
	// ErrLimit is what every *LimitError is: the answer reached a cap.
	ErrLimit = errors.New("dataformat: answer cap reached")
	// ErrValue is what every *ValueError is: a row the writer cannot
	// encode (a programming error upstream of it, or a value outside what
	// the formats can say).
	ErrValue = errors.New("dataformat: value not encodable")
	// ErrClosed is returned by every call after Finish, Abort or Discard.
	ErrClosed = errors.New("dataformat: writer already finished")
)

// LimitError is the error of a row refused because it would pass a cap.
// The refused row was not written; Finish then marks the answer truncated.
type LimitError struct {
	Cap   Cap   // which cap
	Limit int64 // its value
}

func (e *LimitError) Error() string {
	return "dataformat: answer reached " + e.Cap.String() + " (" + strconv.FormatInt(e.Limit, 10) + ")"
}

// Is makes errors.Is(err, ErrLimit) true.
func (e *LimitError) Is(target error) bool { return target == ErrLimit }

// ValueError is the error of a row the writer cannot encode. The row was
// not written; the writer stays usable (the caller normally aborts).
type ValueError struct {
	Column string // the column's name; empty when the row's length is wrong
	Index  int    // the column's index; -1 when the row's length is wrong
	Reason string // what is wrong, naming the value's Go type
}

func (e *ValueError) Error() string {
	if e.Index < 0 {
		return "dataformat: " + e.Reason
	}
	return fmt.Sprintf("dataformat: column %q (%d): %s", e.Column, e.Index, e.Reason)
}

// Is makes errors.Is(err, ErrValue) true.
func (e *ValueError) Is(target error) bool { return target == ErrValue }
