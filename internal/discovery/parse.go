package discovery

import (
	"encoding/json"
	"errors"
	"strconv"

	"github.com/levee-gw/levee/internal/limits"
)

// Size bounds checked on raw bytes before decoding, so that a huge value is
// refused without being decoded. Each decoded byte costs at most 6 raw
// bytes (\uXXXX).
const (
	maxZoneLen          = limits.MaxIDLen
	maxMetadataKeys     = 64
	maxMetadataKeyLen   = 128
	maxMetadataValueLen = 1024
	maxMetadataRaw      = 2 + maxMetadataKeys*(6*maxMetadataKeyLen+6*maxMetadataValueLen+16)
)

// ParseList parses a JSON array of instances (a file or an admin body).
//
// The payload is refused whole, with a *PayloadError, when it is larger than
// limits.MaxPayloadBytes, nested deeper than limits.MaxDepth (checked by a
// bracket count before any decoding: encoding/json has no depth limit), has
// more than limits.MaxInstances items, is not JSON, or is not an array.
// Otherwise each item is validated on its own: a bad one is quarantined in
// Update.Rejected (Key "[i]") and the rest are kept, in payload order. If
// there was at least one item and every one was rejected, the error wraps
// ErrAllRejected and the returned Update still lists the rejections (for
// counting and logging) with no instances. An empty array is a valid update
// with no instances (the registry says: none); the Guard decides whether to
// believe it.
//
// Work is linear in len(data). Safe for concurrent use.
func ParseList(data []byte, limits Limits) (Update, error) {
	l, err := limits.resolve()
	if err != nil {
		return Update{}, err
	}
	n, err := precheck(data, l, true)
	if err != nil {
		return Update{}, err
	}
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v) // only to say where and why
		return Update{}, payloadErr(ErrMalformed, CodeNotJSON, "payload is not valid JSON: %v", err)
	}
	if data[skipSpace(data, 0)] != '[' {
		return Update{}, payloadErr(ErrMalformed, CodeNotArray, "payload is not a JSON array")
	}
	u := Update{Instances: make([]Instance, 0, n)}
	seen := make(map[string]struct{}, n)
	maxH := uint64(l.MaxWeight) * 100
	items := 0
	eachItem(data, func(item []byte) bool {
		index := items
		items++
		inst, rej := parseItem(item, maxH)
		if inst.Address != "" {
			// The address is valid, even if the instance was rejected for
			// another field: the first occurrence claims it, and later ones
			// are duplicates, so an ambiguous record never gets traffic.
			if _, dup := seen[inst.Address]; !dup {
				seen[inst.Address] = struct{}{}
			} else if rej == nil {
				rej = &Rejection{Reason: ReasonDuplicateAddress, Field: "address",
					Raw: truncateRaw([]byte(strconv.Quote(inst.Address))), Message: "address " + inst.Address + " appears earlier in the payload"}
			}
		}
		if rej != nil {
			rej.Key = "[" + strconv.Itoa(index) + "]"
			u.Rejected = append(u.Rejected, *rej)
		} else {
			u.Instances = append(u.Instances, inst)
		}
		return true
	})
	if items > 0 && len(u.Instances) == 0 {
		u.Instances = nil
		return u, payloadErr(ErrAllRejected, CodeAllRejected, "all %d instances were rejected", items)
	}
	return u, nil
}

