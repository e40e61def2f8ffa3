package config

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/config/engine"
)

func TestParseLimits(t *testing.T) {
	t.Run("file over 4MiB", func(t *testing.T) {
		data := []byte(head + upstreams + routes + "# " + strings.Repeat("x", 4<<20) + "\n")
		_, err := Parse(data)
		want := []string{"(file): file is larger than the 4MiB limit"}
		if got := errorLines(t, err); !reflect.DeepEqual(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("nesting at the limit is walked", func(t *testing.T) {
		// Root mapping (1) + state_dir value nested 63 deep = 64 levels.
		data := head + "state_dir: " + strings.Repeat("[", 63) + strings.Repeat("]", 63) + "\n" + upstreams + routes
		_, err := Parse([]byte(data))
		want := []string{"state_dir: must be a string, got a sequence"}
		if got := errorLines(t, err); !reflect.DeepEqual(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("nesting over 64 levels", func(t *testing.T) {
		data := head + "state_dir: " + strings.Repeat("[", 64) + strings.Repeat("]", 64) + "\n" + upstreams + routes
		_, err := Parse([]byte(data))
		want := []string{"state_dir" + strings.Repeat("[0]", 63) + ": nesting deeper than 64 levels is not allowed"}
		if got := errorLines(t, err); !reflect.DeepEqual(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
	t.Run("billion laughs", func(t *testing.T) {
		data := head + upstreams + routes + `x: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
y: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
z: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
w: [*c,*c,*c,*c,*c,*c,*c,*c,*c]
`
		_, err := Parse([]byte(data))
		got := errorLines(t, err)
		// 4 unknown fields plus 27 aliases, and nothing expanded.
		if len(got) != 31 || got[0] != "x: unknown field" || got[2] != "y[0]: aliases are not allowed (*a)" {
			t.Errorf("got %d errors:\n%s", len(got), strings.Join(got, "\n"))
		}
	})
	t.Run("error count is capped", func(t *testing.T) {
		var b strings.Builder
		b.WriteString(head + upstreams + routes)
		for i := range engine.MaxErrors + 5 {
			b.WriteString("unknown" + strconv.Itoa(i) + ": 1\n")
		}
		_, err := Parse([]byte(b.String()))
		got := errorLines(t, err)
		if len(got) != engine.MaxErrors+1 || got[engine.MaxErrors] != "(file): too many errors: 5 more not shown" {
			t.Errorf("got %d errors, last %q", len(got), got[len(got)-1])
		}
	})
}

func TestAdmissionDefaults(t *testing.T) {
	cfg, err := Parse([]byte(head + "memory: {limit: 64MiB}\n" + upstreams + "    limits: {max_concurrency: 64}\n" +
		"  audio:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_concurrency: adaptive}\n" +
		"  plain:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: ~\n" +
		"  zero:\n    endpoints: [{address: 10.0.0.1:80}]\n    limits: {max_concurrency: 1, max_queue: 0, min: ~, max: ~}\n" +
		routes + "  - {name: b, match: {path_prefix: /b}, upstream: video, priority: sheddable}\n  - {name: c, match: {path_prefix: /c}, upstream: video, priority: ~}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := (&Memory{Limit: 64 << 20, SoftWatermark: 0.8, HardWatermark: 0.9}); !reflect.DeepEqual(cfg.Memory, want) {
		t.Errorf("memory = %+v, want %+v", cfg.Memory, want)
	}
	for name, want := range map[string]*Limits{
		"video": {MaxConcurrency: 64, MaxQueue: 128, QueueTimeout: 50 * time.Millisecond},
		"audio": {Adaptive: true, Min: 4, Max: 1000, MaxQueue: 256, QueueTimeout: 50 * time.Millisecond},
		"plain": nil,
		"zero":  {MaxConcurrency: 1, MaxQueue: 0, QueueTimeout: 50 * time.Millisecond},
	} {
		if got := cfg.Upstreams[name].Limits; !reflect.DeepEqual(got, want) {
			t.Errorf("%s limits = %+v, want %+v", name, got, want)
		}
	}
	for i, want := range []string{"normal", "sheddable", "normal"} {
		if got := cfg.Routes[i].Priority; got != want {
			t.Errorf("routes[%d].Priority = %q, want %q", i, got, want)
		}
	}
	cfg, err = Parse([]byte(head + "memory: ~\n" + upstreams + routes))
	if err != nil || cfg.Memory != nil {
		t.Errorf("memory: ~ gave %+v, %v; want nil, nil", cfg.Memory, err)
	}
}
