package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/levee-gw/levee/internal/config/engine"
)

const schemaFile = "../../deploy/levee.schema.json"

// TestSchemaFresh fails when deploy/levee.schema.json is not what the
// field tables generate; `go generate ./internal/config` (or this test
// with -update) rewrites it.
func TestSchemaFresh(t *testing.T) {
	want := JSONSchema()
	if *update {
		if err := os.WriteFile(schemaFile, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatalf("%v (run go generate ./internal/config to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go generate ./internal/config", schemaFile)
	}
}

// loadSchema returns the checked-in schema, decoded.
func loadSchema(t testing.TB) map[string]any {
	t.Helper()
	data, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// yamlValue decodes a YAML document into plain Go values, as a JSON
// Schema validator sees them: mapping keys become strings (an upstream
// may be named 1, a YAML integer key).
func yamlValue(t testing.TB, data string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(data), &v); err != nil {
		t.Fatal(err)
	}
	return jsonKeys(v)
}

// jsonKeys returns v with every mapping's keys written as strings.
func jsonKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonKeys(e)
		}
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonKeys(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonKeys(e)
		}
	}
	return v
}

// validConfigs returns ExampleYAML and every testdata/valid file, by name.
func validConfigs(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{"ExampleYAML": ExampleYAML}
	files, err := filepath.Glob("testdata/valid/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/valid files (%v)", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = string(data)
	}
	return out
}

// TestSchemaAcceptsValidConfigs checks that every config Parse accepts
// in the tests' fixtures validates against the checked-in schema.
func TestSchemaAcceptsValidConfigs(t *testing.T) {
	schema := loadSchema(t)
	for name, data := range validConfigs(t) {
		if _, err := Parse([]byte(data)); err != nil {
			t.Fatalf("%s: Parse: %v", name, err)
		}
		if errs := validate(schema, yamlValue(t, data), ""); len(errs) > 0 {
			t.Errorf("%s does not validate against the schema:\n%s", name, strings.Join(errs, "\n"))
		}
	}
}

// FuzzSchemaAgrees checks that the schema is never stricter than Parse:
// every input Parse accepts validates against it.
func FuzzSchemaAgrees(f *testing.F) {
	for _, data := range validConfigs(f) {
		f.Add([]byte(data))
	}
	f.Add([]byte(head + "upstreams:\n  1: {endpoints: [{address: \"10.0.0.1:80\", zone: a}]}\nroutes: [{name: r, upstream: \"1\", timeout: +1s, max_body_bytes: 1 KB}]\n"))
	schema := loadSchema(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if _, err := Parse(data); err != nil {
			return
		}
		if errs := validate(schema, yamlValue(t, string(data)), ""); len(errs) > 0 {
			t.Fatalf("Parse accepts a file the schema refuses:\n%s\n%s", data, strings.Join(errs, "\n"))
		}
	})
}

