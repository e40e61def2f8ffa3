// Command levee is the levee API gateway. It only parses the command line,
// wires signals and maps results to exit codes; everything else lives in
// internal/gateway.
//
//	levee run -config FILE       serve with FILE; SIGHUP reloads, SIGUSR1 reopens the access log file, SIGTERM drains
//	levee validate -config FILE  print every problem as file:line:col: path: message; exit 1 if any
//	levee demo                   serve a built-in demo with its own upstreams
//	levee apps COMMAND ...       manage consumer apps through the admin API
//	levee completion SHELL       print a bash, zsh or fish completion script
//	levee data-apis COMMAND ...  manage data APIs' lifecycle through the admin API
//	levee version                print the version
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/demo"
	"github.com/levee-gw/levee/internal/gateway"
)

// defaultAdminAddr is the admin address the demo listens on and `levee
// apps` calls by default; the example configuration (config.ExampleYAML)
// uses the same, so the CLI reaches a levee started from it
// (TestExampleAdminIsTheCLIDefault).
const defaultAdminAddr = "127.0.0.1:9901"

// version, commit and date are set at build time by the Makefile's BUILD
// (-ldflags "-X main.version=v0.1.0 -X main.commit=... -X main.date=...");
// a plain `go build` leaves them as below.
var (
	version = "dev"
	commit  = "unknown"
	date    = "unknown"
)

// versionLine is what `levee version` prints: "levee vX.Y.Z (commit,
// date, go)", the date being the commit's (UTC), the Go version the one
// levee was built with.
func versionLine() string {
	return fmt.Sprintf("levee %s (%s, %s, %s)", version, commit, date, runtime.Version())
}

