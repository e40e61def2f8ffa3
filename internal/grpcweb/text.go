package grpcweb

import (
	"encoding/base64"
	"errors"
	"io"
)

// ErrBadText is the text decoder's error for input that is not base64 in
// 4-character groups.
var ErrBadText = errors.New("grpcweb: request body is not valid base64")

// textEnc decodes one group strictly (canonical padding bits).
var textEnc = base64.StdEncoding.Strict()

// textDecoder decodes a -text request body as it is read: standard
// base64 in groups of 4 characters, each group decoded on its own, so
// padding may close one message's encoding in the middle of the stream
// (as gRPC-Web clients may send). It holds at most textChunk bytes of
// input and 3 of output.
type textDecoder struct {
	r            io.ReadCloser
	in           [textChunk]byte
	start, end   int // undecoded input in[start:end]
	out          [3]byte
	ostart, oend int
	err          error
}

// NewTextDecoder returns a reader of body's base64 text as bytes; closing
// it closes body. Input that is not base64 in whole 4-character groups
// (a stray character, a newline, a cut group at the end) is ErrBadText.
func NewTextDecoder(body io.ReadCloser) io.ReadCloser { return &textDecoder{r: body} }

func (d *textDecoder) Close() error { return d.r.Close() }

func (d *textDecoder) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) { // bounded: each turn decodes a group, reads input or returns
		if d.ostart < d.oend {
			c := copy(p[n:], d.out[d.ostart:d.oend])
			d.ostart += c
			n += c
			continue
		}
		if d.end-d.start >= 4 {
			m, err := textEnc.Decode(d.out[:], d.in[d.start:d.start+4])
			if err != nil || m == 0 {
				d.err = ErrBadText
				return n, d.err
			}
			d.start += 4
			d.ostart, d.oend = 0, m
			continue
		}
		if n > 0 {
			return n, nil
		}
		if d.err != nil {
			if d.err == io.EOF && d.end > d.start {
				d.err = ErrBadText // a group cut short
			}
			return 0, d.err
		}
		copy(d.in[:], d.in[d.start:d.end])
		d.end -= d.start
		d.start = 0
		m, err := d.r.Read(d.in[d.end:])
		d.end += m
		if err != nil {
			d.err = err
		}
	}
	return n, nil
}
