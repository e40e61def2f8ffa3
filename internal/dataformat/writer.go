package dataformat

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"
)

// base64Std is how []byte values are written: standard base64 with padding
// (RFC 4648 section 4), as encoding/json writes them.
var base64Std = base64.StdEncoding

// unsafeString views p as a string without copying it, for a scratch buffer
// that is not written to while the string is in use.
func unsafeString(p []byte) string { return unsafe.String(unsafe.SliceData(p), len(p)) }

// FlushSize is how many bytes a Writer gathers before it writes them to
// the connection: large enough that a write's system call is paid once per
// few hundred rows, small enough that a client sees rows soon after the
// database sends them and a slow client holds little memory.
const FlushSize = 32 << 10

// maxMessageLen bounds the message an abort line carries, so the bytes
// after the last row stay bounded (NDJSON's error line is at most about
// 6*maxMessageLen + 64 bytes, escapes included).
const maxMessageLen = 512

// errOverBudget reports, inside Row, that the row outgrew max_bytes before
// it was complete.
var errOverBudget = errors.New("over max_bytes")

// bufPool recycles Writers' buffers between answers.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, FlushSize+FlushSize/4); return &b }}

// Writer encodes one answer: the rows given to Row, then what Finish or
// Abort writes. It gathers bytes in its own buffer and writes them to the
// underlying io.Writer each time FlushSize is passed, and at Flush, Finish
// and Abort; nothing reaches it before, so a caller whose query fails
// before the first write can Discard the writer and answer with an error
// status instead (see Written). In steady state Row allocates nothing.
//
// A Writer is not safe for concurrent use. A failed write to the
// underlying writer (a client gone, a write deadline) is sticky: every
// later call returns it.
type Writer struct {
	f       Format
	w       io.Writer
	lim     Limits
	cols    *Columns
	bufp    *[]byte
	buf     []byte
	written int64 // bytes handed to w
	rows    int
	cut     *LimitError // the cap that refused a row, if one did
	err     error       // sticky write error
	done    bool
	compact bytes.Buffer // scratch for json.RawMessage
	fix     []byte       // scratch for json.RawMessage with invalid UTF-8
}

// Columns are an answer's column names, checked and escaped once for every
// format (the JSON keys, the CSV header), so that starting an answer costs
// no work per column. Build them when the route's columns are known (at
// route build, or from the first query of a SQL route) and share them:
// Columns are immutable and safe for concurrent use.
type Columns struct {
	names []string
	// keys holds each column's JSON prefix (`{"name":` for the first,
	// `,"name":` for the others); keyEnd[i] is where column i's ends.
	keys   []byte
	keyEnd []int
	// header is the CSV header line, CRLF included.
	header []byte
}

// NewColumns checks names and escapes them. It refuses an empty list and a
// name given twice (a JSON object cannot hold one key twice, so SELECT
// a.id, b.id needs aliases), also twice once invalid UTF-8 is replaced as
// the answer writes it.
func NewColumns(names []string) (*Columns, error) {
	if len(names) == 0 {
		return nil, errors.New("dataformat: an answer needs at least one column")
	}
	c := &Columns{names: append([]string(nil), names...), keyEnd: make([]int, len(names))}
	seen := make(map[string]struct{}, len(names))
	for i, n := range names {
		start := len(c.keys)
		if i == 0 {
			c.keys = append(c.keys, '{')
		} else {
			c.keys = append(c.keys, ',')
		}
		c.keys = appendJSONString(c.keys, n)
		key := string(c.keys[start+1:])
		if _, dup := seen[key]; dup {
			return nil, fmt.Errorf("dataformat: column %q appears twice (give one an alias)", n)
		}
		seen[key] = struct{}{}
		c.keys = append(c.keys, ':')
		c.keyEnd[i] = len(c.keys)
		if i > 0 {
			c.header = append(c.header, ',')
		}
		c.header = appendCSVField(c.header, n)
	}
	c.header = append(c.header, '\r', '\n')
	return c, nil
}

// Names returns the column names, in order. The caller must not modify
// the slice.
func (c *Columns) Names() []string { return c.names }

// NewWriter returns a writer of an answer in format f with columns cols to
// w. It writes nothing yet: the JSON prelude or CSV header goes out with
// the first flush. Its buffer comes from a pool and goes back at Finish,
// Abort or Discard.
func NewWriter(f Format, w io.Writer, cols *Columns, lim Limits) (*Writer, error) {
	if !f.Valid() {
		return nil, fmt.Errorf("dataformat: %v is not a format", f)
	}
	if cols == nil {
		return nil, errors.New("dataformat: no columns")
	}
	wr := &Writer{f: f, w: w, lim: lim, cols: cols}
	wr.bufp = bufPool.Get().(*[]byte)
	b := (*wr.bufp)[:0]
	switch f {
	case JSON:
		b = append(b, `{"rows":[`...)
	case CSV:
		b = append(b, cols.header...)
	}
	wr.buf = b
	return wr, nil
}

