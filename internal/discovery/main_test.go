package discovery

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// sources' goroutines must all end when Run returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
