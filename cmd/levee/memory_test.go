package main

import (
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// TestMemoryGuardByDefault: levee run with no memory block, under
// GOMEMLIMIT=300MiB, has the memory guard on with that limit (the startup
// log says so and where it came from; levee_memory_limit_bytes shows it,
// and the pressure level is reported); with `memory: off` the guard is
// off, logged, and its metrics absent; with a memory block, the block's
// limit wins over GOMEMLIMIT.
func TestMemoryGuardByDefault(t *testing.T) {
	const base = `
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token: none}
upstreams:
  u: {endpoints: [{address: 127.0.0.1:1}]}
routes:
  - {name: r, match: {path_prefix: /}, upstream: u}
`
	for _, c := range []struct {
		name, memory, wantLog string
		wantLimit             float64 // 0: no guard
	}{
		{"no memory block", "", `"msg":"memory guard","on":true,"limit":"314572800 bytes from GOMEMLIMIT"`, 300 << 20},
		{"memory: off", "memory: off\n", `"msg":"memory guard","on":false,"limit":"off (memory: off)"`, 0},
		{"a memory block", "memory: {limit: 256MiB}\n", `"msg":"memory guard","on":true,"limit":"268435456 bytes from the memory block"`, 256 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", "300MiB")
			p := startProcess(t, "run", "-config", writeFile(t, base+c.memory))
			testkit.Until(t, 10*time.Second, "the memory guard's log line", func() bool { return strings.Contains(p.log(), `"msg":"memory guard"`) })
			if !strings.Contains(p.log(), c.wantLog) {
				t.Errorf("startup log lacks %s:\n%s", c.wantLog, p.log())
			}
			m := testkit.Scrape(t, "http://"+p.admin+"/metrics")
			if c.wantLimit == 0 {
				m.Absent(t, "levee_memory_limit_bytes")
				m.Absent(t, "levee_memory_pressure_level")
				return
			}
			if got := m.Value(t, "levee_memory_limit_bytes"); got != c.wantLimit {
				t.Errorf("levee_memory_limit_bytes = %v, want %v", got, c.wantLimit)
			}
			if got := m.Value(t, "levee_memory_pressure_level"); got != 0 {
				t.Errorf("levee_memory_pressure_level = %v at rest, want 0", got)
			}
			t.Logf("%s: %s; levee_memory_limit_bytes %v", c.name, c.wantLog, c.wantLimit)
		})
	}
}
