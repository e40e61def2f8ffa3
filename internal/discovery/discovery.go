// Package discovery is the firewall between a service registry and the
// request path. It turns registry payloads (a file, an etcd value, an admin
// API body) into typed, bounded Instances, quarantines every record it
// cannot trust with a stable Reason, refuses structurally broken payloads
// whole, holds back updates that would drain too much capacity at once
// (Guard), remembers which problems were already logged (Deduper), and keeps
// the last good list of each upstream on disk (WriteSnapshot, ReadSnapshot).
//
// It exists because of the "string 0" outage (docs in the project's design brief):
// a registry handed a weight as the string "0", a balancer's gcd loop spun
// forever, and restarts did not help because the poisoned record stayed in
// the registry. Here every weight spelling a real registry sends is either
// normalised to an integer number of hundredths in 0..MaxWeight×100 or
// rejected, and every step does work bounded by the payload's length, never
// by a value inside it.
//
// The parsing, the guard and the deduper are pure (time is a parameter).
// The sources (FileSource, EtcdSource, DNSSource) watch a registry on goroutines that
// Run owns and ends before it returns. The package imports nothing
// internal.
//
// # The instance format
//
//	{"address": "10.0.0.5:8080", "weight": 3, "zone": "a", "metadata": {"version": "v2"}}
//
// A file and an admin body hold a JSON array of these (ParseList); an etcd
// value holds one (ParseInstance). Field names match case-insensitively, as
// encoding/json does for structs ("Weight" is weight); a field given twice
// (in any case) makes the instance ambiguous and it is rejected as
// bad_instance. Unknown fields are ignored: registries add their own.
//
//   - address: required string "host:port". host is an IP address (IPv6 in
//     brackets, no zone such as %eth0) or a DNS name of at most 253 bytes of
//     letters, digits, hyphens and dots in labels of 1..63 bytes that do not
//     start or end with a hyphen, whose last label is not all digits (so a
//     mistyped IPv4 address is not taken for a name); an optional trailing
//     dot is kept. port is 1..65535. The address is canonicalised: names are
//     lower-cased, IPs printed in netip's canonical form, the port without
//     leading zeros ("Web-1.Example:0080" → "web-1.example:80",
//     "[0:0::1]:80" → "[::1]:80"). Duplicates are detected on the canonical
//     form, so they are compared case-insensitively.
//   - weight: a JSON number or a string holding a plain decimal number,
//     normalised to hundredths; the exact rules are at the head of
//     weight.go. Missing or null means 1 (100 hundredths).
//   - zone: optional string of at most 64 bytes of a-z, 0-9, "_", "." and
//     "-"; missing, null or "" means unknown.
//   - metadata: optional object of string to string; at most 64 keys, keys
//     at most 128 bytes, values at most 1024 bytes, no key twice; missing or
//     null means none.
//
// An instance with several problems is rejected once, for the first problem
// in the order: not an object, duplicate field, address, weight, zone,
// metadata, duplicate address.
package discovery

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Instance is one endpoint as a registry announced it, after validation.
// Instances returned by this package are never mutated by it afterwards;
// callers share them between snapshots and must not mutate them either.
type Instance struct {
	// Address is the canonical "host:port" (see the package doc).
	Address string
	// Weight is in hundredths of the announced weight: 3 → 300, 0.5 → 50,
	// 10000 → 1,000,000. 0 means drained: no new requests, in-flight ones
	// finish. Never more than Limits.MaxWeight×100.
	Weight uint32
	// Zone is the failure domain; "" when unknown.
	Zone string
	// Metadata holds the registry's string labels; nil when none.
	Metadata map[string]string
}

// Reason is the stable snake_case code a rejected instance carries. It is
// used as a metric label and in the admin API; the set is closed (the
// constants below) so label cardinality is bounded.
type Reason string

