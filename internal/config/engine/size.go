package engine

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Sizes ("64KiB", "10 MB") and durations as the file writes them: the
// parser reads them, errors and docs print them, and the JSON Schema
// matches them by pattern.

// DurationPattern matches what time.ParseDuration accepts without a minus
// sign (a duration must be greater than 0, which a pattern cannot say in
// full).
const DurationPattern = `^[+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`

// SizePattern matches what ParseSize accepts as a string.
var SizePattern = func() string {
	names := make([]string, len(sizeUnits))
	for i, u := range sizeUnits {
		names[i] = regexp.QuoteMeta(u.name)
	}
	return `^[0-9]+ *(` + strings.Join(names, "|") + `)$`
}()

// MaxSize is the upper bound of a size with no other limit.
const MaxSize = math.MaxInt64

// sizeUnits are the units a size string may end with. Decimal units are
// powers of 1000, binary ones powers of 1024; names are case-sensitive.
var sizeUnits = []struct {
	name string
	mult int64
}{
	{"B", 1},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
}

// SizeUnitList names sizeUnits for error messages.
const SizeUnitList = "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB"

// ParseSize parses a size string: decimal digits, optional spaces, and one
// of sizeUnits ("64KiB", "10 MB", "512B"). Fractions, signs, a missing
// unit and results above math.MaxInt64 are refused.
func ParseSize(s string) (int64, bool) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(s[:i], 10, 64)
	if err != nil {
		return 0, false
	}
	unit := strings.TrimLeft(s[i:], " ")
	for _, u := range sizeUnits {
		if u.name == unit {
			if n > math.MaxInt64/u.mult {
				return 0, false
			}
			return n * u.mult, true
		}
	}
	return 0, false
}

// FormatSize writes n bytes in the largest binary unit that divides it
// exactly: 1024 is "1KiB", 1000 is "1000B".
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		mult int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}
