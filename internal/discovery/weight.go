package discovery

import (
	"bytes"
	"math"
	"strconv"
	"strings"
)

// Weight normalisation: the heart of the firewall.
//
// A weight is a JSON number or a JSON string holding a plain decimal number;
// missing or null means 1. The result is an integer number of hundredths,
// 0..MaxWeight×100, computed exactly in decimal (no float64 anywhere on the
// accepted path, so "0.1" + "0.2" style surprises cannot happen):
//
//   - plain decimal (strings): an optional "-", one or more ASCII digits,
//     optionally "." and one or more ASCII digits. Leading zeros are fine
//     ("00012" is 12). No exponent, "+", hex, spaces, other scripts' digits,
//     "1." or ".5"; such strings, and strings longer than 64 bytes, are
//     not_a_number. "NaN", "Inf", "Infinity" (any case, optional sign) are
//     not_finite.
//   - JSON numbers follow JSON's grammar, exponents included (1e3 is 1000,
//     0.1e1 is 1). One whose magnitude overflows float64 (1e309) is
//     not_finite, as encoding/json would have turned it into ±Inf.
//   - Zero in any spelling ("0", "-0", 0.000, -0e7) is 0: drained.
//   - A value below zero is negative.
//   - Otherwise the value is rounded to hundredths, half away from zero at
//     the third decimal (0.125 → 0.13, 0.005 → 0.01, 9999.995 → 10000.00).
//     A result of 0.00 from a value above zero is too_small; a result above
//     MaxWeight×100 is too_large (10000.004 is 10000.00 and allowed,
//     10000.005 is too_large).
//
// Bound on work: one pass over the raw bytes plus a constant (at most 10
// digit steps and one strconv.ParseFloat over at most ~40 bytes, only for
// numbers within a factor of ten of float64's overflow). No loop runs a
// number of times that depends on the value.

// maxWeightString is the longest decimal string accepted, in bytes.
const maxWeightString = 64

// maxExp saturates exponents: far beyond any magnitude that matters, far
// below int64 overflow when token lengths (≤ 2^31) are added.
const maxExp = 1 << 40

var pow10 = [...]uint64{1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10}

// weightProblem is a rejected weight: the reason and a phrase that follows
// "weight ".
type weightProblem struct {
	reason Reason
	msg    string
}

// parseWeight normalises a weight's raw JSON (as found in the object: no
// surrounding whitespace is assumed but any is tolerated) into hundredths.
// maxHundredths is Limits.MaxWeight×100. An empty raw means the field is
// missing.
func parseWeight(raw []byte, maxHundredths uint64) (uint32, *weightProblem) {
	raw = trimJSONSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return 100, nil
	}
	switch c := raw[0]; {
	case c == '"':
		return parseWeightString(raw, maxHundredths)
	case c == '-' || c >= '0' && c <= '9':
		return parseWeightNumber(raw, maxHundredths)
	case c == 't' || c == 'f':
		return 0, &weightProblem{ReasonNotANumber, "is a boolean, not a number"}
	case c == '[':
		return 0, &weightProblem{ReasonNotANumber, "is an array, not a number"}
	case c == '{':
		return 0, &weightProblem{ReasonNotANumber, "is an object, not a number"}
	}
	return 0, &weightProblem{ReasonNotANumber, "is not a number"}
}

// parseWeightString handles a JSON string weight.
func parseWeightString(raw []byte, maxH uint64) (uint32, *weightProblem) {
	// Every byte of the decoded string costs at most 6 raw bytes (\uXXXX);
	// anything longer cannot decode to 64 bytes, so it is refused unread.
	if len(raw) > 2+6*maxWeightString {
		return 0, &weightProblem{ReasonNotANumber, "is a string longer than 64 bytes, not a number"}
	}
	var b []byte
	if len(raw) >= 2 && bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 {
		b = raw[1 : len(raw)-1] // no escapes: the bytes are the string (non-ASCII fails below)
	} else {
		s, ok := decodeString(raw)
		if !ok {
			return 0, &weightProblem{ReasonNotANumber, "is not a valid JSON string"}
		}
		b = []byte(s)
	}
	if len(b) > maxWeightString {
		return 0, &weightProblem{ReasonNotANumber, "is a string longer than 64 bytes, not a number"}
	}
	if nonFiniteName(b) {
		return 0, &weightProblem{ReasonNotFinite, "is not a finite number"}
	}
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg = true
		b = b[1:]
	}
	i := 0
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	intPart, frac := b[:i], []byte(nil)
	if i < len(b) && b[i] == '.' {
		j := i + 1
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		frac = b[i+1 : j]
		if len(frac) == 0 {
			return 0, &weightProblem{ReasonNotANumber, "is not a plain decimal number (digits must follow the point)"}
		}
		i = j
	}
	if len(intPart) == 0 {
		return 0, &weightProblem{ReasonNotANumber, "is not a plain decimal number (digits must precede the point)"}
	}
	if i != len(b) {
		return 0, &weightProblem{ReasonNotANumber, "is a string that is not a plain decimal number"}
	}
	return decimalToHundredths(neg, intPart, frac, 0, maxH)
}

