package dataquery

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"math"
	"sync"
	"time"
)

// A cursor is base64url (unpadded) of
//
//	payload = version(1) count(1) value...
//	value   = 'i' int64(8, big endian) | 'f' float64 bits(8) | 'b' 0|1
//	        | 's' uvarint length, bytes | 't' Unix seconds(8) nanoseconds(4)
//	cursor  = payload ‖ HMAC-SHA256(key, domain ‖ binding ‖ payload)[:16]
//
// where binding is the page's Scope, a NUL, and the request's canonical
// parameters (Bound.Params). The MAC is checked, in constant time, before
// any of the payload is read, so a tampered cursor, or one issued for
// another route, version or parameter set, is refused as a whole. 16 bytes
// of MAC leave a forger a 2^-128 chance per try. Values come back with the
// Go type they went in with; a time.Time comes back in UTC.

// MaxCursorLen is the longest cursor text accepted or issued.
const MaxCursorLen = 1024

const (
	cursorVersion = 1
	cursorMACLen  = 16
	cursorDomain  = "levee/dataquery/cursor/v1\x00"
)

// rawURL is the strict decoder: it refuses a last character whose unused
// bits are set, so each byte string has exactly one cursor text.
var rawURL = base64.RawURLEncoding.Strict()

// signer computes cursor MACs under one key. A compiled query keeps one,
// whose pool reuses the HMAC state and scratch buffers across requests;
// the exported functions make a fresh one. Safe for concurrent use.
type signer struct {
	pool sync.Pool // of *macState
}

type macState struct {
	h   hash.Hash
	msg []byte
	sum [sha256.Size]byte
}

func newSigner(key []byte) *signer {
	key = append([]byte(nil), key...)
	s := &signer{}
	s.pool.New = func() any { return &macState{h: hmac.New(sha256.New, key)} }
	return s
}

// mac reports whether mac (when not nil) is the MAC of the binding
// scope+"\x00"+params (scope alone when !split: the exported functions
// get the whole binding) and payload, comparing in constant time; with a
// nil mac it appends the MAC to dst.
func (s *signer) mac(dst []byte, scope, params string, split bool, payload, mac []byte) ([]byte, bool) {
	st := s.pool.Get().(*macState)
	defer s.pool.Put(st)
	m := append(st.msg[:0], cursorDomain...)
	m = append(m, scope...)
	if split {
		m = append(append(m, 0), params...)
	}
	m = append(m, payload...)
	if cap(m) <= 4*MaxCursorLen {
		st.msg = m
	}
	st.h.Reset()
	st.h.Write(m)
	sum := st.h.Sum(st.sum[:0])[:cursorMACLen]
	if mac != nil {
		return dst, hmac.Equal(mac, sum)
	}
	return append(dst, sum...), true
}

// EncodeCursor returns the cursor for the row holding values (the keyset
// columns' values, as the datasource returns them: int64, float64, bool,
// string or time.Time), bound to binding. A NULL (nil) or any other type is
// an error, as is a cursor longer than MaxCursorLen. A compiled query's
// NextCursor is EncodeCursor(Page.Key, Page.Scope+"\x00"+Bound.Params,
// values).
func EncodeCursor(key []byte, binding string, values []any) (string, error) {
	return encodeCursor(newSigner(key), binding, "", false, values)
}

// DecodeCursor returns the values EncodeCursor was given, if cursor was
// issued with key for binding. Every failure is an *Error with reason
// ReasonInvalidCursor.
func DecodeCursor(key []byte, binding, cursor string) ([]any, error) {
	v, err := decodeCursor(newSigner(key), binding, "", false, cursor)
	if err != nil {
		return nil, err
	}
	return v, nil
}

