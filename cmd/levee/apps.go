package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/adminclient"
)

const appsUsage = `Usage: levee apps COMMAND [flags] [args]   (flags may follow args)

  list [-limit N] [-after ID] [-all]   list apps, a page at a time (-all: every page)
  get ID                               show one app
  create -id ID [-name N] [-status active|suspended] [-grants a,b]
         [-rate R] [-burst B] [-quota N/PERIOD] [-max-concurrency N]
  create -json '{"id": ...}'           the same from a JSON body
  patch ID [-name N] [-status S] [-grants a,b]
         [-rate R] [-burst B] [-quota N/PERIOD] [-max-concurrency N]
                                       limit flags replace the app's limits as a whole
  patch ID -json '{...}'
  delete ID                            delete the app and its keys
  key-create ID                        create a key; its plaintext is printed once
  key-revoke ID KEYID                  revoke a key
  password-create ID [-password-file F] create a basic-auth password (user: the app id);
                                       generated and printed once, or read from F
                                       ("-": stdin; 12 to 128 bytes, no colon)
  password-revoke ID PWID              revoke a basic-auth password
  cert-add ID -fingerprint SHA256 | -cert-file PEM | -san-dns NAME | -san-uri URI
                                       map a client certificate to the app (auth:
                                       client_cert); -cert-file maps the fingerprint
                                       of the PEM file's first certificate
  cert-list ID                         list the app's certificate mappings
  cert-delete ID CERTID                delete a certificate mapping

Every command takes -admin URL (default http://127.0.0.1:9901),
-token-file FILE (an admin API token: admin.token_file, or one of
admin.tokens; list, get and cert-list need scope read, every other command scope
write) and -config FILE (the levee's configuration: its admin.listen and
its token, configured or generated under state_dir).
Defaults, each used when the one before is not set: the flags, then
$LEVEE_ADMIN and $LEVEE_TOKEN_FILE, then the CLI file
$XDG_CONFIG_HOME/levee/cli.yaml (else ~/.config/levee/cli.yaml; keys
admin and token_file), then what -config implies; without any, the
token levee generated in ./levee-state/admin-token is used, else the
demo's. Output is the API's
JSON; a refusal prints its status, reason and message and exits 1.
`

// maxListPages bounds "list -all": 10000 apps at 1000 a page need 10.
const maxListPages = 100