// TestSchemaRefuses checks that the schema (and this validator) refuse
// what they should, each a valid example with one field broken: a schema
// that accepted anything would pass TestSchemaAcceptsValidConfigs.
func TestSchemaRefuses(t *testing.T) {
	schema := loadSchema(t)
	base := head + "upstreams:\n  video:\n    endpoints:\n      - address: 10.0.0.1:80\n%s" + "routes:\n  - name: api\n    upstream: video\n%s"
	tests := []struct {
		name, upstream, route, want string
	}{
		{"unknown upstream key", "    retires: {}\n", "", "upstreams.video: unknown field retires"},
		{"unknown nested key", "    retry: {attemps: 2}\n", "", "upstreams.video.retry: unknown field attemps"},
		{"int above max", "    retry: {attempts: 11}\n", "", "upstreams.video.retry.attempts: above maximum 10"},
		{"int as string", "    max_idle_conns_per_endpoint: \"4\"\n", "", "upstreams.video.max_idle_conns_per_endpoint: want integer,null, got string"},
		{"bad duration", "    slow_start: 10\n", "", "upstreams.video.slow_start: want string,null, got integer"},
		{"duration without unit", "    slow_start: \"10\"\n", "", `upstreams.video.slow_start: "10" does not match`},
		{"bad enum", "    balancer: random\n", "", `upstreams.video.balancer: "random" not in enum`},
		{"bad size unit", "", "    max_body_bytes: 10kb\n", "routes[0].max_body_bytes: no anyOf branch matches"},
		{"retry condition", "    retry: {on: [connect_failure, 404, resets]}\n", "", "upstreams.video.retry.on[2]: no anyOf branch matches"},
		{"adaptive misspelt", "    limits: {max_concurrency: adaptiv}\n", "", "upstreams.video.limits.max_concurrency: no anyOf branch matches"},
		{"route retry budget", "", "    retry: {budget: {ratio: 0.1}}\n", "routes[0].retry: unknown field budget"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := fmt.Sprintf(base, tc.upstream, tc.route)
			if _, err := Parse([]byte(doc)); err == nil {
				t.Fatalf("Parse accepts the broken file; the case is wrong:\n%s", doc)
			}
			errs := validate(schema, yamlValue(t, doc), "")
			if !slices.ContainsFunc(errs, func(e string) bool { return strings.HasPrefix(e, tc.want) }) {
				t.Errorf("schema errors %q, want one starting %q", errs, tc.want)
			}
		})
	}
	for _, tc := range []struct{ name, doc, want string }{
		{"fraction zero", head + upstreams + routes + "profiles: {cpu_threshold: 0}\n", "profiles.cpu_threshold: not above 0"},
		{"memory neither off nor a block", head + upstreams + routes + "memory: on\n", "memory: no anyOf branch matches"},
		{"missing routes", head + upstreams, "(root): missing required routes"},
		{"no upstreams", head + "upstreams: {}\n" + routes, "upstreams: fewer than 1 properties"},
		{"upstream name", head + "upstreams:\n  Video:\n    endpoints: [{address: \"10.0.0.1:80\"}]\n" + routes, `upstreams: property name "Video"`},
		{"empty state_dir", head + upstreams + routes + "state_dir: \"\"\n", "state_dir: shorter than 1"},
		{"discovery key", head + "upstreams:\n  video:\n    discovery: {push: true, max_weigth: 5}\n" + routes, "upstreams.video.discovery: unknown field max_weigth"},
		{"app key", head + upstreams + routes + "apps:\n  - {id: a, grant: [api]}\n", "apps[0]: unknown field grant"},
		{"app key hash", head + upstreams + routes + "apps:\n  - {id: a, api_key_sha256: [abc]}\n", `apps[0].api_key_sha256[0]: "abc" does not match`},
		{"token scope", "listen: \":8080\"\nadmin: {listen: \"127.0.0.1:9090\", tokens: [{file: x, scope: root}]}\n" + upstreams + routes, `admin.tokens[0].scope: "root" not in enum`},
		{"quota requests", head + upstreams + routes + "apps:\n  - {id: a, limits: {quota: {requests: 0, per: 1h}}}\n", "apps[0].limits.quota.requests: below minimum 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse([]byte(tc.doc)); err == nil {
				t.Fatalf("Parse accepts the broken file; the case is wrong:\n%s", tc.doc)
			}
			errs := validate(schema, yamlValue(t, tc.doc), "")
			if !slices.ContainsFunc(errs, func(e string) bool { return strings.HasPrefix(e, tc.want) }) {
				t.Errorf("schema errors %q, want one starting %q", errs, tc.want)
			}
		})
	}
}

// TestFieldDefaults checks each bound field's default in the tables
// against the default* constructors that the walker starts from: nil
// means the zero value.
func TestFieldDefaults(t *testing.T) {
	c := defaultConfig()
	for _, tc := range []struct {
		name string
		b    *engine.Block
		dst  any
	}{
		{"root", rootBlock, c},
		{"server", serverBlock, &c.Server},
		{"server.paths", serverPathsBlock, &c.Server.Paths},
		{"log", logBlock, &c.Log}, {"log.access", accessLogBlock, &c.Log.AccessLog},
		{"metrics", metricsBlock, &c.Metrics},
		{"profiles", profilesBlock, &c.Profiles},
		{"memory", memoryBlock, defaultMemory()},
		{"tracing", tracingBlock, defaultTracing()},
		{"upstream", upstreamBlock, defaultUpstream("x")},
		{"least_request", leastRequestBlock, defaultLeastRequest()},
		{"timeouts", timeoutsBlock, &defaultUpstream("x").Timeouts},
		{"endpoint", endpointBlock, ptr(defaultEndpoint())},
		{"retry", retryBlock, defaultRetry(false)},
		{"backoff", backoffBlock, &defaultRetry(false).Backoff},
		{"retry.budget", retryBudgetBlock, ptr(defaultRetryBudget())},
		{"limits", limitsBlock, defaultLimits(0, false)},
		{"health_check", healthCheckBlock, defaultHealthCheck()},
		{"outlier_detection", outlierDetectionBlock, defaultOutlierDetection()},
		{"zones", zonesBlock, defaultZones()},
		{"route", routeBlock, ptr(defaultRoute())},
		{"match", matchBlock, ptr(defaultRoute().Match)},
		{"discovery", discoveryBlock, defaultDiscovery()},
		{"etcd", etcdBlock, defaultEtcdDiscovery()},
		{"cluster.etcd", clusterEtcdBlock, defaultClusterEtcd()},
		{"app", appBlock, &App{Status: DefaultAppStatus}},
		{"admin", adminBlock, &c.Admin},
		{"tls", tlsBlock, engine.WithDefaults(tlsBlock, &TLS{})},
		{"tls.client_auth", tlsClientAuthBlock, engine.WithDefaults(tlsClientAuthBlock, &TLSClientAuth{})},
		{"http", httpCheckBlock, defaultHTTPCheck()},
		{"consistent_hash", consistentHashBlock, &ConsistentHash{}},
		{"quota", quotaBlock, &Quota{}},
		{"app.limits", appLimitsBlock, &AppLimits{}},
		{"anonymous_limits", anonymousLimitsBlock, &AnonymousLimits{}},
	} {
		for _, f := range tc.b.Fields {
			if f.Bind == nil || f.Kind == engine.KindBlock {
				continue
			}
			got := reflect.ValueOf(f.Bind(tc.dst)).Elem()
			want := f.Def
			if want == nil {
				want = reflect.Zero(got.Type()).Interface()
			}
			if !reflect.DeepEqual(got.Interface(), want) {
				t.Errorf("%s.%s: the constructor gives %#v (%T), the table says %#v (%T)", tc.name, f.Name, got.Interface(), got.Interface(), want, want)
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestFieldTable checks the tables' shape: unique keys, a bind of the Go
// type its kind reads into, and a bound block's fields all bound (the
// generic reader would skip the others silently).
func TestFieldTable(t *testing.T) {
	want := map[engine.Kind][]reflect.Type{
		engine.KindString:   {reflect.TypeFor[*string]()},
		engine.KindEnum:     {reflect.TypeFor[*string]()},
		engine.KindInt:      {reflect.TypeFor[*int](), reflect.TypeFor[*int64](), reflect.TypeFor[*uint32]()},
		engine.KindNumber:   {reflect.TypeFor[*float64]()},
		engine.KindFraction: {reflect.TypeFor[*float64]()},
		engine.KindBool:     {reflect.TypeFor[*bool]()},
		engine.KindDuration: {reflect.TypeFor[*time.Duration]()},
		engine.KindSize:     {reflect.TypeFor[*int64]()},
	}
	seen := map[*engine.Block]bool{}
	var walk func(name string, b *engine.Block, dst reflect.Type)
	walk = func(name string, b *engine.Block, dst reflect.Type) {
		if seen[b] {
			return
		}
		seen[b] = true
		names := map[string]bool{}
		for _, f := range b.Fields {
			fp := engine.Key(name, f.Name)
			if names[f.Name] {
				t.Errorf("%s: listed twice", fp)
			}
			names[f.Name] = true
			if f.Kind == engine.KindEither && f.Bind != nil {
				t.Errorf("%s: a field of several forms cannot be bound", fp)
			}
			var got reflect.Type
			// dst is nil for a block read by hand from here; the list
			// below checks it with its type.
			if f.Bind != nil && dst != nil {
				got = reflect.TypeOf(f.Bind(reflect.New(dst.Elem()).Interface()))
				if types, ok := want[f.Kind]; ok && !slices.Contains(types, got) {
					t.Errorf("%s: bind gives %s, kind wants %v", fp, got, types)
				}
			}
			if f.Sub != nil {
				if f.Kind == engine.KindBlock && f.Bind != nil {
					for _, sf := range f.Sub.Fields {
						if sf.Bind == nil {
							t.Errorf("%s.%s: its block is read generically, so it needs a bind", fp, sf.Name)
						}
					}
				}
				walk(fp, f.Sub, got)
			}
			if f.Item != nil && f.Item.Sub != nil {
				walk(fp+"[]", f.Item.Sub, nil)
			}
		}
	}
	walk("", rootBlock, reflect.TypeFor[*Config]())
	for _, b := range []struct {
		b   *engine.Block
		dst reflect.Type
	}{
		{upstreamBlock, reflect.TypeFor[*Upstream]()}, {routeBlock, reflect.TypeFor[*Route]()},
		{endpointBlock, reflect.TypeFor[*Endpoint]()}, {matchBlock, reflect.TypeFor[*Match]()},
		{retryBlock, reflect.TypeFor[*Retry]()}, {backoffBlock, reflect.TypeFor[*Backoff]()},
		{retryBudgetBlock, reflect.TypeFor[*RetryBudget]()}, {limitsBlock, reflect.TypeFor[*Limits]()},
		{healthCheckBlock, reflect.TypeFor[*HealthCheck]()}, {outlierDetectionBlock, reflect.TypeFor[*OutlierDetection]()},
		{zonesBlock, reflect.TypeFor[*Zones]()}, {leastRequestBlock, reflect.TypeFor[*LeastRequest]()},
		{memoryBlock, reflect.TypeFor[*Memory]()}, {timeoutsBlock, reflect.TypeFor[*Timeouts]()},
		{discoveryBlock, reflect.TypeFor[*Discovery]()}, {etcdBlock, reflect.TypeFor[*EtcdDiscovery]()},
		{quotaBlock, reflect.TypeFor[*Quota]()}, {appLimitsBlock, reflect.TypeFor[*AppLimits]()},
		{appBlock, reflect.TypeFor[*App]()}, {anonymousLimitsBlock, reflect.TypeFor[*AnonymousLimits]()},
		{routeLimitBlock, reflect.TypeFor[*RouteLimit]()}, {adminTokenBlock, reflect.TypeFor[*AdminToken]()},
		{consistentHashBlock, reflect.TypeFor[*ConsistentHash]()}, {logBlock, reflect.TypeFor[*Log]()}, {accessLogBlock, reflect.TypeFor[*AccessLog]()},
		{adminBlock, reflect.TypeFor[*Admin]()}, {httpCheckBlock, reflect.TypeFor[*HTTPCheck]()},
	} {
		delete(seen, b.b)
		walk("("+b.dst.Elem().Name()+")", b.b, b.dst)
	}
}

// validate checks v against schema, returning one line per problem. It
// implements exactly the keywords JSONSchema emits, and fails on any
// other, so that the two cannot drift apart unnoticed.
func validate(schema map[string]any, v any, path string) []string {
	at := path
	if at == "" {
		at = "(root)"
	}
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, at+": "+fmt.Sprintf(format, args...)) }
	for k := range schema {
		switch k {
		case "$schema", "$id", "title", "description", "default", "type", "enum", "minimum", "maximum", "exclusiveMinimum",
			"minLength", "pattern", "properties", "additionalProperties", "required", "minProperties", "propertyNames",
			"items", "minItems", "maxItems", "maxProperties", "anyOf":
		default:
			bad("the validator does not know keyword %q", k)
		}
	}
	if t, ok := schema["type"]; ok {
		var types []string
		switch t := t.(type) {
		case string:
			types = []string{t}
		case []any:
			for _, x := range t {
				types = append(types, x.(string))
			}
		}
		if !slices.ContainsFunc(types, func(t string) bool { return hasType(v, t) }) {
			bad("want %s, got %s", strings.Join(types, ","), typeOf(v))
			return errs
		}
	}
	if e, ok := schema["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return x == v }) {
		bad("%q not in enum %v", v, e)
	}
	if x, ok := number(v); ok {
		if m, ok := schema["minimum"].(float64); ok && x < m {
			bad("below minimum %v", m)
		}
		if m, ok := schema["maximum"].(float64); ok && x > m {
			bad("above maximum %v", m)
		}
		if m, ok := schema["exclusiveMinimum"].(float64); ok && x <= m {
			bad("not above %v", m)
		}
	}
	if s, ok := v.(string); ok {
		if m, ok := schema["minLength"].(float64); ok && float64(len([]rune(s))) < m {
			bad("shorter than %v", m)
		}
		if p, ok := schema["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(s) {
			bad("%q does not match %s", s, p)
		}
	}
	if m, ok := v.(map[string]any); ok {
		props, _ := schema["properties"].(map[string]any)
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			kp := engine.Key(path, k)
			if ps, ok := props[k].(map[string]any); ok {
				errs = append(errs, validate(ps, m[k], kp)...)
				continue
			}
			switch ap := schema["additionalProperties"].(type) {
			case bool:
				if !ap {
					bad("unknown field %s", k)
				}
			case map[string]any:
				errs = append(errs, validate(ap, m[k], kp)...)
			}
			if pn, ok := schema["propertyNames"].(map[string]any); ok {
				if len(validate(pn, k, kp)) > 0 {
					bad("property name %q does not match %v", k, pn["pattern"])
				}
			}
		}
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if _, ok := m[r.(string)]; !ok {
					bad("missing required %s", r)
				}
			}
		}
		if n, ok := schema["minProperties"].(float64); ok && float64(len(m)) < n {
			bad("fewer than %v properties", n)
		}
		if n, ok := schema["maxProperties"].(float64); ok && float64(len(m)) > n {
			bad("more than %v properties", n)
		}
	}
	if a, ok := v.([]any); ok {
		if n, ok := schema["minItems"].(float64); ok && float64(len(a)) < n {
			bad("fewer than %v items", n)
		}
		if n, ok := schema["maxItems"].(float64); ok && float64(len(a)) > n {
			bad("more than %v items", n)
		}
		if is, ok := schema["items"].(map[string]any); ok {
			for i, x := range a {
				errs = append(errs, validate(is, x, engine.Index(path, i))...)
			}
		}
	}
	if branches, ok := schema["anyOf"].([]any); ok {
		if !slices.ContainsFunc(branches, func(s any) bool { return len(validate(s.(map[string]any), v, path)) == 0 }) {
			bad("no anyOf branch matches %v", v)
		}
	}
	return errs
}

// hasType reports whether v, as yaml.v3 decodes it, is of JSON type t.
// Integers are YAML integers only, as Parse reads them.
func hasType(v any, t string) bool {
	switch t {
	case "null":
		return v == nil
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "string":
		_, ok := v.(string)
		return ok
	case "integer":
		switch v.(type) {
		case int, int64, uint64:
			return true
		}
		return false
	case "number":
		_, ok := number(v)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	}
	panic("unknown type " + t)
}

func typeOf(v any) string {
	for _, t := range []string{"null", "boolean", "string", "integer", "number", "object", "array"} {
		if hasType(v, t) {
			return t
		}
	}
	return fmt.Sprintf("%T", v)
}

// number returns v as a float64 if it is a YAML number (not NaN).
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, !math.IsNaN(x)
	}
	return 0, false
}

// TestEndpointBadZoneIsNotCompared pins the fix of a lost value in
// endpoint (staticcheck SA4006): an endpoint whose zone is invalid is
// wrong, like one whose weight is, so it is left out of the duplicate
// check rather than reported twice.
func TestEndpointBadZoneIsNotCompared(t *testing.T) {
	doc := head + "upstreams:\n  video:\n    endpoints:\n      - {address: \"10.0.0.1:80\", zone: \"Bad Zone\"}\n      - {address: \"10.0.0.1:80\"}\n" + routes
	_, err := Parse([]byte(doc))
	got := errorLines(t, err)
	want := []string{`upstreams.video.endpoints[0].zone: zone ` + nameRule + `, got "Bad Zone"`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
