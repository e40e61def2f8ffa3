package config

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// appsBase is a valid file with two routes (api, video) that app cases
// extend.
const appsBase = head + upstreams + "routes:\n  - name: api\n    upstream: video\n  - name: video\n    match: {path_prefix: /v/}\n    upstream: video\n    auth: api_key\n"

const hashA = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

// TestParseAppsRejects pins the message of every error about apps, route
// auth and anonymous limits.
func TestParseAppsRejects(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"apps is a mapping", appsBase + "apps: {a: 1}\n", []string{"apps: must be a sequence, got a mapping"}},
		{"app is a number", appsBase + "apps: [5]\n", []string{"apps[0]: must be a mapping with id and grants, got 5"}},
		{"id missing", appsBase + "apps: [{name: x}]\n", []string{"apps[0].id: required"}},
		{"id invalid", appsBase + "apps: [{id: Bad App}]\n", []string{
			`apps[0].id: must be 1 to 64 characters from a-z, 0-9, "_", "." and "-", got "Bad App"`}},
		{"id duplicate", appsBase + "apps: [{id: a}, {id: a}]\n", []string{`apps[1].id: duplicate app id "a" (first at apps[0])`}},
		{"unknown app field", appsBase + "apps: [{id: a, grant: [api]}]\n", []string{`apps[0].grant: unknown field (did you mean "grants"?)`}},
		{"name with a tab", appsBase + "apps: [{id: a, name: \"x\\ty\"}]\n", []string{
			`apps[0].name: must be text without control characters, got "x\ty"`}},
		{"name too long", appsBase + "apps: [{id: a, name: " + strings.Repeat("n", 129) + "}]\n", []string{
			`apps[0].name: must be 1 to 128 bytes, got "` + strings.Repeat("n", 64) + `…"`}},
		{"status unknown", appsBase + "apps: [{id: a, status: paused}]\n", []string{
			`apps[0].status: must be one of "active", "suspended", got "paused"`}},
		{"key is not a hash", appsBase + "apps: [{id: a, api_key_sha256: [lvk_secret]}]\n", []string{
			`apps[0].api_key_sha256[0]: must be a SHA-256 as 64 hex digits (the file holds hashes, never keys), got "lvk_secret"`}},
		{"key hash shared by two apps", appsBase + "apps: [{id: a, api_key_sha256: [" + hashA + "]}, {id: b, api_key_sha256: [" + strings.ToUpper(hashA) + "]}]\n", []string{
			"apps[1].api_key_sha256[0]: duplicate key hash (first at apps[0].api_key_sha256[0])"}},
		{"too many keys", appsBase + "apps: [{id: a, api_key_sha256: [" + strings.Repeat(hashA+",", 16) + hashA + "]}]\n", []string{
			"apps[0].api_key_sha256: at most 16 keys, got 17"}},
		{"grant names no route", appsBase + "apps: [{id: a, grants: [vidoe]}]\n", []string{
			`apps[0].grants[0]: unknown route "vidoe" (did you mean "video"?)`}},
		{"grant twice", appsBase + "apps: [{id: a, grants: [api, api]}]\n", []string{
			`apps[0].grants[1]: duplicate route "api" (first at grants[0])`}},
		{"rate zero", appsBase + "apps: [{id: a, limits: {rate: 0}}]\n", []string{
			"apps[0].limits.rate: must be greater than 0, got 0 (omit it for no rate limit)"}},
		{"rate negative", appsBase + "apps: [{id: a, limits: {rate: -1}}]\n", []string{
			"apps[0].limits.rate: must be a number from 0 to 1000000000, got -1"}},
		{"rate quoted", appsBase + "apps: [{id: a, limits: {rate: \"5\"}}]\n", []string{
			`apps[0].limits.rate: must be a number from 0 to 1000000000, got "5"`}},
		{"burst without rate", appsBase + "apps: [{id: a, limits: {burst: 5}}]\n", []string{"apps[0].limits.burst: needs rate"}},
		{"burst zero", appsBase + "apps: [{id: a, limits: {rate: 1, burst: 0}}]\n", []string{
			"apps[0].limits.burst: must be a number from 1 to 1000000000, got 0"}},
		{"burst fractional", appsBase + "apps: [{id: a, limits: {rate: 1, burst: 1.5}}]\n", []string{
			"apps[0].limits.burst: must be a number from 1 to 1000000000, got 1.5"}},
		{"quota incomplete", appsBase + "apps: [{id: a, limits: {quota: {}}}]\n", []string{
			"apps[0].limits.quota.per: required", "apps[0].limits.quota: needs at least one of requests, rows and bytes"}},
		{"quota rows zero", appsBase + "apps: [{id: a, limits: {quota: {rows: 0, bytes: 1125899906842625, per: 1h}}}]\n", []string{
			"apps[0].limits.quota.rows: must be a number from 1 to 1000000000000000, got 0",
			"apps[0].limits.quota.bytes: must be a number from 1 to 1125899906842624, got 1125899906842625"}},
		{"quota period too short", appsBase + "apps: [{id: a, limits: {quota: {requests: 5, per: 10ms}}}]\n", []string{
			`apps[0].limits.quota.per: must be from 1s to 8784h0m0s, got "10ms"`}},
		{"quota requests zero", appsBase + "apps: [{id: a, limits: {quota: {requests: 0, per: 1h}}}]\n", []string{
			"apps[0].limits.quota.requests: must be a number from 1 to 1000000000000, got 0"}},
		{"max_concurrency zero", appsBase + "apps: [{id: a, limits: {max_concurrency: 0}}]\n", []string{
			"apps[0].limits.max_concurrency: must be a number from 1 to 100000, got 0"}},
		{"route limit outside grants", appsBase + "apps: [{id: a, grants: [api], route_limits: {video: {rate: 1}}}]\n", []string{
			`apps[0].route_limits.video: route "video" is not in this app's grants`}},
		{"route limits is a list", appsBase + "apps: [{id: a, grants: [api], route_limits: [api]}]\n", []string{
			"apps[0].route_limits: must be a mapping of route names to {rate, burst, quota}, got a sequence"}},
		{"route limit unknown field", appsBase + "apps: [{id: a, grants: [api], route_limits: {api: {max_concurrency: 1}}}]\n", []string{
			"apps[0].route_limits.api.max_concurrency: unknown field"}},
		{"route auth unknown", head + upstreams + routes + "    auth: token\n", []string{
			`routes[0].auth: must be one of "none", "api_key", "hmac", "jwt", "forward", "basic", "client_cert", got "token"`}},
		{"anonymous limits with api_key", head + upstreams + routes + "    auth: api_key\n    anonymous_limits: {rate: 1}\n", []string{
			`routes[0].anonymous_limits: only allowed with auth: none (apps are limited by their own limits), got auth "api_key"`}},
		{"anonymous limits without rate", head + upstreams + routes + "    anonymous_limits: {burst: 3}\n", []string{
			"routes[0].anonymous_limits.rate: required"}},
		{"anonymous limits quota", head + upstreams + routes + "    anonymous_limits: {rate: 1, quota: {requests: 1, per: 1h}}\n", []string{
			"routes[0].anonymous_limits.quota: unknown field"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml))
			if err == nil || cfg != nil {
				t.Fatalf("Parse succeeded, want errors:\n%s", strings.Join(tt.want, "\n"))
			}
			if got := errorLines(t, err); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestAppsDefaults: omitted fields take their defaults; burst defaults to
