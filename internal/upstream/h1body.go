package upstream

import "io"

// h1Body is a fast-path response body. It reads the stdlib body and never
// closes it (whose Close would drain an unread remainder without bound):
// Close gives the connection back when the body was read to EOF and the
// response allows reuse, and closes the connection otherwise. It lives
// inside its h1Conn, so it costs no allocation, and it must not be used
// after Close.
//
// src nil: the head was parsed by fastHead, and the body is the next n
// bytes of the connection's reader, read as net/http's body over an
// io.LimitReader reads them (EOF with the last bytes, ErrUnexpectedEOF
// when the connection ends early, then EOF).
type h1Body struct {
	c    *h1Conn
	src  io.Reader
	n    int64 // src nil: bytes of the body not yet read
	keep bool  // the response leaves the connection open
	eof  bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.eof {
		return 0, io.EOF
	}
	if b.src == nil {
		return b.readFramed(p)
	}
	n, err := b.src.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *h1Body) readFramed(p []byte) (int, error) {
	if b.n <= 0 {
		b.eof = true
		return 0, io.EOF
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	n, err := b.c.br.Read(p)
	b.n -= int64(n)
	switch {
	case err == io.EOF && b.n > 0:
		b.n = 0 // the next read says EOF, as net/http's body does
		return n, io.ErrUnexpectedEOF
	case err == io.EOF, err == nil && n > 0 && b.n == 0:
		b.eof = true
		return n, io.EOF
	}
	return n, err
}

func (b *h1Body) Close() error {
	b.c.release(b.eof && b.keep)
	return nil
}