// ParseInstance parses one instance (an etcd value). key names it in the
// Rejection. A value that is too large, too deep, not JSON or not an object
// is rejected as bad_instance; duplicates across keys are the caller's to
// detect (compare Instance.Address, which is canonical). Work is linear in
// len(data). Safe for concurrent use.
func ParseInstance(key string, data []byte, limits Limits) (Instance, *Rejection) {
	l, err := limits.resolve()
	if err != nil {
		return Instance{}, &Rejection{Key: key, Reason: ReasonBadInstance, Message: err.Error()}
	}
	if _, err := precheck(data, l, false); err != nil {
		var pe *PayloadError
		errors.As(err, &pe)
		return Instance{}, &Rejection{Key: key, Reason: ReasonBadInstance, Raw: truncateRaw(data), Message: pe.Detail}
	}
	if !json.Valid(data) {
		return Instance{}, &Rejection{Key: key, Reason: ReasonBadInstance, Raw: truncateRaw(data), Message: "value is not valid JSON"}
	}
	inst, rej := parseItem(data, uint64(l.MaxWeight)*100)
	if rej != nil {
		rej.Key = key
		return Instance{}, rej
	}
	return inst, nil
}

// precheck refuses payloads over the byte, depth or (for lists) item
// limits, in one pass over the bytes that tracks strings and escapes, and
// returns the number of top-level items (exact for a valid array). It does
// not check that data is JSON.
func precheck(data []byte, l Limits, list bool) (int, error) {
	if len(data) > l.MaxPayloadBytes {
		return 0, payloadErr(ErrTooLarge, CodePayloadTooLarge, "payload is %d bytes, more than the limit of %d", len(data), l.MaxPayloadBytes)
	}
	depth, items := 0, 0
	inString, escaped, expectItem := false, false, false
	for _, c := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if depth == 1 && expectItem && !isJSONSpace(c) && c != ']' && c != ',' {
			expectItem = false
			items++
			if list && items > l.MaxInstances {
				return 0, payloadErr(ErrTooLarge, CodeTooManyInstances, "payload has more than %d instances", l.MaxInstances)
			}
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			if depth > l.MaxDepth {
				return 0, payloadErr(ErrTooLarge, CodeTooDeep, "payload is nested more than %d levels deep", l.MaxDepth)
			}
			if depth == 1 {
				expectItem = true
			}
		case ']', '}':
			depth--
		case ',':
			if depth == 1 {
				expectItem = true
			}
		}
	}
	return items, nil
}

// parseItem validates one instance's raw JSON, which must be valid JSON.
// On rejection the returned Instance carries the canonical address when the
// address itself was valid, for duplicate detection; the caller sets the
// Rejection's Key (built only when needed: most items are fine).
func parseItem(item []byte, maxH uint64) (Instance, *Rejection) {
	item = trimJSONSpace(item)
	if len(item) == 0 || item[0] != '{' {
		return Instance{}, &Rejection{Reason: ReasonBadInstance, Raw: truncateRaw(item), Message: "instance is not a JSON object"}
	}
	var f fields
	if msg := f.split(item); msg != "" {
		return Instance{}, &Rejection{Reason: ReasonBadInstance, Raw: truncateRaw(item), Message: msg}
	}
	var inst Instance
	addr, msg := parseAddress(f.address)
	if msg != "" {
		raw := f.address
		if raw == nil {
			raw = item
		}
		return Instance{}, &Rejection{Reason: ReasonBadAddress, Field: "address", Raw: truncateRaw(raw), Message: "address " + msg}
	}
	inst.Address = addr
	reject := func(reason Reason, field string, raw []byte, msg string) (Instance, *Rejection) {
		return Instance{Address: addr}, &Rejection{Reason: reason, Field: field, Raw: truncateRaw(raw), Message: msg}
	}
	w, p := parseWeight(f.weight, maxH)
	if p != nil {
		return reject(p.reason, "weight", f.weight, "weight "+p.msg)
	}
	inst.Weight = w
	zone, msg := parseZone(f.zone)
	if msg != "" {
		return reject(ReasonBadZone, "zone", f.zone, "zone "+msg)
	}
	inst.Zone = zone
	md, msg := parseMetadata(f.metadata)
	if msg != "" {
		return reject(ReasonBadMetadata, "metadata", f.metadata, "metadata "+msg)
	}
	inst.Metadata = md
	return inst, nil
}

// fields holds an instance's known fields as raw JSON; nil when absent.
type fields struct {
	address, weight, zone, metadata json.RawMessage
}

// split walks a valid JSON object's members, keeping the known fields
// (names matched case-insensitively, as encoding/json matches struct
// fields) and skipping the rest. It returns a message when a known field
// appears twice: the object is ambiguous, and encoding/json would silently
// keep the last one.
func (f *fields) split(obj []byte) string {
	msg := ""
	eachMember(obj, func(key, value []byte) bool {
		var dst *json.RawMessage
		var name string
		switch {
		case keyIs(key, "address"):
			dst, name = &f.address, "address"
		case keyIs(key, "weight"):
			dst, name = &f.weight, "weight"
		case keyIs(key, "zone"):
			dst, name = &f.zone, "zone"
		case keyIs(key, "metadata"):
			dst, name = &f.metadata, "metadata"
		default:
			return true
		}
		if *dst != nil {
			msg = "field " + name + " appears more than once"
			return false
		}
		*dst = value
		return true
	})
	return msg
}

// tooLong is stringField's problem for a value over its length limit;
// callers phrase it for their field.
const tooLong = "too long"

// stringField reads a field's raw JSON as a string of at most maxLen bytes.
// present is false for a missing or null field. problem is "" for a good
// string, tooLong, or a phrase that follows the field name. The length is
// checked on the raw bytes first (an escape takes at most 6), so a huge
// value is refused before it is decoded.
func stringField(raw []byte, maxLen int) (s string, present bool, problem string) {
	raw = trimJSONSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", false, ""
	}
	if raw[0] != '"' {
		return "", true, "must be a string"
	}
	if len(raw) > 2+6*maxLen {
		return "", true, tooLong
	}
	s, ok := decodeString(raw)
	if !ok {
		return "", true, "is not a valid JSON string"
	}
	if len(s) > maxLen {
		return "", true, tooLong
	}
	return s, true, ""
}

// parseZone checks an optional zone.
func parseZone(raw []byte) (string, string) {
	s, present, problem := stringField(raw, maxZoneLen)
	switch {
	case !present:
		return "", ""
	case problem == tooLong:
		return "", "must be at most 64 bytes"
	case problem != "":
		return "", problem
	}
	if s != "" && !limits.ValidID(s) { // levee's name rule; "" is no zone
		return "", `must hold only a-z, 0-9, "_", "." and "-"`
	}
	return s, ""
}

// parseMetadata checks optional metadata: an object of string to string,
// at most 64 keys, no key twice, keys ≤ 128 bytes, values ≤ 1024 bytes.
func parseMetadata(raw []byte) (map[string]string, string) {
	raw = trimJSONSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, ""
	}
	if raw[0] != '{' {
		return nil, "must be an object of string to string"
	}
	if len(raw) > maxMetadataRaw {
		return nil, "is too large"
	}
	md := map[string]string{}
	msg := ""
	eachMember(raw, func(kraw, vraw []byte) bool {
		if len(md) == maxMetadataKeys {
			msg = "has more than 64 keys"
			return false
		}
		k, ok := decodeString(kraw)
		if !ok {
			msg = "is not a valid JSON object"
			return false
		}
		if len(k) > maxMetadataKeyLen {
			msg = "has a key longer than 128 bytes"
			return false
		}
		v, ok := decodeString(vraw)
		if !ok {
			msg = "value of " + strconv.Quote(k) + " is not a string"
			return false
		}
		if len(v) > maxMetadataValueLen {
			msg = "value of " + strconv.Quote(k) + " is longer than 1024 bytes"
			return false
		}
		if _, dup := md[k]; dup {
			msg = "key " + strconv.Quote(k) + " appears more than once"
			return false
		}
		md[k] = v
		return true
	})
	if msg != "" {
		return nil, msg
	}
	if len(md) == 0 {
		return nil, ""
	}
	return md, ""
}