// Row encodes one row, vals in the order of the columns. It returns a
// *LimitError when the row would pass a cap (the row is not written, and
// every later Row returns the same error), a *ValueError for a value
// outside the row vocabulary (nil, bool, int64, float64, string,
// time.Time, []byte, json.RawMessage) or one the format cannot write (a
// year past 9999, JSON text that is not valid), the write error if the
// buffer's write to the connection failed, ErrClosed after Finish.
func (w *Writer) Row(vals []any) error {
	if w.done {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	if w.cut != nil {
		return w.cut
	}
	if len(vals) != len(w.cols.names) {
		return &ValueError{Index: -1, Reason: fmt.Sprintf("row has %d values for %d columns", len(vals), len(w.cols.names))}
	}
	if w.lim.MaxRows > 0 && w.rows >= w.lim.MaxRows {
		w.cut = &LimitError{Cap: MaxRowsCap, Limit: int64(w.lim.MaxRows)}
		return w.cut
	}
	start := len(w.buf)
	b := w.buf
	var err error
	switch w.f {
	case JSON:
		if w.rows > 0 {
			b = append(b, ',')
		}
		b, err = w.appendJSONRow(b, vals)
		b = append(b, '}')
	case NDJSON:
		b, err = w.appendJSONRow(b, vals)
		b = append(b, '}', '\n')
	case CSV:
		b, err = w.appendCSVRow(b, vals)
		b = append(b, '\r', '\n')
	}
	if err == nil && w.over(len(b)) {
		err = errOverBudget
	}
	if err == nil && w.lim.Meter != nil && !w.lim.Meter.Take(1, int64(len(b)-start)) {
		w.buf = b[:start]
		w.cut = &LimitError{Cap: QuotaCap}
		return w.cut
	}
	if err != nil {
		w.buf = b[:start]
		if err == errOverBudget {
			w.cut = &LimitError{Cap: MaxBytesCap, Limit: w.lim.MaxBytes}
			return w.cut
		}
		return err
	}
	w.buf = b
	w.rows++
	if len(b) >= FlushSize {
		w.flush()
	}
	return w.err
}

// over reports whether a buffer of n bytes would take the answer past
// max_bytes.
func (w *Writer) over(n int) bool {
	return w.lim.MaxBytes > 0 && w.written+int64(n) > w.lim.MaxBytes
}

// room returns how many more bytes the buffer may grow past n before the
// answer passes max_bytes, or -1 for no cap.
func (w *Writer) room(n int) int64 {
	if w.lim.MaxBytes <= 0 {
		return -1
	}
	return w.lim.MaxBytes - w.written - int64(n)
}

func (w *Writer) appendJSONRow(b []byte, vals []any) ([]byte, error) {
	keys, keyEnd := w.cols.keys, w.cols.keyEnd
	prev := 0
	for i, v := range vals {
		b = append(b, keys[prev:keyEnd[i]]...)
		prev = keyEnd[i]
		switch v := v.(type) {
		case nil:
			b = append(b, "null"...)
		case bool:
			b = strconv.AppendBool(b, v)
		case int64:
			b = appendJSONInt(b, v)
		case float64:
			b = appendJSONFloat(b, v)
		case string:
			if r := w.room(len(b)); r >= 0 && int64(len(v)) > r {
				return b, errOverBudget
			}
			b = appendJSONString(b, v)
		case time.Time:
			var ok bool
			b = append(b, '"')
			if b, ok = appendTime(b, v); !ok {
				return b, w.valueError(i, fmt.Sprintf("time.Time in year %d, outside RFC 3339's 0000-9999", v.UTC().Year()))
			}
			b = append(b, '"')
		case []byte:
			if r := w.room(len(b)); r >= 0 && int64(len(v)) > r {
				return b, errOverBudget
			}
			b = append(b, '"')
			b = base64Std.AppendEncode(b, v)
			b = append(b, '"')
		case json.RawMessage:
			c, err := w.compactJSON(i, v)
			if err != nil {
				return b, err
			}
			if r := w.room(len(b)); r >= 0 && int64(len(c)) > r {
				return b, errOverBudget
			}
			b = append(b, c...)
		default:
			return b, w.valueError(i, fmt.Sprintf("value of Go type %T is not in the row vocabulary", v))
		}
		if w.over(len(b)) {
			return b, errOverBudget
		}
	}
	return b, nil
}

func (w *Writer) appendCSVRow(b []byte, vals []any) ([]byte, error) {
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		switch v := v.(type) {
		case nil:
			// NULL is an empty field; the empty string is "" (as
			// PostgreSQL's COPY ... CSV writes them).
		case bool:
			b = strconv.AppendBool(b, v)
		case int64:
			b = strconv.AppendInt(b, v, 10)
		case float64:
			b = appendFloat(b, v)
		case string:
			if r := w.room(len(b)); r >= 0 && int64(len(v)) > r {
				return b, errOverBudget
			}
			b = appendCSVField(b, v)
		case time.Time:
			var ok bool
			if b, ok = appendTime(b, v); !ok {
				return b, w.valueError(i, fmt.Sprintf("time.Time in year %d, outside RFC 3339's 0000-9999", v.UTC().Year()))
			}
		case []byte:
			if r := w.room(len(b)); r >= 0 && int64(len(v)) > r {
				return b, errOverBudget
			}
			if len(v) == 0 {
				b = append(b, '"', '"') // empty, not NULL
			} else {
				b = base64Std.AppendEncode(b, v)
			}
		case json.RawMessage:
			c, err := w.compactJSON(i, v)
			if err != nil {
				return b, err
			}
			if r := w.room(len(b)); r >= 0 && int64(len(c)) > r {
				return b, errOverBudget
			}
			b = appendCSVField(b, unsafeString(c))
		default:
			return b, w.valueError(i, fmt.Sprintf("value of Go type %T is not in the row vocabulary", v))
		}
		if w.over(len(b)) {
			return b, errOverBudget
		}
	}
	return b, nil
}