// parseWeightNumber handles a JSON number token. raw is valid JSON (the
// decoder checked it), but the grammar is re-checked rather than trusted.
func parseWeightNumber(raw []byte, maxH uint64) (uint32, *weightProblem) {
	b := raw
	neg := false
	if b[0] == '-' {
		neg = true
		b = b[1:]
	}
	i := 0
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	intPart := b[:i]
	var frac []byte
	if i < len(b) && b[i] == '.' {
		j := i + 1
		for j < len(b) && isDigit(b[j]) {
			j++
		}
		frac = b[i+1 : j]
		i = j
	}
	var exp int64
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		expNeg := false
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			expNeg = b[i] == '-'
			i++
		}
		start := i
		for i < len(b) && isDigit(b[i]) {
			if exp < maxExp {
				exp = exp*10 + int64(b[i]-'0')
			}
			i++
		}
		if i == start {
			return 0, &weightProblem{ReasonNotANumber, "is not a valid JSON number"}
		}
		if expNeg {
			exp = -exp
		}
	}
	if len(intPart) == 0 || i != len(b) {
		return 0, &weightProblem{ReasonNotANumber, "is not a valid JSON number"}
	}
	return decimalToHundredths(neg, intPart, frac, exp, maxH)
}

// decimalToHundredths converts ±(intPart.frac)×10^exp, digits ASCII, into
// hundredths, rounding half away from zero.
func decimalToHundredths(neg bool, intPart, frac []byte, exp int64, maxH uint64) (uint32, *weightProblem) {
	total := len(intPart) + len(frac)
	digit := func(k int) byte {
		if k < len(intPart) {
			return intPart[k]
		}
		return frac[k-len(intPart)]
	}
	first, last := -1, -1
	for k := 0; k < total; k++ {
		if digit(k) != '0' {
			if first < 0 {
				first = k
			}
			last = k
		}
	}
	if first < 0 {
		return 0, nil // zero in any spelling, -0 included: drained
	}
	// value = sig × 10^e, sig = digits[first..last] (n digits, no leading
	// or trailing zeros); the value lies in [10^(mag-1), 10^mag).
	n := int64(last - first + 1)
	e := exp - int64(len(frac)) + int64(total-1-last)
	mag := n + e
	if mag > 309 || mag == 309 && overflowsFloat64(digit, first, last, mag) {
		return 0, &weightProblem{ReasonNotFinite, "is not a finite number"}
	}
	if neg {
		return 0, &weightProblem{ReasonNegative, "is negative"}
	}
	e2 := e + 2 // hundredths = sig × 10^e2
	if n+e2 > 10 {
		// At least 10^10 hundredths: beyond any MaxWeight (≤ MaxWeightLimit).
		return 0, &weightProblem{ReasonTooLarge, "is too large"}
	}
	var h uint64
	if e2 >= 0 {
		for k := first; k <= last; k++ { // n ≤ 10 steps
			h = h*10 + uint64(digit(k)-'0')
		}
		h *= pow10[e2]
	} else {
		keep := n + e2 // significant digits left of the rounding point
		switch {
		case keep < 0:
			h = 0 // below 0.1 hundredth: rounds to 0
		case keep == 0:
			if digit(first) >= '5' {
				h = 1
			}
		default:
			for k := first; k < first+int(keep); k++ { // keep ≤ 10 steps
				h = h*10 + uint64(digit(k)-'0')
			}
			if digit(first+int(keep)) >= '5' {
				h++
			}
		}
	}
	if h == 0 {
		return 0, &weightProblem{ReasonTooSmall, "is above zero but rounds to 0.00"}
	}
	if h > maxH {
		return 0, &weightProblem{ReasonTooLarge, "is too large"}
	}
	return uint32(h), nil
}

// overflowsFloat64 decides, for a value of magnitude 10^308..10^309, whether
// it rounds to ±Inf as a float64. It parses at most 32 significant digits:
// exact except for values that agree with float64's overflow threshold in
// their first 32 digits (then it may say finite; the weight is rejected as
// too_large instead, a rejection all the same).
func overflowsFloat64(digit func(int) byte, first, last int, mag int64) bool {
	var sb strings.Builder
	for k := first; k <= last && k < first+32; k++ {
		sb.WriteByte(digit(k))
		if k == first {
			sb.WriteByte('.')
		}
	}
	sb.WriteString("0e")
	sb.WriteString(strconv.FormatInt(mag-1, 10))
	f, err := strconv.ParseFloat(sb.String(), 64)
	return err != nil || math.IsInf(f, 0)
}

// nonFiniteName reports whether s names NaN or an infinity (any case,
// optional sign).
func nonFiniteName(s []byte) bool {
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	return bytes.EqualFold(s, []byte("nan")) || bytes.EqualFold(s, []byte("inf")) || bytes.EqualFold(s, []byte("infinity"))
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// trimJSONSpace removes JSON whitespace from both ends.
func trimJSONSpace(b []byte) []byte {
	for len(b) > 0 && isJSONSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isJSONSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// FormatWeight renders hundredths as the shortest decimal that parses back
// to the same value: 300 → "3", 250 → "2.5", 5 → "0.05".
func FormatWeight(h uint32) string {
	whole, frac := h/100, h%100
	switch {
	case frac == 0:
		return strconv.FormatUint(uint64(whole), 10)
	case frac%10 == 0:
		return strconv.FormatUint(uint64(whole), 10) + "." + strconv.FormatUint(uint64(frac/10), 10)
	}
	return strconv.FormatUint(uint64(whole), 10) + "." + string(rune('0'+frac/10)) + string(rune('0'+frac%10))
}
