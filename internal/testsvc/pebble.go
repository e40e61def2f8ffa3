package testsvc

import (
	"os"
	"path/filepath"
	"testing"
)

// PebbleVersion is the Pebble (Let's Encrypt's test ACME server) that
// scripts/install-services.sh builds from tools/pebble.
const PebbleVersion = "v2.10.3"

// PebblePath returns the path of the Pebble binary scripts/install-services.sh
// built into $LEVEE_TOOLS_CACHE (default ~/.cache/levee-tools); like the
// other services, a skip without it, a failure under
// LEVEE_REQUIRE_SERVICES=1.
func PebblePath(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("LEVEE_TOOLS_CACHE")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("pebble: no home directory: %v", err)
		}
		dir = filepath.Join(home, ".cache", "levee-tools")
	}
	path := filepath.Join(dir, "pebble-"+PebbleVersion, "pebble")
	if fi, err := os.Stat(path); err != nil || fi.Mode()&0o111 == 0 {
		if requireServices() {
			t.Fatalf("pebble is not built at %s: run scripts/install-services.sh", path)
		}
		t.Skipf("pebble is not built at %s (scripts/install-services.sh builds it)", path)
	}
	return path
}
