//go:build unix

package config

import (
	"path/filepath"
	"syscall"
	"testing"
)

// TestAccessLogOutputNotRegular: a FIFO (which opening for writing could
// block on) is refused as an output.
func TestAccessLogOutputNotRegular(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Parse([]byte(head + "log:\n  access: {output: " + fifo + "}\n" + upstreams + routes))
	if want := `log.access.output: must be "stdout", "stderr" or a regular file, got "` + fifo + `"`; err == nil || err.Error() != want {
		t.Errorf("got %v, want %s", err, want)
	}
}