// compactJSON returns v, which must be valid JSON, compacted (the
// insignificant spaces and newlines of PostgreSQL's json type dropped, so
// an NDJSON row stays one line), in the writer's scratch buffer, valid
// until the next call. JSON that is not valid is refused, never written:
// spliced as it is, it could end the row's object and add fields or rows of
// its own choosing. The check is encoding/json's scanner, one pass over the
// value.
func (w *Writer) compactJSON(i int, v json.RawMessage) ([]byte, error) {
	w.compact.Reset()
	if err := json.Compact(&w.compact, v); err != nil {
		return nil, w.valueError(i, "json.RawMessage is not valid JSON: "+err.Error())
	}
	c := w.compact.Bytes()
	if utf8.Valid(c) {
		return c, nil
	}
	// Invalid UTF-8 inside its strings (the scanner lets it through;
	// PostgreSQL never stores it, an SQLite text column may): each bad
	// byte becomes U+FFFD, as in every other string of the answer.
	w.fix = w.fix[:0]
	for j := 0; j < len(c); {
		r, size := utf8.DecodeRune(c[j:])
		if r == utf8.RuneError && size == 1 {
			w.fix = append(w.fix, "\uFFFD"...)
		} else {
			w.fix = append(w.fix, c[j:j+size]...)
		}
		j += size
	}
	return w.fix, nil
}

func (w *Writer) valueError(i int, reason string) error {
	return &ValueError{Column: w.cols.names[i], Index: i, Reason: reason}
}

// flush writes the buffer to the underlying writer. After a huge row the
// buffer is replaced, so one outsized value does not pin its memory for
// the rest of the answer.
func (w *Writer) flush() {
	if w.err != nil || len(w.buf) == 0 {
		return
	}
	n, err := w.w.Write(w.buf)
	w.written += int64(n)
	if err == nil && n < len(w.buf) {
		err = io.ErrShortWrite
	}
	if err != nil {
		w.err = fmt.Errorf("dataformat: writing the answer: %w", err)
	}
	w.buf = w.buf[:0]
	if cap(w.buf) > 4*FlushSize {
		w.buf = make([]byte, 0, FlushSize+FlushSize/4)
	}
}

// Flush writes what is buffered to the underlying writer. Row flushes by
// itself every FlushSize bytes; a caller whose source pauses (the next row
// is slow to come) flushes so that the client has the rows so far, then
// flushes its transport (http.ResponseController.Flush).
func (w *Writer) Flush() error {
	if w.done {
		return ErrClosed
	}
	w.flush()
	return w.err
}

