package dataquery

import (
	"encoding/base64"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestCursorRoundTrip: every keyset type comes back with its type and
// value.
func TestCursorRoundTrip(t *testing.T) {
	at := time.Date(2025, 3, 1, 12, 30, 0, 123456789, time.UTC)
	for _, vals := range [][]any{
		{int64(0)},
		{int64(math.MinInt64), int64(math.MaxInt64)},
		{3.25, math.Inf(-1), math.SmallestNonzeroFloat64, math.Copysign(0, -1)},
		{true, false},
		{"", "héllo ✓", strings.Repeat("x", 600), "\x00\xff"},
		{at, time.Unix(-62135596800, 0).UTC(), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)},
		{at, int64(7), "a", 1.5, true, int64(1), int64(2), int64(3)},
	} {
		c, err := EncodeCursor(testKey, "route@1\x00a=1", vals)
		if err != nil {
			t.Fatalf("%v: %v", vals, err)
		}
		if len(c) > MaxCursorLen || strings.ContainsAny(c, "+/=") {
			t.Errorf("%v: cursor %q is not short base64url", vals, c)
		}
		got, err := DecodeCursor(testKey, "route@1\x00a=1", c)
		if err != nil {
			t.Fatalf("%v: %v", vals, err)
		}
		if !reflect.DeepEqual(got, vals) {
			// Negative zero and time.Time compare by value here.
			same := len(got) == len(vals)
			for i := 0; same && i < len(got); i++ {
				switch w := vals[i].(type) {
				case float64:
					g, ok := got[i].(float64)
					same = ok && math.Float64bits(g) == math.Float64bits(w)
				case time.Time:
					g, ok := got[i].(time.Time)
					same = ok && g.Equal(w) && g.Location() == time.UTC
				default:
					same = got[i] == vals[i]
				}
			}
			if !same {
				t.Errorf("round trip %#v -> %#v", vals, got)
			}
		}
	}
	// A time in another zone comes back as the same instant in UTC.
	c, _ := EncodeCursor(testKey, "b", []any{at.In(time.FixedZone("x", 3600))})
	if got, err := DecodeCursor(testKey, "b", c); err != nil || !got[0].(time.Time).Equal(at) || got[0].(time.Time).Location() != time.UTC {
		t.Errorf("zoned time: %v, %v", got, err)
	}
}

// TestCursorEncodeRefuses: NULL, foreign types and over-long values.
func TestCursorEncodeRefuses(t *testing.T) {
	for _, vals := range [][]any{
		nil, {nil}, {int64(1), nil}, {1}, {int32(1)}, {[]byte("x")}, {strings.Repeat("x", 800)},
		make([]any, MaxKeyset+1),
	} {
		if c, err := EncodeCursor(testKey, "b", vals); err == nil {
			t.Errorf("%.40v: encoded as %q, want an error", vals, c)
		}
	}
}

