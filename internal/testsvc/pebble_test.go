package testsvc

import "testing"

// TestPebbleStarts: the directory answers over TLS to the helper's CA and
// the management interface gives the issuing root.
func TestPebbleStarts(t *testing.T) {
	p := StartPebble(t, PebbleOptions{})
	if !p.ok(p.Directory) {
		t.Fatalf("directory %s does not answer", p.Directory)
	}
	p.Roots(t)
	p.Stop()
	if p.ok(p.Directory) {
		t.Fatal("directory answers after Stop")
	}
}
