package proxy

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: the
// request path must leave no connection reader, timer or hook behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
