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

// cursorMAC is the MAC over the binding scope+"\x00"+params, written in
// pieces so the binding is never built; scope alone when !split (the
// exported functions, given the whole binding).
func cursorMAC(key []byte, scope, params string, split bool, payload []byte) []byte {
	var m hash.Hash = hmac.New(sha256.New, key)
	m.Write([]byte(cursorDomain))
	m.Write([]byte(scope))
	if split {
		m.Write([]byte{0})
		m.Write([]byte(params))
	}
	m.Write(payload)
	return m.Sum(nil)[:cursorMACLen]
}

// EncodeCursor returns the cursor for the row holding values (the keyset
// columns' values, as the datasource returns them: int64, float64, bool,
// string or time.Time), bound to binding. A NULL (nil) or any other type is
// an error, as is a cursor longer than MaxCursorLen.
func EncodeCursor(key []byte, binding string, values []any) (string, error) {
	return encodeCursor(key, binding, "", false, values)
}

// DecodeCursor returns the values EncodeCursor was given, if cursor was
// issued with key for binding. Every failure is an *Error with reason
// ReasonInvalidCursor.
func DecodeCursor(key []byte, binding, cursor string) ([]any, error) {
	v, err := decodeCursor(key, binding, "", false, cursor)
	if err != nil {
		return nil, err
	}
	return v, nil
}

func encodeCursor(key []byte, scope, params string, split bool, values []any) (string, error) {
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
	p = append(p, cursorMAC(key, scope, params, split, p)...)
	return base64.RawURLEncoding.EncodeToString(p), nil
}

var errCursor = errors.New("bad cursor payload")

func cursorErr(msg string) *Error {
	return paramErr("cursor", ReasonInvalidCursor, msg)
}

func decodeCursor(key []byte, scope, params string, split bool, cursor string) ([]any, *Error) {
	if len(cursor) > MaxCursorLen {
		return nil, cursorErr("cursor is longer than the longest levee issues")
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(cursor)
	if err != nil || len(raw) < 2+cursorMACLen {
		return nil, cursorErr("cursor is malformed")
	}
	payload, mac := raw[:len(raw)-cursorMACLen], raw[len(raw)-cursorMACLen:]
	if !hmac.Equal(mac, cursorMAC(key, scope, params, split, payload)) {
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
