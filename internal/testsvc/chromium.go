package testsvc

import "testing"

// ChromiumPath returns the path of Debian's chromium, which the admin web
// UI's browser test drives headless through chromedp (the test starts and
// stops its own browser). Like the other services: a skip without it, a
// failure under LEVEE_REQUIRE_SERVICES=1.
func ChromiumPath(t testing.TB) string {
	t.Helper()
	return lookService(t, "chromium", "chromium")
}
