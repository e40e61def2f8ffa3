package main

import (
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/loadgen"
)

func TestSummaryCountsAndPercentiles(t *testing.T) {
	ms := time.Millisecond
	shots := []loadgen.Shot{
		{Latency: 20 * ms, Status: 200}, {Latency: 22 * ms, Status: 200}, {Latency: 40 * ms, Status: 200},
		{Latency: ms, Status: 503, Reason: "queue_full"}, {Latency: 2 * ms, Status: 503, Reason: "queue_full"},
		{Latency: 3 * ms, Status: 503}, // a refusal without a JSON reason
		{Latency: 2 * time.Second, TimedOut: true},
		{Latency: ms, Err: "connection reset"},
	}
	got := summary(shots, 2*time.Second, 4, 512, "x/10x")
	for _, want := range []string{
		"RESULT label=x/10x rate=4 c=512 sent=8 goodput=2 ",
		" codes=200:3,503:3 ", " reasons=none:1,queue_full:2 ",
		" ok_p50_ms=22.000 ok_p99_ms=40.000 nok_p50_ms=2.000 ",
		" err_timeout=1 err_other=1 ", `first_err="connection reset"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}
