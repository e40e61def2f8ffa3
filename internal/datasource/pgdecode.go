package datasource

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/levee-gw/levee/internal/valuekind"
)

// builtinTypes are the PostgreSQL types with a kind other than string, and
// the text types, by OID (fixed for built-in types), with pg_type's names.
var builtinTypes = map[uint32]struct{ name, kind string }{
	pgtype.Int2OID:        {"int2", valuekind.Int64},
	pgtype.Int4OID:        {"int4", valuekind.Int64},
	pgtype.Int8OID:        {"int8", valuekind.Int64},
	pgtype.OIDOID:         {"oid", valuekind.Int64},
	pgtype.Float4OID:      {"float4", valuekind.Float64},
	pgtype.Float8OID:      {"float8", valuekind.Float64},
	pgtype.BoolOID:        {"bool", valuekind.Bool},
	pgtype.NumericOID:     {"numeric", valuekind.Numeric},
	pgtype.TextOID:        {"text", valuekind.String},
	pgtype.VarcharOID:     {"varchar", valuekind.String},
	pgtype.BPCharOID:      {"bpchar", valuekind.String},
	pgtype.NameOID:        {"name", valuekind.String},
	pgtype.DateOID:        {"date", valuekind.Date},
	pgtype.TimestampOID:   {"timestamp", valuekind.Timestamp},
	pgtype.TimestamptzOID: {"timestamptz", valuekind.Timestamp},
	pgtype.UUIDOID:        {"uuid", valuekind.UUID},
	pgtype.ByteaOID:       {"bytea", valuekind.Bytes},
	pgtype.JSONOID:        {"json", valuekind.JSON},
	pgtype.JSONBOID:       {"jsonb", valuekind.JSON},
}

// typeOf names a result column's type and picks its decoder for the format
// the server sends it in.
func (s *pgSource) typeOf(tm *pgtype.Map, oid uint32, format int16) (name, kind string, dec pgDecoder) {
	if bt, ok := builtinTypes[oid]; ok {
		name, kind = bt.name, bt.kind
	} else {
		s.mu.Lock()
		name = s.typeNames[oid]
		s.mu.Unlock()
		if name == "" {
			if t, ok := tm.TypeForOID(oid); ok {
				name = t.Name
			} else {
				name = "oid:" + strconv.FormatUint(uint64(oid), 10)
			}
		}
		kind = valuekind.String
	}
	if format == pgtype.TextFormatCode {
		switch oid {
		case pgtype.Float4OID:
			return name, kind, pgDecoder{op: decFloatText}
		case pgtype.JSONOID, pgtype.JSONBOID:
			return name, kind, pgDecoder{op: decJSONText}
		}
		return name, kind, pgDecoder{op: decText}
	}
	switch oid {
	case pgtype.Int2OID:
		return name, kind, pgDecoder{op: decInt2}
	case pgtype.Int4OID:
		return name, kind, pgDecoder{op: decInt4}
	case pgtype.Int8OID:
		return name, kind, pgDecoder{op: decInt8}
	case pgtype.OIDOID:
		return name, kind, pgDecoder{op: decOID}
	case pgtype.Float8OID:
		return name, kind, pgDecoder{op: decFloat8}
	case pgtype.BoolOID:
		return name, kind, pgDecoder{op: decBool}
	case pgtype.TimestampOID, pgtype.TimestamptzOID:
		return name, kind, pgDecoder{op: decTimestamp}
	case pgtype.UUIDOID:
		return name, kind, pgDecoder{op: decUUID}
	case pgtype.ByteaOID:
		return name, kind, pgDecoder{op: decBytes}
	}
	// Binary for a type we did not ask binary for: cannot happen with
	// resultFormats, refused rather than guessed.
	return name, kind, pgDecoder{op: decUnsupported}
}

const (
	decText = iota
	decFloatText
	decJSONText
	decInt2
	decInt4
	decInt8
	decOID
	decFloat8
	decBool
	decTimestamp
	decUUID
	decBytes
	decUnsupported
)

// pgDecoder turns one column's raw value (text or binary, as resultFormats
// asked) into a vocabulary value. The raw bytes belong to pgx's read
// buffer: anything kept is copied.
type pgDecoder struct{ op uint8 }

// pgEpochMicros is 2000-01-01 00:00:00 UTC, PostgreSQL's timestamp epoch,
// in Unix microseconds.
const pgEpochMicros = 946684800 * 1000000

var errBinaryLength = errors.New("binary value of the wrong length")

func (d pgDecoder) decode(b []byte) (any, error) {
	if b == nil {
		return nil, nil
	}
	switch d.op {
	case decText:
		return string(b), nil
	case decFloatText:
		// float4 parsed from the server's shortest text, so 1.1 stays 1.1
		// rather than float32(1.1) widened (1.100000023841858).
		f, err := strconv.ParseFloat(string(b), 64)
		if err != nil {
			return nil, err
		}
		return f, nil
	case decJSONText:
		if !json.Valid(b) {
			return nil, errors.New("invalid JSON from the server")
		}
		return json.RawMessage(append([]byte(nil), b...)), nil
	case decInt2:
		if len(b) != 2 {
			return nil, errBinaryLength
		}
		return int64(int16(binary.BigEndian.Uint16(b))), nil
	case decInt4:
		if len(b) != 4 {
			return nil, errBinaryLength
		}
		return int64(int32(binary.BigEndian.Uint32(b))), nil
	case decInt8:
		if len(b) != 8 {
			return nil, errBinaryLength
		}
		return int64(binary.BigEndian.Uint64(b)), nil
	case decOID:
		if len(b) != 4 {
			return nil, errBinaryLength
		}
		return int64(binary.BigEndian.Uint32(b)), nil
	case decFloat8:
		if len(b) != 8 {
			return nil, errBinaryLength
		}
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	case decBool:
		if len(b) != 1 {
			return nil, errBinaryLength
		}
		return b[0] != 0, nil
	case decTimestamp:
		if len(b) != 8 {
			return nil, errBinaryLength
		}
		us := int64(binary.BigEndian.Uint64(b))
		switch us {
		case math.MaxInt64:
			return "infinity", nil // as PostgreSQL renders it; no time.Time for it
		case math.MinInt64:
			return "-infinity", nil
		}
		// PostgreSQL's range (4713 BC to 294276 AD) is well inside
		// int64 microseconds after the shift.
		return time.UnixMicro(us + pgEpochMicros).UTC(), nil
	case decUUID:
		if len(b) != 16 {
			return nil, errBinaryLength
		}
		var t [36]byte
		hex.Encode(t[0:8], b[0:4])
		t[8] = '-'
		hex.Encode(t[9:13], b[4:6])
		t[13] = '-'
		hex.Encode(t[14:18], b[6:8])
		t[18] = '-'
		hex.Encode(t[19:23], b[8:10])
		t[23] = '-'
		hex.Encode(t[24:36], b[10:16])
		return string(t[:]), nil
	case decBytes:
		return append(make([]byte, 0, len(b)), b...), nil
	}
	return nil, fmt.Errorf("no decoder for this binary type")
}
