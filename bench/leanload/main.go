// Command leanload is the lean load generator of bench/overload-lean.sh:
// internal/loadgen's open or closed loop against one URL, summarised in one
// "RESULT k=v ..." line as ../shared/bench's loadgen prints it, so the two
// can be read side by side.
//
//	leanload -addr 127.0.0.1:18189 -rate 10000 -d 10s      # open loop
//	leanload -addr 127.0.0.1:18189 -c 200 -d 10s           # closed loop
//
// Unlike the shared loadgen, an open-loop arrival that finds all -c
// connections busy waits for one (its wait counts in its latency) instead
// of being dropped.
package main

import (
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/loadgen"
)

func main() {
	addr := flag.String("addr", "", "host:port to load (required)")
	path := flag.String("path", "/", "request path")
	rate := flag.Int("rate", 0, "open loop: requests per second (0: closed loop)")
	conc := flag.Int("c", 512, "open loop: connections (most requests in flight); closed loop: clients")
	dur := flag.Duration("d", 10*time.Second, "how long load is offered")
	timeout := flag.Duration("timeout", 2*time.Second, "per request (counted as err_timeout)")
	label := flag.String("label", "", "echoed in the RESULT line")
	flag.Parse()
	if *addr == "" || *conc < 1 || *dur <= 0 || *rate < 0 || *timeout <= 0 {
		fmt.Fprintln(os.Stderr, "usage: leanload -addr HOST:PORT [-rate R | -c N] [-d 10s] [-timeout 2s]")
		os.Exit(2)
	}
	var shots []loadgen.Shot
	if *rate > 0 {
		shots = loadgen.Open{Addr: *addr, Path: *path, Rate: *rate, Total: int(float64(*rate) * dur.Seconds()),
			Timeout: *timeout, Workers: *conc}.Run()
	} else {
		shots = loadgen.Closed{Addr: *addr, Path: *path, Clients: *conc, Duration: *dur, Timeout: *timeout}.Run()
	}
	fmt.Println(summary(shots, *dur, *rate, *conc, *label))
}

// summary is the RESULT line: goodput (2xx per second of the run), counts
// by status and by refusal reason, and latency percentiles of the 2xx and
// of the other answers.
func summary(shots []loadgen.Shot, dur time.Duration, rate, conc int, label string) string {
	var ok, nok []time.Duration
	var timeouts, errs int
	codes, reasons := map[int]int{}, map[string]int{}
	firstErr := ""
	for _, s := range shots {
		switch {
		case s.TimedOut:
			timeouts++
		case s.Err != "":
			errs++
			if firstErr == "" {
				firstErr = s.Err
			}
		default:
			codes[s.Status]++
			if s.Status/100 == 2 {
				ok = append(ok, s.Latency)
			} else {
				nok = append(nok, s.Latency)
				reasons[s.Reason]++
			}
		}
	}
	ms := func(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/float64(time.Millisecond)) }
	var b strings.Builder
	fmt.Fprintf(&b, "RESULT label=%s rate=%d c=%d sent=%d goodput=%.0f", label, rate, conc, len(shots), float64(len(ok))/dur.Seconds())
	b.WriteString(" codes=")
	for i, c := range slices.Sorted(maps.Keys(codes)) {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d:%d", c, codes[c])
	}
	b.WriteString(" reasons=")
	for i, r := range slices.Sorted(maps.Keys(reasons)) {
		if i > 0 {
			b.WriteByte(',')
		}
		name := r
		if name == "" {
			name = "none"
		}
		fmt.Fprintf(&b, "%s:%d", name, reasons[r])
	}
	fmt.Fprintf(&b, " ok_p50_ms=%s ok_p99_ms=%s nok_p50_ms=%s err_timeout=%d err_other=%d",
		ms(loadgen.Percentile(ok, 50)), ms(loadgen.Percentile(ok, 99)), ms(loadgen.Percentile(nok, 50)), timeouts, errs)
	if firstErr != "" {
		fmt.Fprintf(&b, " first_err=%q", firstErr)
	}
	return b.String()
}
