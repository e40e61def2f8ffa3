// Package dataformat turns the rows of a data API's result into the answer's
// body, as JSON, NDJSON or CSV, streamed: each row is encoded into a small
// buffer and handed to the connection once the buffer fills, so an answer of
// a million rows holds one buffer, never the rows. Every answer is capped in
// rows and bytes, and a stream cut short by an error is left in a shape the
// client can detect (docs/data-formats.md). It also picks the format from a
// request's Accept header.
//
// The values it renders are exactly the row vocabulary internal/datasource
// normalises to: nil, bool, int64, float64, string, time.Time, []byte and
// json.RawMessage. Any other Go type is a programming error, reported with
// the column's name, never guessed at.
package dataformat

import "fmt"

// Format is the encoding of a data API's answer. The zero value is not a
// format; every function here refuses it.
type Format uint8

// The formats, in the order routes usually list them.
const (
	// JSON is one document {"rows":[...],"next_cursor":...,"truncated":...},
	// each row an object keyed by column name.
	JSON Format = iota + 1
	// NDJSON is one object per line (application/x-ndjson).
	NDJSON
	// CSV is RFC 4180 with a header line of the column names.
	CSV
)

// Formats lists every format, for callers that build tables from it.
var Formats = []Format{JSON, NDJSON, CSV}

// FormatNames lists the names of Formats, in that order (a new slice each
// call): the configuration's allowed formats.
func FormatNames() []string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = f.String()
	}
	return names
}

// String returns the format's name as the configuration spells it ("json",
// "ndjson", "csv").
func (f Format) String() string {
	switch f {
	case JSON:
		return "json"
	case NDJSON:
		return "ndjson"
	case CSV:
		return "csv"
	}
	return fmt.Sprintf("Format(%d)", uint8(f))
}

// Valid reports whether f is one of the formats.
func (f Format) Valid() bool { return f >= JSON && f <= CSV }

// MediaType returns the media type without parameters, as Accept names it.
func (f Format) MediaType() string {
	switch f {
	case JSON:
		return "application/json"
	case NDJSON:
		return "application/x-ndjson"
	case CSV:
		return "text/csv"
	}
	return ""
}

// ContentType returns the Content-Type header value for an answer in f.
// JSON and NDJSON are UTF-8 by definition (RFC 8259 defines no charset
// parameter); text/csv gets charset=utf-8, since text/* would otherwise
// default to US-ASCII, and header=present (RFC 4180), since the first line
// is always the column names.
func (f Format) ContentType() string {
	switch f {
	case JSON:
		return "application/json"
	case NDJSON:
		return "application/x-ndjson"
	case CSV:
		return "text/csv; charset=utf-8; header=present"
	}
	return ""
}

// ParseFormat returns the format a configuration names ("json", "ndjson",
// "csv"; exact, lower case).
func ParseFormat(name string) (Format, error) {
	switch name {
	case "json":
		return JSON, nil
	case "ndjson":
		return NDJSON, nil
	case "csv":
		return CSV, nil
	}
	return 0, fmt.Errorf("dataformat: unknown format %q (want json, ndjson or csv)", name)
}