// max(1, ceil(rate)); hashes are stored lower-case.
func TestAppsDefaults(t *testing.T) {
	withAnon := strings.Replace(appsBase, "    upstream: video\n", "    upstream: video\n    anonymous_limits: {rate: 2.5}\n", 1)
	cfg, err := Parse([]byte(withAnon + `apps:
  - id: a
    api_key_sha256: [` + strings.ToUpper(hashA) + `]
    grants: [video, api]
    limits: {rate: 0.2, quota: {requests: 10, per: 1h}}
    route_limits:
      video: {rate: 10}
  - {id: b, status: suspended, name: Bee}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []App{
		{ID: "a", Name: "a", Status: "active", APIKeySHA256: []string{hashA}, Grants: []string{"video", "api"},
			Limits:      AppLimits{Rate: 0.2, Burst: 1, Quota: &Quota{Requests: 10, Per: time.Hour}},
			RouteLimits: map[string]RouteLimit{"video": {Rate: 10, Burst: 10}}},
		{ID: "b", Name: "Bee", Status: "suspended"},
	}
	if !reflect.DeepEqual(cfg.Apps, want) {
		t.Errorf("apps = %+v\nwant %+v", cfg.Apps, want)
	}
	if r := cfg.Routes[1]; r.Auth != AuthAPIKey || r.AnonymousLimits != nil {
		t.Errorf("route video: %+v", r)
	}
	if r := cfg.Routes[0]; r.Auth != AuthNone || *r.AnonymousLimits != (AnonymousLimits{Rate: 2.5, Burst: 3}) {
		t.Errorf("route api: %+v", r)
	}
}

// TestAdminToken: a non-loopback admin listener needs token_file, which
// must hold a usable token.
func TestAdminToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "  s3cret-token-0123456789\n")
	empty := write("empty", " \n\n")
	short := write("short", "abc\n")
	twoLines := write("two", "0123456789abcdef\n0123456789abcdef\n")
	big := write("big", strings.Repeat("x", 5000))
	parse := func(admin string) []string {
		_, err := Parse([]byte("listen: \":8080\"\nadmin: " + admin + "\n" + upstreams + routes))
		if err == nil {
			return nil
		}
		return errorLines(t, err)
	}
	for _, ok := range []string{
		`{listen: "127.0.0.1:9090"}`, `{listen: "127.0.0.2:9090"}`, `{listen: "[::1]:9090"}`, `{listen: "localhost:9090"}`,
		`{listen: ":9090", token_file: ` + good + `}`, `{listen: "10.0.0.1:9090", token_file: ` + good + `}`,
	} {
		if errs := parse(ok); errs != nil {
			t.Errorf("%s: %v", ok, errs)
		}
	}
	for admin, want := range map[string]string{
		`{listen: ":9090"}`:                                   `admin.token_file: required when admin.listen is not a loopback address (127.0.0.0/8, ::1, localhost), got admin.listen ":9090"`,
		`{listen: "0.0.0.0:9090"}`:                            `admin.token_file: required when admin.listen is not a loopback address (127.0.0.0/8, ::1, localhost), got admin.listen "0.0.0.0:9090"`,
		`{listen: "10.1.2.3:9090"}`:                           `admin.token_file: required when admin.listen is not a loopback address (127.0.0.0/8, ::1, localhost), got admin.listen "10.1.2.3:9090"`,
		`{listen: "admin.local:9090"}`:                        `admin.token_file: required when admin.listen is not a loopback address (127.0.0.0/8, ::1, localhost), got admin.listen "admin.local:9090"`,
		`{listen: ":9090", token_file: ` + empty + `}`:        `admin.token_file: token file "` + empty + `" is empty`,
		`{listen: ":9090", token_file: ` + short + `}`:        `admin.token_file: token in "` + short + `" is shorter than 16 characters`,
		`{listen: ":9090", token_file: ` + twoLines + `}`:     `admin.token_file: token in "` + twoLines + `" must be one line of printable text`,
		`{listen: ":9090", token_file: ` + big + `}`:          `admin.token_file: token file "` + big + `" is larger than 4KiB`,
		`{listen: ":9090", token_file: ` + dir + `/missing}`:  `admin.token_file: file not found: "` + dir + `/missing"`,
		`{listen: "127.0.0.1:9090", token_file: ` + dir + `}`: `admin.token_file: not a regular file: "` + dir + `"`,
		`{listen: "127.0.0.1:9090", token_file: 5}`:           `admin.token_file: must be a string, got 5`,
	} {
		if errs := parse(admin); len(errs) != 1 || errs[0] != want {
			t.Errorf("%s:\n got %q\nwant %q", admin, errs, want)
		}
	}
	if tok, err := ReadTokenFile(good); err != nil || tok != "s3cret-token-0123456789" {
		t.Errorf("ReadTokenFile = %q, %v", tok, err)
	}
}

// TestAdminTokens: admin.tokens lists token files with a scope; every
// problem names its field path; a token in two files is refused (its scope
// would be ambiguous); any token satisfies the non-loopback rule; and
// ReadAdminTokens, which the gateway uses at start and on reload, yields
// token_file first with scope write.
func TestAdminTokens(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	w := write("write", "write-token-0123456789\n")
	r := write("read", "read-token-0123456789\n")
	r2 := write("read2", "  read-token-0123456789  \n") // the same token as r
	short := write("short", "abc\n")
	parse := func(admin string) (*Config, []string) {
		c, err := Parse([]byte("listen: \":8080\"\nadmin: " + admin + "\n" + upstreams + routes))
		if err == nil {
			return c, nil
		}
		return nil, errorLines(t, err)
	}
	c, errs := parse(`{listen: ":9090", token_file: ` + w + `, tokens: [{file: ` + r + `, scope: read}]}`)
	if errs != nil || len(c.Admin.Tokens) != 1 || c.Admin.Tokens[0] != (AdminToken{File: r, Scope: AdminScopeRead}) {
		t.Fatalf("token_file and a read token: %+v %v", c, errs)
	}
	toks, scopes, rerrs := ReadAdminTokens(c.Admin)
	if len(rerrs) != 0 || !slices.Equal(toks, []string{"write-token-0123456789", "read-token-0123456789"}) || !slices.Equal(scopes, []string{"write", "read"}) {
		t.Errorf("ReadAdminTokens = %q %q %v", toks, scopes, rerrs)
	}
	// A read token alone is a token: a non-loopback listener may use it
	// (levee is then read-only through the API, a valid lock-down).
	if _, errs := parse(`{listen: ":9090", tokens: [{file: ` + r + `, scope: read}]}`); errs != nil {
		t.Errorf("read token only: %v", errs)
	}
	if _, errs := parse(`{listen: ":9090", tokens: [{file: ` + w + `, scope: write}, {file: ` + r + `, scope: read}]}`); errs != nil {
		t.Errorf("write and read tokens: %v", errs)
	}
	for admin, want := range map[string][]string{
		`{listen: ":9090", tokens: []}`:                                                                          {`admin.token_file: required when admin.listen is not a loopback address (127.0.0.0/8, ::1, localhost), got admin.listen ":9090"`},
		`{listen: "127.0.0.1:9090", tokens: [{file: ` + r + `}]}`:                                                {`admin.tokens[0].scope: required`},
		`{listen: "127.0.0.1:9090", tokens: [{scope: read}]}`:                                                    {`admin.tokens[0].file: required`},
		`{listen: "127.0.0.1:9090", tokens: [{file: ` + r + `, scope: admin}]}`:                                  {`admin.tokens[0].scope: must be one of "read", "write", got "admin"`},
		`{listen: "127.0.0.1:9090", tokens: [{file: ` + r + `, scope: read, extra: 1}]}`:                         {`admin.tokens[0].extra: unknown field`},
		`{listen: "127.0.0.1:9090", tokens: {file: ` + r + `}}`:                                                  {`admin.tokens: must be a sequence, got a mapping`},
		`{listen: "127.0.0.1:9090", tokens: [` + r + `]}`:                                                        {`admin.tokens[0]: must be a mapping {file, scope}, got "` + r + `"`},
		`{listen: "127.0.0.1:9090", tokens: [{file: ` + short + `, scope: read}]}`:                               {`admin.tokens[0].file: token in "` + short + `" is shorter than 16 characters`},
		`{listen: "127.0.0.1:9090", tokens: [{file: ` + dir + `/missing, scope: read}]}`:                         {`admin.tokens[0].file: file not found: "` + dir + `/missing"`},
		`{listen: "127.0.0.1:9090", tokens: [{file: ` + r + `, scope: read}, {file: ` + r + `, scope: write}]}`:  {`admin.tokens[1].file: duplicate file "` + r + `" (first at admin.tokens[0])`},
		`{listen: "127.0.0.1:9090", tokens: [{file: ` + r + `, scope: read}, {file: ` + r2 + `, scope: write}]}`: {`admin.tokens[1].file: holds the same token as admin.tokens[0].file (one token, one scope)`},
		`{listen: "127.0.0.1:9090", token_file: ` + r + `, tokens: [{file: ` + r2 + `, scope: read}]}`:           {`admin.tokens[0].file: holds the same token as admin.token_file (one token, one scope)`},
	} {
		if _, errs := parse(admin); !slices.Equal(errs, want) {
			t.Errorf("%s:\n got %q\nwant %q", admin, errs, want)
		}
	}
	var many strings.Builder
	for i := range MaxAdminTokens + 1 {
		fmt.Fprintf(&many, "{file: %s, scope: read},", write(fmt.Sprint("t", i), fmt.Sprintf("token-number-%04d-0123456789", i)))
	}
	if _, errs := parse(`{listen: "127.0.0.1:9090", tokens: [` + many.String() + `]}`); !slices.Equal(errs, []string{fmt.Sprintf("admin.tokens: at most %d tokens, got %d", MaxAdminTokens, MaxAdminTokens+1)}) {
		t.Errorf("too many tokens: %q", errs)
	}
}

// TestAdminTokenModeAndHosts: admin.token is generate (the default) or
// none, none only on a loopback listener and neither beside token_file or
// tokens; admin.hosts lists distinct lower-case host names. Every refusal
// names the field and the value.
func TestAdminTokenModeAndHosts(t *testing.T) {
	tok := filepath.Join(t.TempDir(), "tok")
	if err := os.WriteFile(tok, []byte("write-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	parse := func(admin string) (*Config, []string) {
		c, err := Parse([]byte("listen: \":8080\"\nadmin: " + admin + "\n" + upstreams + routes))
		if err == nil {
			return c, nil
		}
		return nil, errorLines(t, err)
	}
	for admin, want := range map[string]Admin{
		`{listen: "127.0.0.1:9090"}`:                                         {Listen: "127.0.0.1:9090", Token: AdminTokenGenerate},
		`{listen: "127.0.0.1:9090", token: none}`:                            {Listen: "127.0.0.1:9090", Token: AdminTokenNone},
		`{listen: "[::1]:9090", token: none}`:                                {Listen: "[::1]:9090", Token: AdminTokenNone},
		`{listen: "localhost:9090", token: generate}`:                        {Listen: "localhost:9090", Token: AdminTokenGenerate},
		`{listen: "127.0.0.1:9090", hosts: [levee-admin, admin.internal]}`:   {Listen: "127.0.0.1:9090", Token: AdminTokenGenerate, Hosts: []string{"levee-admin", "admin.internal"}},
		`{listen: ":9090", token_file: ` + tok + `, hosts: [a.example.com]}`: {Listen: ":9090", TokenFile: tok, Token: AdminTokenGenerate, Hosts: []string{"a.example.com"}},
	} {
		c, errs := parse(admin)
		if errs != nil {
			t.Errorf("%s: %v", admin, errs)
			continue
		}
		if c.Admin.Listen != want.Listen || c.Admin.Token != want.Token || c.Admin.TokenFile != want.TokenFile || !slices.Equal(c.Admin.Hosts, want.Hosts) {
			t.Errorf("%s: %+v, want %+v", admin, c.Admin, want)
		}
	}
	for admin, want := range map[string][]string{
		`{listen: ":9090", token: none}`:                                                          {`admin.token: "none" (no token) is allowed only with a loopback admin.listen (127.0.0.0/8, ::1, localhost), got admin.listen ":9090"; set admin.token_file or admin.tokens instead`},
		`{listen: "10.0.0.1:9090", token: none}`:                                                  {`admin.token: "none" (no token) is allowed only with a loopback admin.listen (127.0.0.0/8, ::1, localhost), got admin.listen "10.0.0.1:9090"; set admin.token_file or admin.tokens instead`},
		`{listen: "127.0.0.1:9090", token: off}`:                                                  {`admin.token: must be one of "generate", "none", got "off"`},
		`{listen: "127.0.0.1:9090", token_file: ` + tok + `, token: none}`:                        {`admin.token: applies only without admin.token_file and admin.tokens (they set the tokens), got "none"`},
		`{listen: "127.0.0.1:9090", tokens: [{file: ` + tok + `, scope: read}], token: generate}`: {`admin.token: applies only without admin.token_file and admin.tokens (they set the tokens), got "generate"`},
		`{listen: "127.0.0.1:9090", hosts: [Admin.Example]}`:                                      {`admin.hosts[0]: must be a host name in lower case without port (labels of a-z, 0-9 and inner "-", at most 63 each), got "Admin.Example"`},
		`{listen: "127.0.0.1:9090", hosts: ["admin:9901"]}`:                                       {`admin.hosts[0]: must be a host name in lower case without port (labels of a-z, 0-9 and inner "-", at most 63 each), got "admin:9901"`},
		`{listen: "127.0.0.1:9090", hosts: [a.example, a.example]}`:                               {`admin.hosts[1]: duplicate host "a.example"`},
		`{listen: "127.0.0.1:9090", hosts: [5]}`:                                                  {`admin.hosts[0]: must be a string, got 5`},
		`{listen: "127.0.0.1:9090", hosts: a.example}`:                                            {`admin.hosts: must be a sequence, got "a.example"`},
	} {
		if _, errs := parse(admin); !slices.Equal(errs, want) {
			t.Errorf("%s:\n got %q\nwant %q", admin, errs, want)
		}
	}
}
