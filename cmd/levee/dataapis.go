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
	"time"

	"github.com/levee-gw/levee/internal/adminclient"
	"github.com/levee-gw/levee/internal/config"
)

const dataAPIsUsage = `Usage: levee data-apis COMMAND [flags] [args]   (flags may follow args)

  list [-limit N] [-after NAME] [-all]  list data APIs, a page at a time (-all: every page)
  get NAME                              show one data API with its versions
  create NAME -f FILE                   create it from a route definition: version 1, a draft
  update NAME -f FILE                   add a version; the published one serves until a publish
  publish NAME [-version N]             serve version N (default: the latest)
  rollback NAME [-version N]            serve an earlier version (default: the one before
                                        the published one)
  offline NAME                          stop serving; the published version is remembered
  delete NAME                           delete it and its versions

FILE is one route as the configuration file's routes list writes it
(match, auth, the route fields that apply to data routes, and data), in
YAML or JSON; - reads standard input. Its name may be left out; if given,
it must be NAME.

Every command takes -admin URL (default http://127.0.0.1:9901),
-token-file FILE (an admin API token; list and get need scope read,
every other command scope write) and -config FILE (the levee's
configuration: its admin.listen and its token, configured or generated
under state_dir).
Defaults, each used when the one before is not set: the flags, then
$LEVEE_ADMIN and $LEVEE_TOKEN_FILE, then the CLI file
$XDG_CONFIG_HOME/levee/cli.yaml (else ~/.config/levee/cli.yaml; keys
admin and token_file), then what -config implies; without any, the
token levee generated in ./levee-state/admin-token is used, else the
demo's. Output is the API's JSON; a refusal prints its status,
reason and message and exits 1.
`

// dataAPIsCommands are "levee data-apis"'s commands, in usage's order.
var dataAPIsCommands = []string{"list", "get", "create", "update", "publish", "rollback", "offline", "delete"}

// dataAPIsFlags are the values a "levee data-apis" command's flags fill;
// the pointers of flags the command does not take are nil.
type dataAPIsFlags struct {
	adminURL, tokenFile, file, after *string
	configPath                       *string
	version, limit                   *int
	all                              *bool
}

// dataAPIsFlagSet returns the flag set of "levee data-apis sub" (nil for
// an unknown sub) and what its flags fill: the CLI parses with it and
// the completion scripts list its flags.
func dataAPIsFlagSet(sub string) (*flag.FlagSet, dataAPIsFlags) {
	fs := flag.NewFlagSet("levee data-apis "+sub, flag.ContinueOnError)
	var f dataAPIsFlags
	f.adminURL = fs.String("admin", "http://"+defaultAdminAddr, "admin API address")
	f.tokenFile = fs.String("token-file", "", "file holding the admin API token")
	f.configPath = fs.String("config", "", "the configuration of the levee to call: its admin address and token")
	switch sub {
	case "create", "update":
		f.file = fs.String("f", "", "the route definition, YAML or JSON (- for standard input)")
	case "publish", "rollback":
		f.version = fs.Int("version", 0, "the version (default: see the command)")
	case "list":
		f.limit = fs.Int("limit", 0, "data APIs per page (1 to 1000; default 100)")
		f.after = fs.String("after", "", "list data APIs whose name sorts after this one")
		f.all = fs.Bool("all", false, "follow every page")
	case "get", "offline", "delete":
	default:
		return nil, f
	}
	return fs, f
}

