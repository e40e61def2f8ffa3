package gateway

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/levee-gw/levee/internal/config"
)

// boundCase is one edge value of an app's (or a route's) limits, written
// for the file and, where the admin API takes the same value, as JSON.
type boundCase struct {
	name string
	// app is the YAML of the app's fields after id, key and grants
	// (limits, route_limits, name); route is added to the keyed route
	// (anonymous_limits go on the open route instead).
	app, anon string
	// json is the same app for POST /api/v1/apps, after id and grants;
	// "" when the API has no equivalent (the file's 0 and the API's 0
	// mean different things).
	json string
	// valid is what both must decide; the test also checks that validate
	// and run agree whatever it says.
	valid bool
}

const boundKey = "lvk_bound-key-0123456789abcdefghijk"

// TestValidateAgreesWithRun feeds the same edge values of every bound an
// app's limits have (rate, burst, burst × interval, quota requests and
// period, max_concurrency, name length, key and grant counts; a route's
// anonymous limits) to `levee validate`'s path (config.Load) and to `levee
// run`'s (gateway.New and Start, seeding the app into the store and
// publishing it to the request path), and to the admin API (the store's
// validation, then the same publishing). What validate accepts, run
// serves: the app's key gets 200, never the 401 of an app dropped because
// a later check refused it (`rate: 0.0000001` once passed validate and
// then did exactly that). What validate refuses, run refuses to start with,
// and the admin API refuses with 422.
func TestValidateAgreesWithRun(t *testing.T) {
	up, _ := backend(t, "up")
	routes := func(n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "  - {name: r%d, match: {path_prefix: /r%d/}, upstream: u, auth: api_key}\n", i, i)
		}
		return b.String()
	}
	keys := func(n int) string {
		hs := []string{keyHash(boundKey)}
		for i := 1; i < n; i++ {
			hs = append(hs, keyHash(fmt.Sprintf("lvk_other-%d-0123456789abcdefghij", i)))
		}
		return "[" + strings.Join(hs, ", ") + "]"
	}
	grants := func(n int) string {
		gs := []string{"keyed"}
		for i := 1; i < n; i++ {
			gs = append(gs, fmt.Sprintf("r%d", i))
		}
		return "[" + strings.Join(gs, ", ") + "]"
	}
	cases := []boundCase{
		{"rate below one per 1e6 s", `limits: {rate: 0.0000001}`, "", `"limits":{"rate":0.0000001}`, false},
		{"rate just below one per 1e6 s", `limits: {rate: 0.00000099}`, "", `"limits":{"rate":0.00000099}`, false},
		{"rate one per 1e6 s", `limits: {rate: 0.000001}`, "", `"limits":{"rate":0.000001}`, true},
		{"rate 1e9", `limits: {rate: 1000000000}`, "", `"limits":{"rate":1000000000}`, true},
		{"rate above 1e9", `limits: {rate: 1000000001}`, "", `"limits":{"rate":1000000001}`, false},
		{"burst 1", `limits: {rate: 1, burst: 1}`, "", `"limits":{"rate":1,"burst":1}`, true},
		{"burst 1e9", `limits: {rate: 1, burst: 1000000000}`, "", `"limits":{"rate":1,"burst":1000000000}`, true},
		{"burst above 1e9", `limits: {rate: 1000, burst: 1000000001}`, "", `"limits":{"rate":1000,"burst":1000000001}`, false},
		{"burst × interval at the cap", `limits: {rate: 0.000001, burst: 1000}`, "", `"limits":{"rate":0.000001,"burst":1000}`, true},
		{"burst × interval over the cap", `limits: {rate: 0.000001, burst: 1001}`, "", `"limits":{"rate":0.000001,"burst":1001}`, false},
		{"burst × interval over the cap, slow rate", `limits: {rate: 0.5, burst: 500000001}`, "", `"limits":{"rate":0.5,"burst":500000001}`, false},
		{"default burst of the slowest rate", `limits: {rate: 0.000001, quota: {requests: 1, per: 1s}}`, "", `"limits":{"rate":0.000001,"quota":{"requests":1,"per":"1s"}}`, true},
		{"quota of 1", `limits: {quota: {requests: 1, per: 1h}}`, "", `"limits":{"quota":{"requests":1,"per":"1h"}}`, true},
		{"quota of 1e12", `limits: {quota: {requests: 1000000000000, per: 1h}}`, "", `"limits":{"quota":{"requests":1000000000000,"per":"1h"}}`, true},
		{"quota above 1e12", `limits: {quota: {requests: 1000000000001, per: 1h}}`, "", `"limits":{"quota":{"requests":1000000000001,"per":"1h"}}`, false},
		{"quota per 1s", `limits: {quota: {requests: 5, per: 1s}}`, "", `"limits":{"quota":{"requests":5,"per":"1s"}}`, true},
		{"quota per under 1s", `limits: {quota: {requests: 5, per: 999ms}}`, "", `"limits":{"quota":{"requests":5,"per":"999ms"}}`, false},
		{"quota per 366 days", `limits: {quota: {requests: 5, per: 8784h}}`, "", `"limits":{"quota":{"requests":5,"per":"8784h"}}`, true},
		{"quota per over 366 days", `limits: {quota: {requests: 5, per: 8785h}}`, "", `"limits":{"quota":{"requests":5,"per":"8785h"}}`, false},
		{"max_concurrency 1", `limits: {max_concurrency: 1}`, "", `"limits":{"max_concurrency":1}`, true},
		{"max_concurrency 100000", `limits: {max_concurrency: 100000}`, "", `"limits":{"max_concurrency":100000}`, true},
		{"max_concurrency above 100000", `limits: {max_concurrency: 100001}`, "", `"limits":{"max_concurrency":100001}`, false},
		{"route limit below one per 1e6 s", `route_limits: {keyed: {rate: 0.0000001}}`, "", `"route_limits":{"keyed":{"rate":0.0000001}}`, false},
		{"route limit one per 1e6 s", `route_limits: {keyed: {rate: 0.000001}}`, "", `"route_limits":{"keyed":{"rate":0.000001}}`, true},
		{"route limit burst over the cap", `route_limits: {keyed: {rate: 0.000001, burst: 1001}}`, "", `"route_limits":{"keyed":{"rate":0.000001,"burst":1001}}`, false},
		{"name of 128 bytes", `name: ` + strings.Repeat("n", 128), "", `"name":"` + strings.Repeat("n", 128) + `"`, true},
		{"name of 129 bytes", `name: ` + strings.Repeat("n", 129), "", `"name":"` + strings.Repeat("n", 129) + `"`, false},
		{"anonymous rate one per 1e6 s", "", `{rate: 0.000001}`, "", true},
		{"anonymous rate below one per 1e6 s", "", `{rate: 0.0000001}`, "", false},
		{"anonymous burst over the cap", "", `{rate: 0.000001, burst: 1001}`, "", false},
	}
	// Counts: 16 keys and 256 grants fit, one more of either does not.
	type countCase struct {
		name        string
		keys, grant int
		valid       bool
	}
	for _, c := range []countCase{{"16 keys", 16, 1, true}, {"17 keys", 17, 1, false}, {"256 grants", 1, 256, true}, {"257 grants", 1, 257, false}} {
		cases = append(cases, boundCase{name: c.name, app: "#keys " + keys(c.keys) + " grants " + grants(c.grant), valid: c.valid})
	}

	yamlOf := func(c boundCase) string {
		key, grant := keys(1), grants(1)
		app := c.app
		if strings.HasPrefix(app, "#keys ") {
			k, g, _ := strings.Cut(strings.TrimPrefix(app, "#keys "), " grants ")
			key, grant, app = k, g, ""
		}
		anon := ""
		if c.anon != "" {
			anon = ", anonymous_limits: " + c.anon
		}
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  u: {endpoints: [{address: %s}]}
routes:
  - {name: keyed, match: {path_prefix: /keyed/}, upstream: u, auth: api_key}
  - {name: open, match: {path_prefix: /open/}, upstream: u%s}
%sapps:
  - id: edge
    api_key_sha256: %s
    grants: %s
    %s
`, hostPort(up), anon, routes(257)[len(routes(1)):], key, grant, app)
	}

	// The admin API's view: one levee, each case posted as a new app.
	ref := start(t, yamlOf(boundCase{}))
	refIn := &instance{t: t, g: ref.g, admin: ref.admin}

	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			y := yamlOf(c)
			_, verr := config.Parse([]byte(y))
			validated := verr == nil
			if validated != c.valid {
				t.Errorf("levee validate: accepted = %v, want %v (%v)", validated, c.valid, verr)
			}
			if !validated {
				// levee run reads the file with the same function, so it
				// refuses to start with the same errors.
				h := &harness{t: t, cfgPath: t.TempDir() + "/levee.yaml"}
				h.writeConfig(y)
				if _, err := New(Options{Load: func() (*config.Config, error) { return config.Load(h.cfgPath) }, LogOutput: io.Discard}); err == nil {
					t.Errorf("levee validate refused it (%v) but levee run's New accepted it", verr)
				} else if err.Error() != verr.Error() {
					t.Errorf("levee run refused it with %q, levee validate with %q", err, verr)
				}
			} else {
				h := start(t, y)
				path := "/keyed/"
				if c.anon != "" {
					path = "/open/"
				}
				resp := h.get(path, "X-Api-Key", boundKey)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("levee validate accepted it, but levee run answers the app's key %d %s (logs: %s)", resp.StatusCode, body, h.logs.String())
				}
			}
			if c.json == "" {
				return
			}
			id := fmt.Sprintf("api-%d", i)
			status, doc := refIn.api("POST", "/api/v1/apps", `{"id":"`+id+`","grants":["keyed"],`+c.json+`}`)
			if (status == http.StatusCreated) != c.valid || (status != http.StatusCreated && status != http.StatusUnprocessableEntity) {
				t.Errorf("admin API: %d %v, want %v", status, doc, map[bool]string{true: "201", false: "422"}[c.valid])
			}
			if status != http.StatusCreated {
				return
			}
			status, doc = refIn.api("POST", "/api/v1/apps/"+id+"/keys", "")
			key, _ := doc["key"].(string)
			if status != http.StatusCreated || key == "" {
				t.Fatalf("key-create: %d %v", status, doc)
			}
			resp := ref.get("/keyed/", "X-Api-Key", key)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("the admin API accepted it, but the app's key gets %d %s", resp.StatusCode, body)
			}
		})
	}
}