const usage = `levee: an API gateway and layer-7 load balancer that stays up.

Usage:
  levee run -config FILE       serve; SIGHUP reloads the file, SIGUSR1 reopens the access log file,
                               SIGTERM drains and stops
  levee validate -config FILE  check FILE (- reads standard input); print every problem as
                               FILE:line:col: path: message
  levee demo [-listen ADDR] [-admin ADDR] [-access-log]
                               serve a built-in demo with its own upstreams; SIGUSR2 prints its intro again
  levee apps COMMAND ...       manage consumer apps and keys through the admin API
                               ("levee apps help" lists the commands)
  levee drill list | run NAME...
                               replay the seed outages against a running levee
  levee completion bash|zsh|fish
                               print a shell completion script
  levee data-apis COMMAND ...  create, update, publish, roll back, take offline and delete
                               data APIs through the admin API ("levee data-apis help")
  levee version                print the version: vX.Y.Z (commit, date, go)
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes one command and returns the process exit code: 0 success,
// 1 invalid configuration or runtime failure, 2 bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stderr)
	case "validate":
		return cmdValidate(args[1:], stdout, stderr)
	case "demo":
		return cmdDemo(args[1:], stdout, stderr)
	case "apps":
		return cmdApps(args[1:], stdout, stderr)
	case "completion":
		return cmdCompletion(args[1:], stdout, stderr)
	case "data-apis":
		return cmdDataAPIs(args[1:], os.Stdin, stdout, stderr)
	case "drill":
		return cmdDrill(args[1:], stdout, stderr)
	case "version", "-version", "--version":
		fmt.Fprintln(stdout, versionLine())
		return 0
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "levee: unknown command %q\n\n%s", args[0], usage)
	return 2
}

// configFlagSet is the flag set of run and validate.
func configFlagSet(name string) (*flag.FlagSet, *string) {
	fs := flag.NewFlagSet("levee "+name, flag.ContinueOnError)
	return fs, fs.String("config", "", "configuration file (YAML); for validate, - reads standard input")
}

func configFlag(name string, args []string, stderr io.Writer) (string, int) {
	fs, path := configFlagSet(name)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return "", 2
	}
	if *path == "" || fs.NArg() > 0 {
		fmt.Fprintf(stderr, "levee %s: -config FILE is required\n", name)
		return "", 2
	}
	return *path, 0
}

// stdin is what `levee validate -config -` reads.
var stdin io.Reader = os.Stdin

func cmdValidate(args []string, stdout, stderr io.Writer) int {
	path, code := configFlag("validate", args, stderr)
	if code != 0 {
		return code
	}
	load, name := func() (*config.Config, error) { return config.Load(path) }, path
	if path == "-" {
		load, name = func() (*config.Config, error) { return config.Read(stdin) }, "standard input"
	}
	if _, err := load(); err != nil {
		printConfigError(stderr, name, err)
		return 1
	}
	fmt.Fprintf(stdout, "%s: valid\n", name)
	return 0
}

// printConfigError prints one line per problem, each placed in the file
// (named file) as a compiler does: "file:line:col: path: message".
func printConfigError(w io.Writer, file string, err error) {
	var errs *config.Errors
	if errors.As(err, &errs) {
		for _, fe := range *errs {
			fmt.Fprintln(w, fe.Located(file))
		}
		return
	}
	fmt.Fprintln(w, err)
}

func cmdRun(args []string, stderr io.Writer) int {
	path, code := configFlag("run", args, stderr)
	if code != 0 {
		return code
	}
	if path == "-" {
		// A reload re-reads the file; standard input cannot be read twice.
		fmt.Fprintln(stderr, "levee run: -config - (standard input) is for validate only; run re-reads its file on SIGHUP")
		return 2
	}
	g, err := gateway.New(gateway.Options{Load: func() (*config.Config, error) { return config.Load(path) }, Version: version, LockStateDir: true})
	if err != nil {
		printConfigError(stderr, path, err)
		return 1
	}
	return serve(g, stderr, func() {}, nil)
}

// serve starts g, calls started, and serves until SIGTERM or SIGINT,
// reloading on SIGHUP; then it drains. With usr2 (the demo), SIGUSR2
// calls it (without, SIGUSR2 keeps its default action).
func serve(g *gateway.Gateway, stderr io.Writer, started, usr2 func()) int {
	// Signals are caught before the listeners open: a SIGHUP or SIGTERM
	// sent as soon as levee says it is listening must not find the default
	// action (which ends the process) still in place.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	again := make(chan os.Signal, 1)
	if usr2 != nil {
		signal.Notify(again, syscall.SIGUSR2)
		defer signal.Stop(again)
	}
	if err := g.Start(); err != nil {
		fmt.Fprintln(stderr, "levee:", err)
		return 1
	}
	started()
	go func() {
		for {
			select {
			case <-hup:
				_ = g.Reload() // logged and counted by the gateway
			case <-usr1:
				g.ReopenAccessLog() // logrotate's move-then-signal
			case <-again:
				usr2()
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := g.Wait(ctx); err != nil {
		fmt.Fprintln(stderr, "levee:", err)
		return 1
	}
	return 0
}

// demoFlagSet is the flag set of demo.
func demoFlagSet() (fs *flag.FlagSet, listen, adminListen *string, accessLog *bool) {
	fs = flag.NewFlagSet("levee demo", flag.ContinueOnError)
	return fs, fs.String("listen", "127.0.0.1:8080", "gateway address"), fs.String("admin", defaultAdminAddr, "admin API address"),
		fs.Bool("access-log", false, "log every request (off in the demo: its lines would scroll the intro away)")
}

// cmdDemo serves the demo. Its state (the SQLite database, the generated
// admin token, the app store) lives in a new directory under the temp
// directory (levee-demo-*), removed when the demo stops; the intro is
// printed once the listeners are up, last, and again on SIGUSR2.
func cmdDemo(args []string, stdout, stderr io.Writer) int {
	fs, listen, adminListen, accessLog := demoFlagSet()
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	backends, err := demo.StartBackends()
	if err != nil {
		fmt.Fprintln(stderr, "levee demo:", err)
		return 1
	}
	defer backends.Close()
	stateDir, err := os.MkdirTemp("", demoStatePattern)
	if err != nil {
		fmt.Fprintln(stderr, "levee demo:", err)
		return 1
	}
	defer os.RemoveAll(stateDir) // after the gateway stopped (serve returns then)
	dbPath, err := demo.CreateDatabase(stateDir)
	if err != nil {
		fmt.Fprintln(stderr, "levee demo:", err)
		return 1
	}
	yaml := demo.Config(*listen, *adminListen, stateDir, dbPath, backends, *accessLog)
	load := func() (*config.Config, error) { return config.Parse(yaml) }
	g, err := gateway.New(gateway.Options{Load: load, Version: version})
	if err != nil {
		printConfigError(stderr, "the demo's configuration", err)
		return 1
	}
	intro := func() { demo.Intro(stdout, g.Addr().String(), g.AdminAddr().String(), g.AdminTokenFile()) }
	return serve(g, stderr, intro, intro)
}
