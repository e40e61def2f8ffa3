// Priority classes: a request's importance and the queue class it waits in.

package admission

import (
	"fmt"
)

// Priority is a request's importance. The zero value is Normal, the route
// default. Under pressure Sheddable is refused first and Critical last.
type Priority uint8

const (
	Normal    Priority = iota // the default
	Critical                  // served first, may evict lower priorities
	Sheddable                 // refused first; retries count as this
)

// class orders priorities for service: 0 is served first.
func (p Priority) class() int {
	switch p {
	case Critical:
		return 0
	case Normal:
		return 1
	default: // Sheddable and unknown values
		return 2
	}
}

func (p Priority) String() string {
	switch p {
	case Critical:
		return "critical"
	case Normal:
		return "normal"
	case Sheddable:
		return "sheddable"
	}
	return fmt.Sprintf("Priority(%d)", uint8(p))
}

const numClasses = 3