// The reasons an instance is rejected for.
const (
	// ReasonNotANumber: the weight is not a number nor a string holding a
	// plain decimal number ("abc", "", "0x10", " 3", "1e3", true, [], {}).
	ReasonNotANumber Reason = "not_a_number"
	// ReasonNotFinite: the weight is NaN or infinite ("NaN", "Inf",
	// "-Infinity", 1e309).
	ReasonNotFinite Reason = "not_finite"
	// ReasonNegative: the weight is below zero (-1, "-0.5"). -0 is 0.
	ReasonNegative Reason = "negative"
	// ReasonTooLarge: the weight, rounded to hundredths, exceeds
	// Limits.MaxWeight.
	ReasonTooLarge Reason = "too_large"
	// ReasonTooSmall: the weight is above zero but rounds to 0.00. It is
	// rejected rather than silently read as drained: a registry that meant
	// "a little traffic" must not have its instance taken out of service.
	ReasonTooSmall Reason = "too_small"
	// ReasonBadAddress: the address is missing, not a string or not a valid
	// host:port.
	ReasonBadAddress Reason = "bad_address"
	// ReasonDuplicateAddress: an earlier instance in the same payload has
	// the same canonical address (whether or not that one was accepted).
	ReasonDuplicateAddress Reason = "duplicate_address"
	// ReasonBadZone: the zone is not a string of at most 64 bytes of
	// a-z, 0-9, "_", "." and "-".
	ReasonBadZone Reason = "bad_zone"
	// ReasonBadMetadata: metadata is not an object of string to string
	// within the size limits, or repeats a key.
	ReasonBadMetadata Reason = "bad_metadata"
	// ReasonBadInstance: the item is not a JSON object, or repeats a field.
	ReasonBadInstance Reason = "bad_instance"
)

// Reasons lists every Reason, for pre-declaring metric label values.
var Reasons = []Reason{
	ReasonNotANumber, ReasonNotFinite, ReasonNegative, ReasonTooLarge, ReasonTooSmall,
	ReasonBadAddress, ReasonDuplicateAddress, ReasonBadZone, ReasonBadMetadata, ReasonBadInstance,
}

// maxRawLen is how much of an offending value a Rejection keeps.
const maxRawLen = 256

// Rejection is one quarantined instance: never used, shown in the admin
// API, counted and logged once.
type Rejection struct {
	// Key identifies the instance: the etcd key, or "[3]" for the fourth
	// item of an array.
	Key string
	// Reason is the stable code.
	Reason Reason
	// Field is the offending field ("address", "weight", "zone",
	// "metadata"), or "" when the instance as a whole is at fault.
	Field string
	// Raw is the offending raw JSON (the field's value, or the whole item
	// when Field is ""; for duplicate_address the canonical address,
	// quoted), truncated to 256 bytes at a character boundary, invalid
	// UTF-8 replaced by U+FFFD.
	Raw string
	// Message is a human sentence for logs and the admin API.
	Message string
}

// Error makes a Rejection usable as an error: `[3] weight: weight "abc" is
// not a number (not_a_number)`.
func (r *Rejection) Error() string {
	if r.Field == "" {
		return fmt.Sprintf("%s: %s (%s)", r.Key, r.Message, r.Reason)
	}
	return fmt.Sprintf("%s %s: %s (%s)", r.Key, r.Field, r.Message, r.Reason)
}

// Update is the result of parsing one registry payload: the instances to
// serve (in payload order) and the ones quarantined.
type Update struct {
	Instances []Instance
	Rejected  []Rejection
}

// Defaults for Limits' zero fields.
const (
	DefaultMaxWeight       = 10000
	DefaultMaxPayloadBytes = 16 << 20
	DefaultMaxDepth        = 32
	DefaultMaxInstances    = 100_000
	// MaxWeightLimit is the largest Limits.MaxWeight: the weight in
	// hundredths must fit in a uint32.
	MaxWeightLimit = (1<<32 - 1) / 100
)