// cmdApps runs "levee apps ...": 0 success, 1 refused or unreachable, 2
// bad usage.
func cmdApps(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, appsUsage)
		return 2
	}
	sub := args[0]
	switch sub {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, appsUsage)
		return 0
	}
	fs, f, adminURL, tokenFile := appsFlagSet(sub)
	if fs == nil {
		fmt.Fprintf(stderr, "levee apps: unknown command %q\n\n%s", sub, appsUsage)
		return 2
	}
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, appsUsage) }
	pos, ok := parseInterleaved(fs, args[1:])
	if !ok {
		return 2
	}
	want := map[string]int{"list": 0, "create": 0, "get": 1, "patch": 1, "delete": 1, "key-create": 1, "key-revoke": 2,
		"password-create": 1, "password-revoke": 2, "cert-add": 1, "cert-list": 1, "cert-delete": 2}[sub]
	if len(pos) != want {
		fmt.Fprintf(stderr, "levee apps %s: want %d argument(s), got %d\n\n%s", sub, want, len(pos), appsUsage)
		return 2
	}
	c, target, err := newAdminClient(*adminURL, flagSet(fs, "admin"), *tokenFile, *f.configPath)
	if err != nil {
		fmt.Fprintln(stderr, "levee apps:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []byte
	switch sub {
	case "list":
		out, err = listApps(ctx, c, *f.limit, *f.after, *f.all)
	case "get":
		out, err = c.Do(ctx, "GET", "/api/v1/apps/"+url.PathEscape(pos[0]), nil)
	case "create", "patch":
		body, berr := f.body(sub == "create")
		if berr != nil {
			fmt.Fprintf(stderr, "levee apps %s: %v\n", sub, berr)
			return 2
		}
		if sub == "create" {
			out, err = c.Do(ctx, "POST", "/api/v1/apps", body)
		} else {
			out, err = c.Do(ctx, "PATCH", "/api/v1/apps/"+url.PathEscape(pos[0]), body)
		}
	case "delete":
		if out, err = c.Do(ctx, "DELETE", "/api/v1/apps/"+url.PathEscape(pos[0]), nil); err == nil {
			out = fmt.Appendf(nil, "{\"deleted\": %q}\n", pos[0])
		}
	case "key-create":
		out, err = c.Do(ctx, "POST", "/api/v1/apps/"+url.PathEscape(pos[0])+"/keys", nil)
	case "key-revoke":
		out, err = c.Do(ctx, "DELETE", "/api/v1/apps/"+url.PathEscape(pos[0])+"/keys/"+url.PathEscape(pos[1]), nil)
	case "password-create":
		body, berr := passwordBody(*f.passwordFile, os.Stdin)
		if berr != nil {
			fmt.Fprintf(stderr, "levee apps %s: %v\n", sub, berr)
			return 2
		}
		out, err = c.Do(ctx, "POST", "/api/v1/apps/"+url.PathEscape(pos[0])+"/passwords", body)
	case "password-revoke":
		out, err = c.Do(ctx, "DELETE", "/api/v1/apps/"+url.PathEscape(pos[0])+"/passwords/"+url.PathEscape(pos[1]), nil)
	case "cert-add":
		body, berr := f.cert.body()
		if berr != nil {
			fmt.Fprintf(stderr, "levee apps %s: %v\n", sub, berr)
			return 2
		}
		out, err = c.Do(ctx, "POST", "/api/v1/apps/"+url.PathEscape(pos[0])+"/certificates", body)
	case "cert-list":
		out, err = c.Do(ctx, "GET", "/api/v1/apps/"+url.PathEscape(pos[0])+"/certificates", nil)
	case "cert-delete":
		out, err = c.Do(ctx, "DELETE", "/api/v1/apps/"+url.PathEscape(pos[0])+"/certificates/"+url.PathEscape(pos[1]), nil)
	}
	if err != nil {
		fmt.Fprintf(stderr, "levee apps %s: %v%s\n", sub, err, refusalHint(err, target))
		return 1
	}
	stdout.Write(out)
	return 0
}

// appsCommands are the commands of "levee apps", in appsUsage's order.
var appsCommands = []string{"list", "get", "create", "patch", "delete", "key-create", "key-revoke", "password-create", "password-revoke",
	"cert-add", "cert-list", "cert-delete"}

// appsFlagSet returns the flag set of "levee apps sub" (nil for an
// unknown sub), the app flags it fills, and -admin and -token-file. The
// shell completions are generated from it too.
func appsFlagSet(sub string) (fs *flag.FlagSet, f *appFlags, adminURL, tokenFile *string) {
	fs = flag.NewFlagSet("levee apps "+sub, flag.ContinueOnError)
	adminURL = fs.String("admin", "http://"+defaultAdminAddr, "admin API address")
	tokenFile = fs.String("token-file", "", "file holding the admin API token")
	f = &appFlags{configPath: fs.String("config", "", "the configuration of the levee to call: its admin address and token")}
	switch sub {
	case "create", "patch":
		f.register(fs, sub == "create")
	case "list":
		f.limit = fs.Int("limit", 0, "apps per page (1 to 1000; default 100)")
		f.after = fs.String("after", "", "list apps whose id sorts after this one")
		f.all = fs.Bool("all", false, "follow every page")
	case "password-create":
		f.passwordFile = fs.String("password-file", "", `file holding the password to set ("-": stdin); a generated one when omitted`)
	case "cert-add":
		f.cert.register(fs)
	case "get", "delete", "key-create", "key-revoke", "password-revoke", "cert-list", "cert-delete":
	default:
		return nil, nil, nil, nil
	}
	return fs, f, adminURL, tokenFile
}

// parseInterleaved parses flags that may stand before, between or after
// the positional arguments, and returns those.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, bool) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, false
		}
		if fs.NArg() == 0 {
			return pos, true
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// listApps returns one page, or with all every page merged into one
// {"apps": [...]} document.
func listApps(ctx context.Context, c *adminclient.Client, limit int, after string, all bool) ([]byte, error) {
	return listPages(ctx, c, "/api/v1/apps", "apps", limit, after, all)
}

// appFlags are the flags of create and patch (and list's).
type appFlags struct {
	fs                     *flag.FlagSet
	id, name, status       *string
	grants, quota, rawJSON *string
	rate                   *float64
	burst, maxConcurrency  *int
	passwordFile           *string // password-create
	cert                   certFlags
	limit                  *int
	after                  *string
	all                    *bool
	configPath             *string
}

func (f *appFlags) register(fs *flag.FlagSet, create bool) {
	f.fs = fs
	if create {
		f.id = fs.String("id", "", "app id (required unless -json)")
	}
	f.name = fs.String("name", "", "display name")
	f.status = fs.String("status", "", "active or suspended")
	f.grants = fs.String("grants", "", "comma-separated route names")
	f.rate = fs.Float64("rate", 0, "requests per second, sustained")
	f.burst = fs.Int("burst", 0, "burst above rate (default max(1, ceil(rate)))")
	f.quota = fs.String("quota", "", "quota as REQUESTS/PERIOD, e.g. 1000000/24h")
	f.maxConcurrency = fs.Int("max-concurrency", 0, "requests in flight")
	f.rawJSON = fs.String("json", "", "the whole JSON body instead of flags")
}

// body builds the JSON body of create or patch from the flags set.
func (f *appFlags) body(create bool) ([]byte, error) {
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["json"] {
		if len(set) > 1+boolInt(set["admin"])+boolInt(set["token-file"])+boolInt(set["config"]) {
			return nil, fmt.Errorf("-json replaces every other app flag")
		}
		return []byte(*f.rawJSON), nil
	}
	doc := map[string]any{}
	if create {
		if *f.id == "" {
			return nil, fmt.Errorf("-id is required")
		}
		doc["id"] = *f.id
	}
	if set["name"] {
		doc["name"] = *f.name
	}
	if set["status"] {
		doc["status"] = *f.status
	}
	if set["grants"] {
		grants := []string{}
		for _, g := range strings.Split(*f.grants, ",") {
			if g = strings.TrimSpace(g); g != "" {
				grants = append(grants, g)
			}
		}
		doc["grants"] = grants
	}
	limits := map[string]any{}
	if set["rate"] {
		limits["rate"] = *f.rate
	}
	if set["burst"] {
		limits["burst"] = *f.burst
	}
	if set["max-concurrency"] {
		limits["max_concurrency"] = *f.maxConcurrency
	}
	if set["quota"] {
		n, per, ok := strings.Cut(*f.quota, "/")
		requests, err := strconv.ParseInt(n, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("-quota %q: want REQUESTS/PERIOD, e.g. 1000000/24h", *f.quota)
		}
		limits["quota"] = map[string]any{"requests": requests, "per": per}
	}
	if len(limits) > 0 {
		doc["limits"] = limits
	}
	return json.Marshal(doc)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// maxPasswordFile bounds what password-create reads: a password is at
// most 128 bytes (apps.MaxPasswordLen); a larger file is a mistake.
const maxPasswordFile = 4096

// passwordBody is the body of POST .../passwords: nil (levee generates
// the password) without a file, else {"password": ...} from the file (or
// stdin for "-"), one trailing newline dropped. The store checks the
// password itself (422 invalid_app naming "password").
func passwordBody(file string, stdin io.Reader) ([]byte, error) {
	if file == "" {
		return nil, nil
	}
	var r io.Reader = stdin
	if file != "-" {
		fh, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		r = fh
	}
	b, err := io.ReadAll(io.LimitReader(r, maxPasswordFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxPasswordFile {
		return nil, fmt.Errorf("%s: longer than %d bytes", file, maxPasswordFile)
	}
	pw := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	return json.Marshal(map[string]string{"password": pw})
}
