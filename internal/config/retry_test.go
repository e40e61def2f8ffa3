package config

import (
	"reflect"
	"testing"
	"time"
)

// TestRetryDefaults pins the defaults of a retry block, from literals: an
// upstream's empty block gets them all, a route's override gets them too
// (not the upstream's values) with a zero Budget, and no block means no
// retries.
func TestRetryDefaults(t *testing.T) {
	cfg, err := Parse([]byte(head + upstreams + "    retry: {attempts: 7, per_try_timeout: 1s, budget: {ratio: 0.5}}\n" +
		"  audio:\n    endpoints: [{address: 10.0.0.1:80}]\n    retry: {}\n  plain:\n    endpoints: [{address: 10.0.0.1:80}]\n" +
		routes + "    retry: {on: [503]}\n" +
		"  - {name: b, match: {path_prefix: /b}, upstream: video}\n" +
		"  - {name: c, match: {path_prefix: /c}, upstream: plain, retry: {}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	defaults := func() *Retry {
		return &Retry{
			Attempts: 3,
			On: RetryOn{
				ConnectFailure: true, RefusedStream: true, ResetBeforeResponse: true,
				Statuses: []int{502, 503, 504},
			},
			Backoff:         Backoff{Base: 25 * time.Millisecond, Max: 250 * time.Millisecond},
			Budget:          RetryBudget{Ratio: 0.2, MinPerSecond: 5},
			ReplayBodyLimit: 65536,
		}
	}
	if got := cfg.Upstreams["audio"].Retry; !reflect.DeepEqual(got, defaults()) {
		t.Errorf("retry: {} = %+v, want %+v", got, defaults())
	}
	video := defaults()
	video.Attempts, video.PerTryTimeout, video.Budget.Ratio = 7, time.Second, 0.5
	if got := cfg.Upstreams["video"].Retry; !reflect.DeepEqual(got, video) {
		t.Errorf("video retry = %+v, want %+v", got, video)
	}
	if cfg.Upstreams["plain"].Retry != nil {
		t.Errorf("upstream without retry has %+v", cfg.Upstreams["plain"].Retry)
	}
	override := defaults()
	override.On = RetryOn{Statuses: []int{503}}
	override.Budget = RetryBudget{}
	if got := cfg.Routes[0].Retry; !reflect.DeepEqual(got, override) {
		t.Errorf("route override = %+v, want %+v (defaults, not the upstream's values)", got, override)
	}
	if cfg.Routes[1].Retry != nil || cfg.Routes[1].Timeout != 0 {
		t.Errorf("route without retry: Retry %+v, Timeout %v", cfg.Routes[1].Retry, cfg.Routes[1].Timeout)
	}
	if got, want := cfg.Upstreams["video"].RetryBudget(), (RetryBudget{Ratio: 0.5, MinPerSecond: 5}); got != want {
		t.Errorf("video RetryBudget() = %+v, want %+v", got, want)
	}
	if got, want := cfg.Upstreams["plain"].RetryBudget(), (RetryBudget{Ratio: 0.2, MinPerSecond: 5}); got != want {
		t.Errorf("plain RetryBudget() = %+v, want %+v", got, want)
	}
	// Each Retry owns its Statuses: changing one must not change another.
	cfg.Upstreams["audio"].Retry.On.Statuses[0] = 418
	if DefaultRetryOn().Statuses[0] != 502 || cfg.Routes[2].Retry.On.Statuses[0] != 502 {
		t.Error("default Statuses slice is shared")
	}
}
