package demo

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

// TestDemoKeyHash: the demo configuration holds the hash of the key the
// demo prints.
func TestDemoKeyHash(t *testing.T) {
	sum := sha256.Sum256([]byte(DemoKey))
	if got := hex.EncodeToString(sum[:]); got != DemoKeySHA256 {
		t.Fatalf("DemoKeySHA256 = %s, want %s", DemoKeySHA256, got)
	}
}
