package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/drill"
)

const drillUsage = `Usage: levee drill list
       levee drill run NAME... [-admin URL] [-token-file F] [-config F]
                       [-data URL] [-upstream N] [-route N] [-prefix P]
                       [-registry-upstream N] [-registry-route N]
                       [-registry-prefix P] [-rate R] [-duration D] [--json]

Replays the seed outages against a running levee through its admin API and
its data listener, with synthetic backends on loopback and throwaway apps,
all removed afterwards (also on SIGINT, within 10s). The levee must declare
the drill upstreams and routes once (docs/drills.md):

  upstreams:
    levee-drill:
      discovery: {push: true}
      retry: {attempts: 3, on: [connect_failure, reset_before_response]}
      limits: {max_concurrency: 8}
    levee-drill-registry:            # registry-down: a file the drill writes
      discovery: {file: /var/lib/levee/drill-registry.json}
  routes:
    - {name: levee-drill, match: {path_prefix: /_levee_drill/}, upstream: levee-drill, auth: api_key}
    - {name: levee-drill-registry, match: {path_prefix: /_levee_drill_registry/}, upstream: levee-drill-registry, auth: api_key}

  -data URL      the data listener (default: the listen of -config's file,
                 else http://127.0.0.1:8080)
  -rate R        requests per second at most, all clients (default 200, 100 to 1000)
  -duration D    traffic per drill at most (default 10s, 2s to 60s)
  --json         print the results as JSON

-admin, -token-file and -config as for "levee apps". Exit 0 when every
defence held, 1 when one did not (each named) or a drill could not run, 2
on bad usage.
`

func cmdDrill(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, drillUsage)
		return 2
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, drillUsage)
		return 0
	case "list":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "levee drill list: no arguments\n")
			return 2
		}
		for _, d := range drill.List() {
			fmt.Fprintf(stdout, "%-15s %s\n", d[0], d[1])
		}
		return 0
	case "run":
	default:
		fmt.Fprintf(stderr, "levee drill: unknown command %q\n\n%s", args[0], drillUsage)
		return 2
	}
	fs, f := drillFlagSet("run")
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, drillUsage) }
	o, adminURL, tokenFile, configPath, asJSON := f.o, f.adminURL, f.tokenFile, f.configPath, f.asJSON
	names, ok := parseInterleaved(fs, args[1:])
	if !ok {
		return 2
	}
	if len(names) == 0 {
		fmt.Fprintf(stderr, "levee drill run: name at least one drill (levee drill list)\n")
		return 2
	}
	for _, n := range names {
		if !drill.Known(n) {
			fmt.Fprintf(stderr, "levee drill run: unknown drill %q (levee drill list)\n", n)
			return 2
		}
	}
	c, _, err := newAdminClient(*adminURL, flagSet(fs, "admin"), *tokenFile, *configPath)
	if err != nil {
		fmt.Fprintln(stderr, "levee drill:", err)
		return 1
	}
	o.Admin = c
	if !flagSet(fs, "data") && *configPath != "" {
		// The levee's own listen address (resolveAdmin loaded the file
		// already, so it is valid).
		if cfg, err := config.Load(*configPath); err == nil {
			if u, ok := adminURLOf(cfg.PrimaryListener().Listen); ok {
				if cfg.PrimaryListener().TLS != nil {
					u = "https" + strings.TrimPrefix(u, "http")
				}
				o.Data = u
			}
		}
	}
	o.Log = func(format string, a ...any) { fmt.Fprintf(stderr, format+"\n", a...) }
	if err := o.Check(); err != nil {
		fmt.Fprintln(stderr, "levee drill run:", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	results, err := drill.Run(ctx, *o, names)
	if err != nil {
		fmt.Fprintln(stderr, "levee drill:", err)
		return 1
	}
	held := true
	for _, r := range results {
		held = held && r.Held
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			Held    bool           `json:"held"`
			Rate    int            `json:"rate"`
			Seconds float64        `json:"duration_seconds"`
			Drills  []drill.Result `json:"drills"`
		}{held, o.Rate, o.Duration.Seconds(), results})
	} else {
		printDrill(stdout, results)
	}
	if !held {
		return 1
	}
	return 0
}

// drillCommands are "levee drill"'s commands, for the completions.
var drillCommands = []string{"list", "run"}

type drillFlags struct {
	o                               *drill.Options
	adminURL, tokenFile, configPath *string
	asJSON                          *bool
}

// drillFlagSet is the flag set of "levee drill SUB" ("list" has none).
func drillFlagSet(sub string) (*flag.FlagSet, *drillFlags) {
	fs := flag.NewFlagSet("levee drill "+sub, flag.ContinueOnError)
	f := &drillFlags{o: &drill.Options{}}
	if sub != "run" {
		return fs, f
	}
	f.adminURL = fs.String("admin", "http://"+defaultAdminAddr, "admin API address")
	f.tokenFile = fs.String("token-file", "", "file holding the admin API token")
	f.configPath = fs.String("config", "", "the configuration of the levee to drill: its admin address and token")
	fs.StringVar(&f.o.Data, "data", "http://127.0.0.1:8080", "the data listener")
	fs.StringVar(&f.o.Upstream, "upstream", "levee-drill", "the drill upstream (discovery: {push: true})")
	fs.StringVar(&f.o.Route, "route", "levee-drill", "the drill route's name")
	fs.StringVar(&f.o.Prefix, "prefix", "/_levee_drill/", "the drill route's path prefix")
	fs.StringVar(&f.o.RegistryUpstream, "registry-upstream", "levee-drill-registry", "the registry drill's upstream (discovery: {file: PATH})")
	fs.StringVar(&f.o.RegistryRoute, "registry-route", "levee-drill-registry", "the registry drill route's name")
	fs.StringVar(&f.o.RegistryPrefix, "registry-prefix", "/_levee_drill_registry/", "the registry drill route's path prefix")
	fs.IntVar(&f.o.Rate, "rate", drill.DefaultRate, "requests per second at most")
	fs.DurationVar(&f.o.Duration, "duration", drill.DefaultDuration, "traffic per drill at most")
	f.asJSON = fs.Bool("json", false, "print JSON")
	return fs, f
}

func printDrill(w io.Writer, results []drill.Result) {
	for _, r := range results {
		verdict := "HELD"
		if !r.Held {
			verdict = "FAILED"
		}
		fmt.Fprintf(w, "%s: %s\n", r.Name, verdict)
		for _, f := range r.Figures {
			fmt.Fprintf(w, "  %-40s %g %s\n", f.Name, round3(f.Value), f.Unit)
		}
		for _, f := range r.Failed {
			fmt.Fprintf(w, "  FAILED: %s\n", f)
		}
		if r.Error != "" {
			fmt.Fprintf(w, "  ERROR: %s\n", r.Error)
		}
		for _, c := range r.Cleanup {
			fmt.Fprintf(w, "  CLEANUP FAILED: %s\n", c)
		}
	}
}

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }
