package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// The parser's shared test helpers and the whole-file tests; each block's
// cases are in its own test file (server_test.go, upstreams_test.go, ...).

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// Fragments of a valid config, so that each bad case below shows only what
// it breaks.
const (
	head      = "listen: \":8080\"\nadmin: {listen: \"127.0.0.1:9090\"}\n"
	upstreams = "upstreams:\n  video:\n    endpoints:\n      - address: 10.0.0.1:80\n"
	routes    = "routes:\n  - name: api\n    upstream: video\n"
)

// errorLines returns the lines of an *Errors, failing the test if err is
// anything else.
func errorLines(t *testing.T, err error) []string {
	t.Helper()
	var errs *Errors
	if !errors.As(err, &errs) {
		t.Fatalf("error is %T (%v), want *Errors", err, err)
	}
	if len(*errs) == 0 {
		t.Fatal("*Errors is empty")
	}
	lines := make([]string, len(*errs))
	for i, fe := range *errs {
		lines[i] = fe.Error()
	}
	if got := strings.Join(lines, "\n"); got != errs.Error() {
		t.Errorf("Errors.Error() = %q, want the lines joined: %q", errs.Error(), got)
	}
	return lines
}

// rejectCase is one case of TestParseRejects: a file and the exact errors
// Parse gives, in order. The cases are kept by block, beside the block's
// file (rejectsServer in server_test.go, ...); the file-level ones here.
type rejectCase struct {
	name string
	yaml string
	want []string
}

// rejectsFile are TestParseRejects' cases of the file as a whole (YAML,
// unknown keys at the root, several blocks at once).
var rejectsFile = []rejectCase{
	{"root is a sequence", "- listen: \":80\"\n", []string{
		"(file):1:1: must be a mapping, got a sequence",
	}},
	{"yaml syntax error", "listen: \":8080\"\nadmin: [\n", []string{
		"(file):2: yaml: did not find expected node content",
	}},
	{"two documents", head + upstreams + routes + "---\nlisten: \":1\"\n", []string{
		"(file):10:1: found a second YAML document; a config file holds exactly one",
	}},
	{"unknown top-level key", head + "extra: 1\n" + upstreams + routes, []string{
		"extra: unknown field",
	}},
	{"misspelt top-level key", "listn: \":8080\"\nadmin: {listen: \"127.0.0.1:9090\"}\n" + upstreams + routes, []string{
		`listn: unknown field (did you mean "listen"?)`,
		"listen: required unless listeners is set",
	}},
	{"log level and access", head + "log:\n  level: verbose\n  access: yes\n" + upstreams + routes, []string{
		`log.level: must be one of "debug", "info", "warn", "error", got "verbose"`,
		`log.access: must be true, false or a mapping (output, sample_2xx, redact_query), got "yes"`,
	}},
	{"log access block", head + "log:\n  access:\n    outptu: stdout\n    output: /nonexistent-dir/a.log\n    sample_2xx: 1.5\n    redact_query: [token, \"\", Token, 3]\n" + upstreams + routes, []string{
		`log.access.outptu: unknown field (did you mean "output"?)`,
		`log.access.output: must be "stdout", "stderr" or a file in an existing directory; "/nonexistent-dir" is not a directory, got "/nonexistent-dir/a.log"`,
		"log.access.sample_2xx: must be a number from 0 to 1, got 1.5",
		`log.access.redact_query[1]: must be a query key of 1 to 128 bytes, got ""`,
		`log.access.redact_query[2]: duplicate key "Token"`,
		"log.access.redact_query[3]: must be a string, got 3",
	}},
	{"log access output a directory, redact_query not a list", head + "log:\n  access: {output: /, redact_query: token}\n" + upstreams + routes, []string{
		`log.access.output: must be "stdout", "stderr" or a file, not a directory, got "/"`,
		`log.access.redact_query: must be a sequence, got "token"`,
	}},
	{"metrics app_labels", head + "metrics:\n  app_labels: 1001\n  top: 3\n" + upstreams + routes, []string{
		"metrics.app_labels: must be a number from 0 to 1000, got 1001",
		"metrics.top: unknown field",
	}},
	{"metrics endpoint_labels", head + "metrics:\n  endpoint_labels: -1\n" + upstreams + routes, []string{
		"metrics.endpoint_labels: must be a number from 0 to 1000, got -1",
	}},
	{"complex key", head + "? [a, b]\n: 1\n" + upstreams + routes, []string{
		"(file):3:3: keys must be strings, got a sequence",
	}},
	{"memory limit missing", head + "memory: {}\n" + upstreams + routes, []string{
		`memory.limit: required when memory is set, a size such as "2GiB"`,
	}},
	{"memory limit bounds", head + "memory: {limit: 32MiB}\n" + upstreams + routes, []string{
		"memory.limit: must be from 64MiB to 1TiB, got \"32MiB\"",
	}},
	{"memory limit forms", head + "memory:\n  limit: 2 gigabytes\n  soft_watermark: 0\n  hard_watermark: 1.5\n" + upstreams + routes, []string{
		`memory.limit: must be a size such as 65536 or "64KiB" (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), got "2 gigabytes"`,
		"memory.soft_watermark: must be a number greater than 0 and at most 1, got 0",
		"memory.hard_watermark: must be a number greater than 0 and at most 1, got 1.5",
	}},
	{"memory watermarks out of order", head + "memory: {limit: 2GiB, soft_watermark: 0.9, hard_watermark: 0.7}\n" + upstreams + routes, []string{
		"memory.soft_watermark: must be less than hard_watermark (0.7), got 0.9",
	}},
	{"memory watermark against a default", head + "memory: {limit: 2TiB, soft_watermark: 0.95}\n" + upstreams + routes + "memory2: {limit: 1GiB}\n", []string{
		"memory.limit: must be from 64MiB to 1TiB, got \"2TiB\"",
		"memory.soft_watermark: must be less than hard_watermark (0.9, the default), got 0.95",
		`memory2: unknown field (did you mean "memory"?)`,
	}},
	{"memory hard watermark below the default soft one", head + "memory: {limit: 1GiB, hard_watermark: 0.8, soft_watermark: ~}\n" + upstreams + routes, []string{
		"memory.hard_watermark: must be greater than soft_watermark (0.8, the default), got 0.8",
	}},
	{"memory is not a mapping", head + "memory: 2GiB\n" + upstreams + routes, []string{
		`memory: must be "off" or a mapping (limit, soft_watermark, hard_watermark), got "2GiB"`,
	}},
}

