package grpcwire

// The grpc-message value is percent-encoded (PROTOCOL-HTTP2.md): every
// byte outside the printable ASCII range 0x20 to 0x7E, and '%' itself, is
// sent as %XX (upper-case hex) of its UTF-8 bytes.

const upperHex = "0123456789ABCDEF"

// EncodeMessage percent-encodes msg for grpc-message. It returns msg
// itself when nothing needs encoding.
func EncodeMessage(msg string) string {
	n := 0
	for i := 0; i < len(msg); i++ {
		if needsEscape(msg[i]) {
			n++
		}
	}
	if n == 0 {
		return msg
	}
	b := make([]byte, 0, len(msg)+2*n)
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if needsEscape(c) {
			b = append(b, '%', upperHex[c>>4], upperHex[c&15])
			continue
		}
		b = append(b, c)
	}
	return string(b)
}

func needsEscape(c byte) bool { return c < 0x20 || c > 0x7E || c == '%' }

// DecodeMessage undoes EncodeMessage. As the spec asks of a receiver, a
// '%' not followed by two hex digits is kept as it is rather than failing
// the whole message; the result may hold bytes that are not UTF-8 when
// the sender encoded such bytes.
func DecodeMessage(s string) string {
	i := 0
	for i < len(s) && s[i] != '%' {
		i++
	}
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		c := s[i]
		if c == '%' && i+2 < len(s) {
			hi, ok1 := unhex(s[i+1])
			lo, ok2 := unhex(s[i+2])
			if ok1 && ok2 {
				b = append(b, hi<<4|lo)
				i += 2
				continue
			}
		}
		b = append(b, c)
	}
	return string(b)
}

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
