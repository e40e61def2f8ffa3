package gateway

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/client"
	"github.com/levee-gw/levee/internal/testsvc"
)

// bindNotesSQL: one table of notes shared by tenants, owners and apps.
const bindNotesSQL = `
CREATE TABLE notes (id int8 PRIMARY KEY, tenant_id text NOT NULL, owner text NOT NULL, app text NOT NULL, org int8 NOT NULL, body text);
INSERT INTO notes SELECT g,
  (ARRAY['acme','globex','initech'])[1 + g % 3],
  (ARRAY['user-1','user-2'])[1 + g % 2],
  (ARRAY['shop','other'])[1 + (g / 2) % 2],
  10 + g % 4,
  'note ' || g FROM generate_series(1, 30) g;
`

const (
	bindShopKey  = "lvk_shop-key-0123456789abcdefghijk"
	bindOtherKey = "lvk_other-key-0123456789abcdefghij"
)

func bindConfig(dsn, sqlitePath, jwks, stateDir string) string {
	return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
state_dir: %s
identity:
  jwt_issuers:
    corp:
      issuer: https://idp.test
      jwks_uri: %s
      audiences: [orders-api]
      algorithms: [RS256]
data_sources:
  pg:
    driver: postgres
    dsn: %s
    max_conns: 4
    statement_timeout: 2s
    connect_timeout: 1s
  lite:
    driver: sqlite
    path: %s
routes:
  - name: tenant-notes
    match: {path: /v1/tenant-notes}
    auth: jwt
    data:
      source: pg
      sql: SELECT id, tenant_id, body FROM notes WHERE tenant_id = :tenant AND id >= :min_id ORDER BY id
      params:
        tenant: {type: string, from: claim.tenant_id, max_len: 16}
        min_id: {type: int64, default: 0}
      cache: {ttl: 1h}
  - name: table-notes
    match: {path: /v1/table-notes}
    auth: jwt
    data:
      source: pg
      table: notes
      columns: [id, tenant_id, owner, body]
      filters: {id: [eq, gte, lt], owner: [eq]}
      row_filter: {column: tenant_id, from: claim.tenant_id}
      order: [id]
  - name: my-notes
    match: {path: /v1/my-notes}
    auth: jwt
    data:
      source: pg
      sql: SELECT id, owner, body FROM notes WHERE owner = :me ORDER BY id
      params:
        me: {type: string, from: subject}
  - name: org-notes
    match: {path: /v1/org-notes}
    auth: jwt
    data:
      source: pg
      sql: SELECT id, org FROM notes WHERE org = :org ORDER BY id
      params:
        org: {type: int64, from: claim.org}
  - name: key-notes
    match: {path: /v1/key-notes}
    auth: api_key
    data:
      source: pg
      table: notes
      columns: [id, app, body]
      filters: {id: [gte]}
      row_filter: [{column: app, from: app.id}]
      order: [id]
  - name: signed-notes
    match: {path: /v1/signed-notes}
    auth: hmac
    data:
      source: pg
      sql: SELECT id, app FROM notes WHERE app = :app ORDER BY id
      params:
        app: {type: string, from: app.id}
  - name: lite-customers
    match: {path: /v1/lite-customers}
    auth: jwt
    data:
      source: lite
      table: customers
      columns: [id, name, region]
      filters: {id: [gte]}
      row_filter: {column: region, from: claim.region}
      order: [id]
apps:
  - id: shop
    api_key_sha256: [%s]
    grants: [tenant-notes, table-notes, my-notes, org-notes, key-notes, signed-notes, lite-customers]
  - id: other
    api_key_sha256: [%s]
    grants: [key-notes, signed-notes]
`, dataQuote(stateDir), jwks, dataQuote(dsn), dataQuote(sqlitePath), keyHash(bindShopKey), keyHash(bindOtherKey))
}

// bindAnswer is a data route's JSON answer or refusal.
type bindAnswer struct {
	status int
	rows   [][]string // each row's values as text, in column order
	reason string
	param  string
	detail string
}

func (a bindAnswer) String() string {
	return fmt.Sprintf("%d rows=%v reason=%q parameter=%q detail=%q", a.status, a.rows, a.reason, a.param, a.detail)
}

// readBindAnswer reads a data route's answer: each row's values as text,
// sorted (a JSON row is an object: its order is not compared).
func readBindAnswer(t *testing.T, resp *http.Response) bindAnswer {
	t.Helper()
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := bindAnswer{status: resp.StatusCode}
	if resp.StatusCode != http.StatusOK {
		var r struct{ Reason, Parameter, Detail string }
		json.Unmarshal(raw, &r)
		a.reason, a.param, a.detail = r.Reason, r.Parameter, r.Detail
		return a
	}
	var body struct {
		Rows []map[string]any `json:"rows"`
	}
	d := json.NewDecoder(strings.NewReader(string(raw)))
	d.UseNumber()
	if err := d.Decode(&body); err != nil {
		t.Fatalf("answer %s: %v", raw, err)
	}
	for _, r := range body.Rows {
		row := make([]string, 0, len(r))
		for _, v := range r {
			row = append(row, fmt.Sprint(v))
		}
		slices.Sort(row)
		a.rows = append(a.rows, row)
	}
	return a
}

// psqlRows is the reference answer, each row's values as text, sorted as
// readBindAnswer sorts them.
func psqlRows(t *testing.T, pg *testsvc.Postgres, sql string) [][]string {
	t.Helper()
	var out [][]string
	for _, r := range pg.QueryText(t, sql) {
		var row []string
		for _, v := range r {
			row = append(row, *v)
		}
		slices.Sort(row)
		out = append(out, row)
	}
	return out
}

// TestIdentityBoundDataOverPostgres (#26.7): data routes whose tenant,
// owner or app comes from the caller's verified identity, over a real
// PostgreSQL and a real JWKS endpoint. Each tenant's token sees exactly
// the rows psql gives for the same WHERE; a client that sends the bound
// parameter, in any form, is refused 400 unknown_parameter naming it; a
// token without the claim 403 identity_claim_missing; a claim that is not
// the parameter's type 403 identity_claim_invalid; API-key and HMAC apps
// get their own rows by app.id; the database's statement log holds the
// values only as bind parameters; the same row filter on SQLite; the
// OpenAPI document shows the security schemes and no bound parameter.
func TestIdentityBoundDataOverPostgres(t *testing.T) {
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, bindNotesSQL)
	// The reference answers, taken before the statement log is on (psql's
	// own statements carry their values as literals).
	want := map[string][][]string{}
	for _, tenant := range []string{"acme", "globex"} {
		want["sql "+tenant] = psqlRows(t, pg, "SELECT id, tenant_id, body FROM notes WHERE tenant_id = '"+tenant+"' ORDER BY id")
		want["table "+tenant] = psqlRows(t, pg, "SELECT id, tenant_id, owner, body FROM notes WHERE tenant_id = '"+tenant+"' ORDER BY id")
		want["table gte "+tenant] = psqlRows(t, pg, "SELECT id, tenant_id, owner, body FROM notes WHERE tenant_id = '"+tenant+"' AND id >= 10 AND owner = 'user-2' ORDER BY id")
	}
	want["me user-1"] = psqlRows(t, pg, "SELECT id, owner, body FROM notes WHERE owner = 'user-1' ORDER BY id")
	want["org 11"] = psqlRows(t, pg, "SELECT id, org FROM notes WHERE org = 11 ORDER BY id")
	want["app shop"] = psqlRows(t, pg, "SELECT id, app, body FROM notes WHERE app = 'shop' ORDER BY id")
	want["app other"] = psqlRows(t, pg, "SELECT id, app, body FROM notes WHERE app = 'other' ORDER BY id")
	want["signed other"] = psqlRows(t, pg, "SELECT id, app FROM notes WHERE app = 'other' ORDER BY id")
	if len(want["sql acme"]) != 10 || len(want["table gte globex"]) == 0 || len(want["app other"]) == 0 {
		t.Fatalf("reference rows: %v", want)
	}
	pg.Exec(t, "ALTER SYSTEM SET log_statement = 'all'")
	pg.Exec(t, "SELECT pg_reload_conf()")

	sqlitePath, lite := sqliteOrders(t)
	rk, _ := rsa.GenerateKey(rand.Reader, 2048)
	rs := jwtKey{"r1", "RS256", rk}
	idp := newJWKSServer(t, rs.public())
	h := start(t, bindConfig(pg.DSN, sqlitePath, idp.srv.URL, t.TempDir()))
	// The log shows statements once the reload took effect: a marker
	// statement run through levee's own driver would be the cleanest, but
	// any statement will do; psql's SELECT 1 is polled for.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(pg.LogText(t), "statement: SELECT 'bind-log-on'") {
		if time.Now().After(deadline) {
			t.Fatal("log_statement = all did not take effect within 10 s")
		}
		pg.Exec(t, "SELECT 'bind-log-on'")
		time.Sleep(20 * time.Millisecond)
	}
	logFrom := len(pg.LogText(t))

	rh := map[string]any{"alg": "RS256", "kid": "r1"}
	tok := func(kv ...any) string { return rs.sign(rh, jwtClaims(kv...)) }
	acme, globex := tok("tenant_id", "acme"), tok("tenant_id", "globex")
	get := func(path, token string) bindAnswer {
		t.Helper()
		if token == "" {
			return readBindAnswer(t, h.get(path))
		}
		return readBindAnswer(t, h.get(path, "Authorization", "Bearer "+token))
	}
	expectRows := func(step string, got bindAnswer, want [][]string) {
		t.Helper()
		if got.status != 200 || !slices.EqualFunc(got.rows, want, slices.Equal[[]string]) {
			t.Errorf("%s: %v\nwant 200 rows %v", step, got, want)
		}
	}
	expectRefusal := func(step string, got bindAnswer, status int, reason, param string) {
		t.Helper()
		if got.status != status || got.reason != reason || got.param != param {
			t.Errorf("%s: %v, want %d %s naming %q", step, got, status, reason, param)
		}
	}

	t.Run("each tenant sees its own rows", func(t *testing.T) {
		// Twice each, alternating: the cached answer is the tenant's own.
		for range 2 {
			expectRows("sql acme", get("/v1/tenant-notes", acme), want["sql acme"])
			expectRows("sql globex", get("/v1/tenant-notes", globex), want["sql globex"])
		}
		expectRows("table acme", get("/v1/table-notes", acme), want["table acme"])
		expectRows("table globex", get("/v1/table-notes", globex), want["table globex"])
		expectRows("table globex with the client's filters", get("/v1/table-notes?id=gte.10&owner=eq.user-2", globex), want["table gte globex"])
		// A count counts the tenant's rows only.
		resp := h.get("/v1/table-notes", "Authorization", "Bearer "+globex, "Prefer", "count=exact")
		cr := resp.Header.Get("Content-Range")
		expectRows("table globex counted", readBindAnswer(t, resp), want["table globex"])
		if wantCR := fmt.Sprintf("/%d", len(want["table globex"])); !strings.HasSuffix(cr, wantCR) {
			t.Errorf("Content-Range %q, want a total of %s", cr, wantCR)
		}
		// A client filter that names another tenant's row finds nothing.
		acmeRow := want["table acme"][0][0]
		if got := get("/v1/table-notes?id=eq."+acmeRow, globex); got.status != 200 || len(got.rows) != 0 {
			t.Errorf("globex asking for acme's row %s: %v", acmeRow, got)
		}
	})

	t.Run("the client cannot send a bound parameter", func(t *testing.T) {
		expectRefusal("sql tenant=", get("/v1/tenant-notes?tenant=globex", acme), 400, "unknown_parameter", "tenant")
		expectRefusal("sql tenant= empty", get("/v1/tenant-notes?tenant=", acme), 400, "unknown_parameter", "tenant")
		expectRefusal("subject me=", get("/v1/my-notes?me=user-2", tok()), 400, "unknown_parameter", "me")
		for _, q := range []string{
			"tenant_id=eq.globex", "tenant_id=not.eq.globex", "tenant_id=in.(acme,globex)", "tenant_id=is.null",
			"or=(tenant_id.eq.globex,id.eq.1)", "and=(id.gte.1,tenant_id.eq.globex)", "or=(id.eq.1,tenant_id.not.eq.acme)", "or=(id.eq.1,and(id.gte.2,tenant_id.eq.globex))",
			"id=gte.1&tenant_id=eq.globex",
		} {
			expectRefusal("table "+q, get("/v1/table-notes?"+q, acme), 400, "unknown_parameter", "tenant_id")
		}
		req, _ := http.NewRequest("GET", h.base+"/v1/key-notes?app=eq.other", nil)
		req.Header.Set("X-Api-Key", bindShopKey)
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		expectRefusal("api key app=", readBindAnswer(t, resp), 400, "unknown_parameter", "app")
	})

	t.Run("an identity without the value is refused 403", func(t *testing.T) {
		expectRefusal("no claim", get("/v1/tenant-notes", tok()), 403, "identity_claim_missing", "tenant")
		expectRefusal("no claim, table", get("/v1/table-notes", tok()), 403, "identity_claim_missing", "tenant_id")
		expectRefusal("array claim", get("/v1/tenant-notes", tok("tenant_id", []string{"acme", "globex"})), 403, "identity_claim_missing", "tenant")
		expectRefusal("object claim", get("/v1/table-notes", tok("tenant_id", map[string]any{"id": "acme"})), 403, "identity_claim_missing", "tenant_id")
		expectRefusal("bool claim", get("/v1/tenant-notes", tok("tenant_id", true)), 403, "identity_claim_missing", "tenant")
		expectRefusal("no subject", get("/v1/my-notes", tok("sub", nil)), 403, "identity_claim_missing", "me")
		expectRefusal("too long", get("/v1/tenant-notes", tok("tenant_id", strings.Repeat("a", 17))), 403, "identity_claim_invalid", "tenant")
		expectRefusal("string for int64", get("/v1/org-notes", tok("org", "eleven")), 403, "identity_claim_invalid", "org")
		expectRefusal("fraction for int64", get("/v1/org-notes", tok("org", 11.5)), 403, "identity_claim_invalid", "org")
		// Not a claim the route binds: nothing about it is refused.
		expectRows("number claim", get("/v1/org-notes", tok("org", 11)), want["org 11"])
		expectRows("string number claim", get("/v1/org-notes", tok("org", "11")), want["org 11"])
		expectRows("subject", get("/v1/my-notes", tok()), want["me user-1"])
	})

	t.Run("api key and hmac apps bound by app.id", func(t *testing.T) {
		for _, c := range []struct{ key, want string }{{bindShopKey, "app shop"}, {bindOtherKey, "app other"}} {
			req, _ := http.NewRequest("GET", h.base+"/v1/key-notes", nil)
			req.Header.Set("X-Api-Key", c.key)
			resp, err := h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			expectRows(c.want, readBindAnswer(t, resp), want[c.want])
		}
		secret := sha256.Sum256([]byte(bindOtherKey))
		for _, path := range []string{"/v1/signed-notes", "/v1/signed-notes?app=shop"} {
			req, _ := http.NewRequest("GET", h.base+path, nil)
			if err := client.Sign(req, keyHash(bindOtherKey)[:12], secret[:], nil, time.Now()); err != nil {
				t.Fatal(err)
			}
			resp, err := h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got := readBindAnswer(t, resp)
			if strings.Contains(path, "?") {
				expectRefusal("hmac app=", got, 400, "unknown_parameter", "app")
			} else {
				expectRows("hmac other", got, want["signed other"])
			}
		}
	})

	t.Run("the statements carry the values as bind parameters only", func(t *testing.T) {
		logged := pg.LogText(t)[logFrom:]
		var statements, params int
		for _, line := range strings.Split(logged, "\n") {
			if !strings.Contains(line, "notes") && !strings.Contains(line, "parameters:") {
				continue
			}
			switch {
			case strings.Contains(line, "parameters:"):
				params++
			case strings.Contains(line, "execute") || strings.Contains(line, "statement:"):
				statements++
				for _, v := range []string{"acme", "globex", "user-1", "'shop'", "'other'", "= 11"} {
					if strings.Contains(line, v) {
						t.Errorf("a statement carries %s as text: %s", v, line)
					}
				}
			}
		}
		if !strings.Contains(logged, `WHERE "tenant_id" = $1`) || !strings.Contains(logged, "tenant_id = $1") ||
			!strings.Contains(logged, "$1 = 'acme'") || !strings.Contains(logged, "$1 = 'globex'") || statements < 8 || params < 8 {
			t.Errorf("the log shows %d statements and %d parameter lines; want the bound forms:\n%s", statements, params, lastLinesOf(logged, 40))
		}
		t.Logf("statement log: %d statements on notes, %d parameter lines, none with a value as text", statements, params)
	})

	t.Run("sqlite row filter", func(t *testing.T) {
		rows, err := lite.Query(`SELECT id, name, region FROM customers WHERE region = ? ORDER BY id`, "north")
		if err != nil {
			t.Fatal(err)
		}
		var ref [][]string
		for rows.Next() {
			var id, name, region string
			rows.Scan(&id, &name, &region)
			row := []string{id, name, region}
			slices.Sort(row)
			ref = append(ref, row)
		}
		rows.Close()
		if len(ref) == 0 {
			t.Fatal("no reference rows")
		}
		expectRows("sqlite north", get("/v1/lite-customers", tok("region", "north")), ref)
		expectRefusal("sqlite region=", get("/v1/lite-customers?region=eq.south", tok("region", "north")), 400, "unknown_parameter", "region")
		expectRefusal("sqlite no claim", get("/v1/lite-customers", tok()), 403, "identity_claim_missing", "region")
	})

	t.Run("openapi", func(t *testing.T) {
		doc, _ := fetchOpenAPI(t, h, "")
		paths := doc["paths"].(map[string]any)
		op := paths["/v1/tenant-notes"].(map[string]any)["get"].(map[string]any)
		raw, _ := json.Marshal(op)
		if !strings.Contains(string(raw), `"security":[{"jwt":[]}]`) || strings.Contains(string(raw), `"name":"tenant"`) ||
			!strings.Contains(string(raw), `"name":"min_id"`) || !strings.Contains(string(raw), "identity_claim_missing") {
			t.Errorf("tenant-notes operation: %s", raw)
		}
		tbl, _ := json.Marshal(paths["/v1/table-notes"])
		if strings.Contains(string(tbl), `"name":"tenant_id"`) {
			t.Errorf("table-notes shows its bound column as a filter: %s", tbl)
		}
		for path, scheme := range map[string]string{"/v1/key-notes": "api_key", "/v1/signed-notes": "hmac"} {
			b, _ := json.Marshal(paths[path])
			if !strings.Contains(string(b), `{"`+scheme+`":[]}`) {
				t.Errorf("%s has no %s security: %s", path, scheme, b)
			}
		}
		schemes, _ := json.Marshal(doc["components"].(map[string]any)["securitySchemes"])
		if !strings.Contains(string(schemes), `"bearerFormat":"JWT"`) {
			t.Errorf("security schemes: %s", schemes)
		}
	})
}

func lastLinesOf(s string, n int) string {
	lines := strings.Split(s, "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
