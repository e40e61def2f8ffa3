package config

import (
	"strings"
	"testing"
	"time"
)

// TestProfilesBlock: the profiles block's values are read, and each bound
// is refused with the field named.
func TestProfilesBlock(t *testing.T) {
	c, err := Parse([]byte(head + upstreams + routes + "profiles: {enabled: true, cpu_threshold: 0.5, sustain: 2s, on_shedding: false, interval: 1m, duration: 200ms, keep: 3, max_bytes: 2MiB}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Profiles{Enabled: true, CPUThreshold: 0.5, Sustain: 2 * time.Second, Interval: time.Minute, Duration: 200 * time.Millisecond, Keep: 3, MaxBytes: 2 << 20}
	if c.Profiles != want {
		t.Errorf("profiles = %+v, want %+v", c.Profiles, want)
	}
	for _, tc := range []struct{ block, want string }{
		{"{sustain: 500ms}", "profiles.sustain: must be from 1s to 1h0m0s, got \"500ms\""},
		{"{interval: 48h}", "profiles.interval: must be from 1s to 24h0m0s, got \"48h\""},
		{"{duration: 10m}", "profiles.duration: must be from 100ms to 5m0s, got \"10m\""},
		{"{cpu_threshold: 1.5}", "profiles.cpu_threshold: "},
		{"{keep: 0}", "profiles.keep: "},
		{"{max_bytes: 1KiB}", "profiles.max_bytes: "},
		{"{enable: false}", `profiles.enable: unknown field (did you mean "enabled"?)`},
	} {
		_, err := Parse([]byte(head + upstreams + routes + "profiles: " + tc.block + "\n"))
		if err == nil {
			t.Errorf("profiles: %s accepted", tc.block)
			continue
		}
		if lines := errorLines(t, err); len(lines) != 1 || !strings.HasPrefix(lines[0], tc.want) {
			t.Errorf("profiles: %s: errors %q, want one starting %q", tc.block, lines, tc.want)
		}
	}
}
