// Package clock gives time to the code that must be tested at explicit
// instants. Decision logic takes a Clock (or a time.Time parameter); only the
// edges of the program use Real. It is a leaf: it imports nothing internal.
package clock

import "time"

// Clock tells the current time. Implementations are safe for concurrent use.
type Clock interface {
	Now() time.Time
}

// Real is the wall clock (with Go's monotonic reading).
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }
