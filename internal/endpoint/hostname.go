package endpoint

import "strings"

// ValidDNSName reports whether s is a DNS host name as an endpoint or route
// may carry: dot-separated labels of 1 to 63 ASCII letters, digits and
// hyphens, not starting or ending with a hyphen, at most 253 bytes, and a
// last label that is not all digits (so a mistyped IPv4 address such as
// "10.0.0.256" is not taken for a name). No trailing dot: callers that
// accept a fully qualified name trim one first. Work is one pass over s.
func ValidDNSName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	allDigits := false
	for label := range strings.SplitSeq(s, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		allDigits = true
		for i := 0; i < len(label); i++ {
			switch c := label[i]; {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				allDigits = false
			default:
				return false
			}
		}
	}
	return !allDigits
}
