package datasource

import (
	"testing"
	"time"
)

// FuzzPGDecode feeds every decoder arbitrary bytes, as a server (or a
// proxy in between) could send: no panic, and a value is always one of
// the vocabulary's types.
func FuzzPGDecode(f *testing.F) {
	f.Add(uint8(decTimestamp), []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Add(uint8(decTimestamp), []byte{0x80, 0, 0, 0, 0, 0, 0, 0})
	f.Add(uint8(decUUID), []byte("0123456789abcdef"))
	f.Add(uint8(decFloatText), []byte("NaN"))
	f.Add(uint8(decJSONText), []byte(`{"a":[1,2]}`))
	f.Add(uint8(decInt2), []byte{0x80, 0})
	f.Fuzz(func(t *testing.T, op uint8, b []byte) {
		d := pgDecoder{op: op % (decUnsupported + 1)}
		v, err := d.decode(b)
		if err != nil {
			return
		}
		if !vocabulary(v) {
			t.Fatalf("op %d: %T is not in the vocabulary", d.op, v)
		}
		if ts, ok := v.(time.Time); ok && ts.Location() != time.UTC {
			t.Fatalf("timestamp in %v", ts.Location())
		}
		if bs, ok := v.([]byte); ok && len(bs) > 0 && len(b) > 0 && &bs[0] == &b[0] {
			t.Fatal("bytes alias the driver's buffer")
		}
	})
}