// Finish writes what follows the rows and flushes. JSON: the end of the
// rows array, "next_cursor" (null for an empty NextCursor) and
// "truncated" (and "reason":"quota_exhausted" when an app's quota cut
// it). NDJSON: nothing, or when the answer was truncated a last line
// {"truncated":true,"reason":"max_rows"|"max_bytes"|"quota_exhausted"}. CSV: nothing
// (every CSV answer ends with CRLF; a truncated one says so only in what
// Truncated reports, for the caller's trailer or log).
func (w *Writer) Finish(t Tail) error {
	if w.done {
		return ErrClosed
	}
	truncated, reason := w.truncation(t)
	b := w.buf
	switch w.f {
	case JSON:
		b = append(b, `],"next_cursor":`...)
		if t.NextCursor == "" {
			b = append(b, "null"...)
		} else {
			b = appendJSONString(b, t.NextCursor)
		}
		b = append(b, `,"truncated":`...)
		b = strconv.AppendBool(b, truncated)
		if truncated && reason == QuotaCap {
			b = append(b, `,"reason":"quota_exhausted"`...)
		}
		b = append(b, "}\n"...)
	case NDJSON:
		if truncated {
			b = append(b, `{"truncated":true,"reason":"`...)
			b = append(b, reason.String()...)
			b = append(b, "\"}\n"...)
		}
	}
	w.buf = b
	return w.end()
}

// truncation reports whether the answer is truncated, and at which cap.
func (w *Writer) truncation(t Tail) (bool, Cap) {
	if w.cut != nil {
		return true, w.cut.Cap
	}
	if !t.Truncated {
		return false, 0
	}
	if t.Reason == MaxBytesCap {
		return true, MaxBytesCap
	}
	return true, MaxRowsCap
}

// Abort ends an answer cut short by an error after it began (a statement
// timeout, the database gone), in a way the client can detect, and
// flushes. reason is a stable code (statement_timeout, ...); message says
// what happened, cut to 512 bytes.
//
//   - JSON: nothing is added after the last complete row, so the document
//     stays unterminated and every JSON parser fails on it.
//   - NDJSON: a last line {"error":message,"reason":reason}.
//   - CSV: a last record that opens a quoted field and never closes it,
//     "levee error: <reason>: <message> (quotes doubled, no closing quote,
//     no CRLF): every RFC 4180 reader (encoding/csv, Python's csv in strict
//     mode) fails on it; a lenient one shows a one-field last record
//     starting with levee error:.
//
// The caller should then end the HTTP response abnormally too (no final
// chunk), so that even a client ignoring the body's shape sees a broken
// transfer. A caller that has not written anything yet (Written is 0)
// may instead Discard the writer and answer with an error status.
func (w *Writer) Abort(reason, message string) error {
	if w.done {
		return ErrClosed
	}
	message = cutUTF8(message, maxMessageLen)
	reason = cutUTF8(reason, 64)
	b := w.buf
	switch w.f {
	case NDJSON:
		b = append(b, `{"error":`...)
		b = appendJSONString(b, message)
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, reason)
		b = append(b, "}\n"...)
	case CSV:
		b = append(b, `"levee error: `...)
		mark := len(b)
		b = appendCleanText(b, reason, 64)
		b = append(b, ": "...)
		b = appendCleanText(b, message, maxMessageLen)
		// Double the quotes of what was just written, in place from the
		// back, so the field stays open.
		quotes := bytes.Count(b[mark:], []byte{'"'})
		if quotes > 0 {
			n := len(b)
			b = append(b, make([]byte, quotes)...)
			for i, j := n-1, len(b)-1; i >= mark; i-- {
				b[j] = b[i]
				j--
				if b[i] == '"' {
					b[j] = '"'
					j--
				}
			}
		}
	}
	w.buf = b
	return w.end()
}

// Discard ends the writer without writing anything more: for a caller
// that will answer with an error status instead (only sound while Written
// is 0).
func (w *Writer) Discard() {
	if w.done {
		return
	}
	w.buf = w.buf[:0]
	w.release()
}

// end flushes and releases the buffer.
func (w *Writer) end() error {
	w.flush()
	w.release()
	return w.err
}

func (w *Writer) release() {
	w.done = true
	if cap(w.buf) <= 2*FlushSize {
		*w.bufp = w.buf[:0]
		bufPool.Put(w.bufp)
	}
	w.buf, w.bufp = nil, nil
}

// Rows returns how many rows were written (accepted by Row).
func (w *Writer) Rows() int { return w.rows }

// Written returns how many bytes reached the underlying writer. While it
// is 0 the client has seen nothing and may still get an error status.
func (w *Writer) Written() int64 { return w.written }

// Truncated reports whether a cap refused a row, and which.
func (w *Writer) Truncated() (bool, Cap) {
	if w.cut == nil {
		return false, 0
	}
	return true, w.cut.Cap
}

// cutUTF8 returns s cut to at most max bytes, on a character boundary.
func cutUTF8(s string, max int) string {
	if len(s) <= max {
		return s
	}
	i := max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