func encodeCursor(sg *signer, scope, params string, split bool, values []any) (string, error) {
	if len(values) == 0 || len(values) > MaxKeyset {
		return "", fmt.Errorf("cursor: %d values, want 1 to %d", len(values), MaxKeyset)
	}
	p := make([]byte, 0, 64)
	p = append(p, cursorVersion, byte(len(values)))
	for i, v := range values {
		switch x := v.(type) {
		case int64:
			p = binary.BigEndian.AppendUint64(append(p, 'i'), uint64(x))
		case float64:
			p = binary.BigEndian.AppendUint64(append(p, 'f'), math.Float64bits(x))
		case bool:
			b := byte(0)
			if x {
				b = 1
			}
			p = append(p, 'b', b)
		case string:
			p = append(binary.AppendUvarint(append(p, 's'), uint64(len(x))), x...)
		case time.Time:
			p = binary.BigEndian.AppendUint64(append(p, 't'), uint64(x.Unix()))
			p = binary.BigEndian.AppendUint32(p, uint32(x.Nanosecond()))
		case nil:
			return "", fmt.Errorf("cursor: keyset value %d is NULL; keyset columns must be NOT NULL", i)
		default:
			return "", fmt.Errorf("cursor: keyset value %d has type %T, not a keyset type", i, v)
		}
		if base64.RawURLEncoding.EncodedLen(len(p)+cursorMACLen) > MaxCursorLen {
			return "", fmt.Errorf("cursor: over %d bytes; the keyset values are too long", MaxCursorLen)
		}
	}
	p, _ = sg.mac(p, scope, params, split, p, nil)
	return base64.RawURLEncoding.EncodeToString(p), nil
}

var errCursor = errors.New("bad cursor payload")

func cursorErr(msg string) *Error {
	return paramErr("cursor", ReasonInvalidCursor, msg)
}

func decodeCursor(sg *signer, scope, params string, split bool, cursor string) ([]any, *Error) {
	if len(cursor) > MaxCursorLen {
		return nil, cursorErr("cursor is longer than the longest levee issues")
	}
	// Only the base64url alphabet: the decoder skips CR and LF, which
	// would let one cursor be written several ways.
	for i := 0; i < len(cursor); i++ {
		if c := cursor[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return nil, cursorErr("cursor is malformed")
		}
	}
	var buf [MaxCursorLen * 3 / 4]byte
	n, err := rawURL.Decode(buf[:], []byte(cursor))
	if err != nil || n < 2+cursorMACLen {
		return nil, cursorErr("cursor is malformed")
	}
	payload, mac := buf[:n-cursorMACLen], buf[n-cursorMACLen:n]
	if _, ok := sg.mac(nil, scope, params, split, payload, mac); !ok {
		return nil, cursorErr("cursor was not issued for this route, version and parameters")
	}
	vals, err := parseCursorPayload(payload)
	if err != nil {
		return nil, cursorErr("cursor is malformed")
	}
	return vals, nil
}

func parseCursorPayload(p []byte) ([]any, error) {
	if len(p) < 2 || p[0] != cursorVersion || p[1] == 0 || p[1] > MaxKeyset {
		return nil, errCursor
	}
	n := int(p[1])
	p = p[2:]
	vals := make([]any, 0, n)
	for range n {
		if len(p) == 0 {
			return nil, errCursor
		}
		tag := p[0]
		p = p[1:]
		switch tag {
		case 'i', 'f':
			if len(p) < 8 {
				return nil, errCursor
			}
			u := binary.BigEndian.Uint64(p)
			p = p[8:]
			if tag == 'i' {
				vals = append(vals, int64(u))
			} else {
				vals = append(vals, math.Float64frombits(u))
			}
		case 'b':
			if len(p) < 1 || p[0] > 1 {
				return nil, errCursor
			}
			vals = append(vals, p[0] == 1)
			p = p[1:]
		case 's':
			l, k := binary.Uvarint(p)
			if k <= 0 || l > uint64(len(p)-k) {
				return nil, errCursor
			}
			vals = append(vals, string(p[k:k+int(l)]))
			p = p[k+int(l):]
		case 't':
			if len(p) < 12 {
				return nil, errCursor
			}
			sec, ns := int64(binary.BigEndian.Uint64(p)), binary.BigEndian.Uint32(p[8:])
			if ns >= 1e9 {
				return nil, errCursor
			}
			vals = append(vals, time.Unix(sec, int64(ns)).UTC())
			p = p[12:]
		default:
			return nil, errCursor
		}
	}
	if len(p) != 0 {
		return nil, errCursor
	}
	return vals, nil
}