// TestCursorRefused: tampered, truncated, extended, foreign, re-encoded
// and over-long cursors are all invalid_cursor.
func TestCursorRefused(t *testing.T) {
	good, err := EncodeCursor(testKey, "orders-v1@1\x00customer_id=5", []any{time.Unix(1e9, 0).UTC(), int64(42)})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(good)
	bad := map[string]string{
		"empty":        "",
		"truncated":    good[:len(good)-1],
		"half":         good[:len(good)/2],
		"extended":     good + "A",
		"padded":       good + "==",
		"std alphabet": base64.RawStdEncoding.EncodeToString(raw) + strings.Repeat("/", 1),
		"not base64":   "!!!!",
		"over-long":    strings.Repeat("A", MaxCursorLen+1),
		"payload only": base64.RawURLEncoding.EncodeToString(raw[:len(raw)-cursorMACLen]),
		"mac only":     base64.RawURLEncoding.EncodeToString(raw[len(raw)-cursorMACLen:]),
	}
	for i := range raw {
		for _, bit := range []byte{1, 0x80} {
			flipped := append([]byte(nil), raw...)
			flipped[i] ^= bit
			bad["flip byte "+string(rune('0'+i%10))+string(rune('a'+i/10))+string(rune(bit))] = base64.RawURLEncoding.EncodeToString(flipped)
		}
	}
	for name, c := range bad {
		checkInvalidCursor(t, name, testKey, "orders-v1@1\x00customer_id=5", c)
	}
	checkInvalidCursor(t, "other key", []byte("another key, 16+ bytes"), "orders-v1@1\x00customer_id=5", good)
	checkInvalidCursor(t, "other route", testKey, "orders-v2@1\x00customer_id=5", good)
	checkInvalidCursor(t, "other version", testKey, "orders-v1@2\x00customer_id=5", good)
	checkInvalidCursor(t, "other params", testKey, "orders-v1@1\x00customer_id=6", good)
	checkInvalidCursor(t, "params moved into scope", testKey, "orders-v1@1customer_id=5\x00", good)
	// A last base64 character with unused bits set decodes to the same
	// bytes in lax decoders; the strict decoder refuses it.
	if len(good)%4 != 0 {
		last := good[len(good)-1]
		i := strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", last)
		alt := good[:len(good)-1] + string("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"[i|1])
		if alt != good {
			checkInvalidCursor(t, "non-canonical base64", testKey, "orders-v1@1\x00customer_id=5", alt)
		}
	}
}

func checkInvalidCursor(t *testing.T, name string, key []byte, binding, c string) {
	t.Helper()
	v, err := DecodeCursor(key, binding, c)
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonInvalidCursor || e.Param != "cursor" {
		t.Errorf("%s: decoded %v, %v; want invalid_cursor", name, v, err)
	}
	if e != nil && strings.Contains(e.Message, c[:min(len(c), 8)]) && len(c) >= 8 {
		t.Errorf("%s: message %q echoes the cursor", name, e.Message)
	}
}

// TestCursorPayloadStrict: a payload a valid MAC covers is still parsed
// strictly (this guards against a key leak or an encoder bug).
func TestCursorPayloadStrict(t *testing.T) {
	for _, p := range [][]byte{
		{}, {cursorVersion}, {2, 1, 'b', 1}, {cursorVersion, 0}, {cursorVersion, MaxKeyset + 1},
		{cursorVersion, 1}, {cursorVersion, 1, 'b', 2}, {cursorVersion, 1, 'b', 1, 0}, {cursorVersion, 1, 'x'},
		{cursorVersion, 1, 'i', 1, 2}, {cursorVersion, 1, 's', 5, 'a'}, {cursorVersion, 1, 's', 0xff},
		{cursorVersion, 1, 't', 0, 0, 0, 0, 0, 0, 0, 0, 0x3b, 0x9a, 0xca, 0x00}, // 1e9 ns
		{cursorVersion, 2, 'b', 1},
	} {
		if v, err := parseCursorPayload(p); err == nil {
			t.Errorf("%v: parsed as %v", p, v)
		}
		signed, _ := newSigner(testKey).mac(append([]byte(nil), p...), "b", "", false, p, nil)
		checkInvalidCursor(t, "signed bad payload", testKey, "b", base64.RawURLEncoding.EncodeToString(signed))
	}
}

// TestNextCursorIsEncodeCursor: the documented binding of a compiled
// query's cursors.
func TestNextCursorIsEncodeCursor(t *testing.T) {
	q := mustSQL(t, ordersSQL, []Param{{Name: "customer_id", Type: Int64, Required: true}}, ordersPage(), Postgres)
	b, err := q.Bind(query(t, "customer_id=3"), true)
	if err != nil {
		t.Fatal(err)
	}
	vals := []any{time.Unix(7, 0).UTC(), int64(8)}
	got, err1 := q.NextCursor(b, vals)
	want, err2 := EncodeCursor(testKey, "orders-v1@1\x00customer_id=3", vals)
	if err1 != nil || err2 != nil || got != want {
		t.Errorf("NextCursor %q, %v; EncodeCursor %q, %v", got, err1, want, err2)
	}
	if _, err := q.NextCursor(b, vals[:1]); err == nil {
		t.Error("NextCursor took one value for a two-column keyset")
	}
}
