package gateway

import (
	"testing"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/proxy"
)

// TestEveryAuthModeMaps: every routes[].auth value config accepts has a
// request-path mode, and only "none" maps to AuthNone. A scheme added to
// config alone must fail here (and the build, see authMode), never admit
// anyone.
func TestEveryAuthModeMaps(t *testing.T) {
	for _, a := range config.AuthModes() {
		m, err := authMode(a)
		if err != nil {
			t.Errorf("auth %q: %v", a, err)
			continue
		}
		if (m == proxy.AuthNone) != (a == config.AuthNone) {
			t.Errorf("auth %q maps to proxy mode %v", a, m)
		}
	}
	if _, err := authMode("kerberos"); err == nil {
		t.Error("an unknown auth mode maps without error; it must fail closed")
	}
}