// Limits bound what a payload may hold. The zero value means every default.
type Limits struct {
	// MaxWeight is the largest weight in whole units, inclusive. 0 means
	// DefaultMaxWeight (10000); at most MaxWeightLimit.
	MaxWeight uint32
	// MaxPayloadBytes is the largest payload accepted, in bytes. 0 means
	// DefaultMaxPayloadBytes (16 MiB).
	MaxPayloadBytes int
	// MaxDepth is the deepest nesting of arrays and objects accepted; the
	// array of a list is depth 1, its instances 2, their metadata 3. 0 means
	// DefaultMaxDepth (32).
	MaxDepth int
	// MaxInstances is the most items an array may hold. 0 means
	// DefaultMaxInstances (100,000).
	MaxInstances int
}

// resolve fills in defaults and checks l.
func (l Limits) resolve() (Limits, error) {
	if l.MaxWeight == 0 {
		l.MaxWeight = DefaultMaxWeight
	}
	if l.MaxPayloadBytes == 0 {
		l.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if l.MaxDepth == 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxInstances == 0 {
		l.MaxInstances = DefaultMaxInstances
	}
	var errs []error
	if l.MaxWeight > MaxWeightLimit {
		errs = append(errs, fmt.Errorf("max weight must be at most %d, got %d", MaxWeightLimit, l.MaxWeight))
	}
	if l.MaxPayloadBytes < 0 {
		errs = append(errs, fmt.Errorf("max payload bytes must be 0 (default) or more, got %d", l.MaxPayloadBytes))
	}
	if l.MaxDepth < 0 {
		errs = append(errs, fmt.Errorf("max depth must be 0 (default) or more, got %d", l.MaxDepth))
	}
	if l.MaxInstances < 0 {
		errs = append(errs, fmt.Errorf("max instances must be 0 (default) or more, got %d", l.MaxInstances))
	}
	if len(errs) > 0 {
		return l, fmt.Errorf("discovery: invalid limits: %w", errors.Join(errs...))
	}
	return l, nil
}

// Validate reports whether l is usable (after defaults are applied).
func (l Limits) Validate() error {
	_, err := l.resolve()
	return err
}

// Sentinel errors for payloads refused whole. Match them with errors.Is; use
// errors.As with *PayloadError for the stable code.
var (
	// ErrMalformed: the payload is not JSON, or not a JSON array.
	ErrMalformed = errors.New("malformed payload")
	// ErrTooLarge: the payload exceeds a Limit (bytes, depth or items).
	ErrTooLarge = errors.New("payload exceeds a limit")
	// ErrAllRejected: the payload held instances and every one was
	// rejected.
	ErrAllRejected = errors.New("every instance was rejected")
)

// Codes of a PayloadError, stable snake_case for the
// levee_discovery_updates_total{result} family and logs.
const (
	CodeNotJSON          = "not_json"
	CodeNotArray         = "not_an_array"
	CodePayloadTooLarge  = "payload_too_large"
	CodeTooDeep          = "too_deep"
	CodeTooManyInstances = "too_many_instances"
	CodeAllRejected      = "all_rejected"
)

// PayloadError is why a payload was refused whole. It wraps one of
// ErrMalformed, ErrTooLarge or ErrAllRejected.
type PayloadError struct {
	// Code is one of the Code constants.
	Code string
	// Detail is a human sentence.
	Detail string
	err    error
}

func (e *PayloadError) Error() string { return "discovery: " + e.Detail }

// Unwrap returns the sentinel the error belongs to.
func (e *PayloadError) Unwrap() error { return e.err }

func payloadErr(sentinel error, code, format string, args ...any) error {
	return &PayloadError{Code: code, Detail: fmt.Sprintf(format, args...), err: sentinel}
}

// truncateRaw keeps at most maxRawLen bytes of raw, with invalid UTF-8
// replaced by U+FFFD first (a replacement is longer than the byte it
// replaces, so the cut comes after it), cut at a character boundary.
func truncateRaw(raw []byte) string {
	if len(raw) > maxRawLen+utf8.UTFMax {
		raw = raw[:maxRawLen+utf8.UTFMax] // enough to decide the kept part
	}
	s := strings.ToValidUTF8(string(raw), "\uFFFD")
	if len(s) > maxRawLen {
		cut := maxRawLen
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}