func TestParseRejects(t *testing.T) {
	tests := slices.Concat(rejectsFile, rejectsServer, rejectsUpstreams, rejectsRoutes, rejectsRouteMatch, rejectsRewrite, rejectsSteps, rejectsSplit, rejectsMirror, rejectsListeners)
	// The table's own faults that would hide a case (its size is no test:
	// a count of cases cannot fail for a reason in Parse). A repeated name
	// runs as "name#01" and reads as one case in the output; a case with
	// no wanted error asserts only that Parse fails.
	names := map[string]bool{}
	for _, tt := range tests {
		if names[tt.name] {
			t.Errorf("case %q is in the table twice", tt.name)
		}
		names[tt.name] = true
		if len(tt.want) == 0 {
			t.Errorf("case %q wants no error message", tt.name)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml))
			if cfg != nil {
				t.Errorf("Parse returned a Config as well as an error")
			}
			if err == nil {
				t.Fatalf("Parse succeeded, want errors:\n%s", strings.Join(tt.want, "\n"))
			}
			got := errorLines(t, err)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestParseValidGolden parses each testdata/valid/*.yaml, and ExampleYAML,
// and compares the normalised Config with the JSON file next to it. Run
// with -update to rewrite the golden files after an intended change.
func TestParseValidGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/valid/*.yaml")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no inputs under testdata/valid: %v", err)
	}
	type input struct{ name, golden string }
	var cases []input
	for _, in := range inputs {
		cases = append(cases, input{in, strings.TrimSuffix(in, ".yaml") + ".json"})
	}
	cases = append(cases, input{"ExampleYAML", "testdata/example.json"})
	for _, c := range cases {
		t.Run(filepath.Base(c.name), func(t *testing.T) {
			var cfg *Config
			var err error
			if c.name == "ExampleYAML" {
				cfg, err = Parse([]byte(ExampleYAML))
			} else {
				cfg, err = Load(c.name)
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			checkInvariants(t, cfg)
			got, err := json.MarshalIndent(normalise(reflect.ValueOf(cfg)), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			if *update {
				if err := os.WriteFile(c.golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(c.golden)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs from the parsed config (run with -update if the change is intended):\n%s", c.golden, got)
			}
		})
	}
}

// normalise turns a Config into plain values for a readable golden file:
// durations as strings ("1m30s"), nil pointers and slices as null.
func normalise(v reflect.Value) any {
	if v.Type() == reflect.TypeFor[time.Duration]() {
		return time.Duration(v.Int()).String()
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return normalise(v.Elem())
	case reflect.Struct:
		m := make(map[string]any, v.NumField())
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				continue // derived bookkeeping (Config.dataDefs), not configuration
			}
			if strings.Contains(v.Type().Field(i).Tag.Get("json"), "omitempty") && v.Field(i).IsZero() {
				continue // a field only some forms set (Config.Listeners): absent from the other goldens
			}
			m[v.Type().Field(i).Name] = normalise(v.Field(i))
		}
		return m
	case reflect.Map:
		m := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			m[it.Key().String()] = normalise(it.Value())
		}
		return m
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		s := make([]any, v.Len())
		for i := range s {
			s[i] = normalise(v.Index(i))
		}
		return s
	}
	return v.Interface()
}

// TestDefaults pins every default: a minimal file must produce exactly
// this Config, built here from literals rather than the constants, so that
// a changed default is a visible change to this test.
func TestDefaults(t *testing.T) {
	cfg, err := Parse([]byte(head + upstreams + routes))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Listen:   ":8080",
		Admin:    Admin{Listen: "127.0.0.1:9090", Token: "generate"},
		StateDir: "./levee-state",
		Server: Server{
			MaxHeaderBytes:    65536,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       60 * time.Second,
			ShutdownTimeout:   15 * time.Second,
			DrainTimeout:      DefaultDrainTimeout,

			HTTP2MaxConcurrentStreams: 250,
			Paths:                     ServerPaths{EscapedSlashes: "reject"},
			UnderscoresInHeaders:      "drop",
			TrustedProxiesHeader:      "x-forwarded-for",
			BodyTimeout:               30 * time.Second,
			SendTimeout:               60 * time.Second,
			AnswerBuffer:              1 << 20,
		},
		Log:     Log{Level: "info", Access: true, AccessLog: AccessLog{Output: "stderr", Sample2xx: 1}},
		Metrics: Metrics{AppLabels: 50, EndpointLabels: 50},
		Profiles: Profiles{Enabled: true, CPUThreshold: 0.9, Sustain: 10 * time.Second, OnShedding: true, Interval: 10 * time.Minute,
			Duration: 10 * time.Second, Keep: 10, MaxBytes: 64 << 20},
		Rollback: Rollback{Enabled: true, Window: 30 * time.Second, MaxErrorRatio: 0.1, MinRequests: 20, Keep: 50, CrashStarts: 3, CrashWithin: 5 * time.Minute},
		Upstreams: map[string]*Upstream{"video": {
			Name:      "video",
			Balancer:  "weighted_round_robin",
			Endpoints: []Endpoint{{Address: "10.0.0.1:80", Weight: 1}},
			Timeouts: Timeouts{
				Connect:        time.Second,
				ResponseHeader: 10 * time.Second,
				Idle:           90 * time.Second,
			},
			MaxIdleConnsPerEndpoint: 256,
			PanicThreshold:          50,
			Protocol:                "http1",
		}},
		UpstreamOrder: []string{"video"},
		Routes: []Route{{Name: "api", Match: Match{PathPrefix: "/"}, Upstream: "video", Priority: "normal", Auth: "none",
			Upgrades: []string{"websocket"}}},
	}
	want.source = cfg.source // the file's content, kept for the rollback (Source)
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("got  %+v\nwant %+v", cfg, want)
	}
}

// TestAdmissionDefaults pins the defaults of the admission-control
// fields, from literals: a static limit's queue is twice the limit, an
// adaptive one gets min 4, max 1000 and a queue of 256, null blocks are
// absent, and the memory block's watermarks default to 0.8 and 0.9.
// TestExampleYAML checks that the documented example parses as documented:
// it is the config most operators will start from.
func TestExampleYAML(t *testing.T) {
	cfg, err := Parse([]byte(ExampleYAML))
	if err != nil {
		t.Fatalf("ExampleYAML does not parse:\n%v", err)
	}
	if cfg.TLS != nil || len(cfg.Upstreams) != 2 || len(cfg.Routes) != 4 {
		t.Errorf("ExampleYAML parsed to %d upstreams, %d routes, TLS %v", len(cfg.Upstreams), len(cfg.Routes), cfg.TLS)
	}
	if w := cfg.Upstreams["video"].Endpoints[2].Weight; w != 0 {
		t.Errorf("drained example endpoint has weight %d", w)
	}
	if cfg.Upstreams["video"].Retry == nil || cfg.Routes[1].Retry == nil || cfg.Routes[1].Timeout == 0 {
		t.Errorf("ExampleYAML no longer shows a retry block, a route override and a route timeout")
	}
	if cfg.Memory == nil || cfg.Upstreams["video"].Limits == nil || cfg.Upstreams["video"].Limits.Adaptive ||
		cfg.Upstreams["api"].Limits == nil || !cfg.Upstreams["api"].Limits.Adaptive || cfg.Routes[0].Priority != PrioritySheddable {
		t.Errorf("ExampleYAML no longer shows the memory block, a static and an adaptive limit and a route priority")
	}
	if api := cfg.Upstreams["api"]; api.Discovery == nil || api.Discovery.File == "" || api.LeastRequest == nil || len(api.Endpoints) == 0 {
		t.Errorf("ExampleYAML no longer shows a discovery source beside static endpoints and the least_request block: %+v", api)
	}
}

// TestEphemeralListeners pins that port 0 ("any free port") is accepted
// for both listeners and is not a conflict: the gateway's and the
// command's tests run levee on ephemeral loopback ports this way.
func TestEphemeralListeners(t *testing.T) {
	cfg, err := Parse([]byte("listen: 127.0.0.1:0\nadmin: {listen: 127.0.0.1:0}\n" + upstreams + routes))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:0" || cfg.Admin.Listen != "127.0.0.1:0" {
		t.Errorf("listen %q, admin.listen %q", cfg.Listen, cfg.Admin.Listen)
	}
}

// TestDrainedUpstream pins that an upstream whose endpoints all have
// weight 0 is valid: it is how an operator takes an upstream out of
// service (its routes are refused), and the gateway tests rely on it.
func TestDrainedUpstream(t *testing.T) {
	cfg, err := Parse([]byte(head + "upstreams:\n  video:\n    endpoints:\n      - {address: 10.0.0.1:80, weight: 0}\n      - {address: 10.0.0.2:80, weight: 0}\n" + routes))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range cfg.Upstreams["video"].Endpoints {
		if e.Weight != 0 {
			t.Errorf("endpoint %s has weight %d, want 0", e.Address, e.Weight)
		}
	}
}

func TestUpstreamOrderIsFileOrder(t *testing.T) {
	var b strings.Builder
	b.WriteString(head + "upstreams:\n")
	names := []string{"zeta", "alpha", "mid", "beta.2", "a-1"}
	for _, n := range names {
		b.WriteString("  " + n + ": {endpoints: [{address: \"10.0.0.1:80\"}]}\n")
	}
	b.WriteString("routes:\n  - {name: r, upstream: mid}\n")
	cfg, err := Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg.UpstreamOrder, names) {
		t.Errorf("UpstreamOrder = %v, want %v", cfg.UpstreamOrder, names)
	}
	for _, n := range names {
		if cfg.Upstreams[n] == nil || cfg.Upstreams[n].Name != n {
			t.Errorf("Upstreams[%q] = %+v, want Name %q", n, cfg.Upstreams[n], n)
		}
	}
}

func TestLoad(t *testing.T) {
	t.Run("valid", func(t *testing.T) {
		cfg, err := Load("testdata/valid/minimal.yaml")
		if err != nil || cfg.Listen != ":8080" {
			t.Fatalf("Load = %+v, %v", cfg, err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		cfg, err := Load("testdata/does-not-exist.yaml")
		want := []string{"(file): reading config: open testdata/does-not-exist.yaml: no such file or directory"}
		if got := errorLines(t, err); cfg != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("got %v %q, want nil %q", cfg, got, want)
		}
	})
	t.Run("file over 4MiB is not read whole", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "big.yaml")
		if err := os.WriteFile(path, bytes.Repeat([]byte("#\n"), 3<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		want := []string{"(file): file is larger than the 4MiB limit"}
		if got := errorLines(t, err); !reflect.DeepEqual(got, want) {
			t.Errorf("got %q, want %q", got, want)
		}
	})
}

func TestErrorFormat(t *testing.T) {
	errs := &Errors{
		{Path: "routes[0].upstream", Message: `unknown upstream "x"`},
		{Path: "", Message: "yaml: line 3: bad"},
	}
	want := "routes[0].upstream: unknown upstream \"x\"\n(file): yaml: line 3: bad"
	if got := errs.Error(); got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	var err error = errs
	var target *Errors
	if !errors.As(err, &target) || target != errs {
		t.Error("errors.As does not find *Errors")
	}
}