// cmdDataAPIs runs "levee data-apis ...": 0 success, 1 refused or
// unreachable, 2 bad usage.
func cmdDataAPIs(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, dataAPIsUsage)
		return 2
	}
	sub := args[0]
	switch sub {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, dataAPIsUsage)
		return 0
	}
	fs, f := dataAPIsFlagSet(sub)
	if fs == nil {
		fmt.Fprintf(stderr, "levee data-apis: unknown command %q\n\n%s", sub, dataAPIsUsage)
		return 2
	}
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, dataAPIsUsage) }
	adminURL, tokenFile, file, version := f.adminURL, f.tokenFile, f.file, f.version
	limit, after, all := f.limit, f.after, f.all
	pos, ok := parseInterleaved(fs, args[1:])
	if !ok {
		return 2
	}
	want := 1
	if sub == "list" {
		want = 0
	}
	if len(pos) != want {
		fmt.Fprintf(stderr, "levee data-apis %s: want %d argument(s), got %d\n\n%s", sub, want, len(pos), dataAPIsUsage)
		return 2
	}
	var body []byte
	switch {
	case file != nil:
		var err error
		if body, err = definitionBody(*file, pos[0], sub == "create", stdin); err != nil {
			fmt.Fprintf(stderr, "levee data-apis %s: %v\n", sub, err)
			return 2
		}
	case version != nil && *version < 0:
		fmt.Fprintf(stderr, "levee data-apis %s: -version must be 1 or more\n", sub)
		return 2
	case version != nil && *version > 0:
		body = fmt.Appendf(nil, `{"version": %d}`, *version)
	}
	c, target, err := newAdminClient(*adminURL, flagSet(fs, "admin"), *tokenFile, *f.configPath)
	if err != nil {
		fmt.Fprintln(stderr, "levee data-apis:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []byte
	const base = "/api/v1/data-apis"
	path := base
	if len(pos) > 0 {
		path += "/" + url.PathEscape(pos[0])
	}
	switch sub {
	case "list":
		out, err = listPages(ctx, c, base, "data_apis", *limit, *after, *all)
	case "get":
		out, err = c.Do(ctx, "GET", path, nil)
	case "create":
		out, err = c.Do(ctx, "POST", base, body)
	case "update":
		out, err = c.Do(ctx, "POST", path+"/versions", body)
	case "publish", "rollback", "offline":
		out, err = c.Do(ctx, "POST", path+"/"+sub, body)
	case "delete":
		if out, err = c.Do(ctx, "DELETE", path, nil); err == nil {
			out = fmt.Appendf(nil, "{\"deleted\": %q}\n", pos[0])
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "levee data-apis %s: %v%s\n", sub, err, refusalHint(err, target))
		return 1
	}
	stdout.Write(out)
	return 0
}

// definitionBody reads the definition at path ("-": stdin), YAML or JSON,
// and returns it as the JSON the API takes: with name set on create. A
// name in the file must be name. The definition's fields are the API's to
// check (config's rules, 422 naming the field).
func definitionBody(path, name string, create bool, stdin io.Reader) ([]byte, error) {
	if path == "" {
		return nil, fmt.Errorf("-f FILE is required (- for standard input)")
	}
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	raw, err := io.ReadAll(io.LimitReader(r, config.MaxDefinitionBytes+1))
	if err != nil {
		return nil, err
	}
	def, fileName, err := config.DefinitionJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if fileName != "" && fileName != name {
		return nil, fmt.Errorf("%s names %q, not %q", path, fileName, name)
	}
	if !create {
		return def, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(def, &m); err != nil {
		return nil, err
	}
	m["name"], _ = json.Marshal(name)
	return json.Marshal(m)
}

// listPages returns one page of a paged list at path, or with all every
// page's items (the field key) merged into one document.
func listPages(ctx context.Context, c *adminclient.Client, path, key string, limit int, after string, all bool) ([]byte, error) {
	var merged []json.RawMessage
	for range maxListPages {
		q := url.Values{}
		if limit > 0 {
			q.Set("limit", strconv.Itoa(limit))
		}
		if after != "" {
			q.Set("after", after)
		}
		raw, err := c.Do(ctx, "GET", path+"?"+q.Encode(), nil)
		if err != nil || !all {
			return raw, err
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(raw, &page); err != nil {
			return nil, fmt.Errorf("decoding a page: %w", err)
		}
		var items []json.RawMessage
		var next string
		if err := json.Unmarshal(page[key], &items); err != nil {
			return nil, fmt.Errorf("decoding a page: %w", err)
		}
		_ = json.Unmarshal(page["next"], &next)
		merged = append(merged, items...)
		if next == "" {
			return json.MarshalIndent(map[string]any{key: merged}, "", "  ")
		}
		after = next
	}
	return nil, fmt.Errorf("more than %d pages", maxListPages)
}
