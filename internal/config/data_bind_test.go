package config

import (
	"slices"
	"strings"
	"testing"
)

// bindYAML is dataYAML with a jwt issuer and one more route, body.
func bindYAML(t *testing.T, route string) string {
	return strings.Replace(dataYAML(t, route), "data_sources:", strings.TrimPrefix(jwtIssuer, "")+"data_sources:", 1)
}

const boundSQL = `
  - name: mine
    match: {path: /v1/mine}
    auth: %AUTH%
    data:
      source: sales
      sql: SELECT id FROM orders WHERE tenant = :tenant AND owner = :owner AND app = :app AND region = :region
      params:
        tenant: {type: string, from: claim.tenant_id, max_len: 64}
        owner: {type: string, from: subject}
        app: {type: string, from: app.id}
        region: {type: string}
`

const boundTable = `
  - name: rows
    match: {path: /v1/rows}
    auth: jwt
    data:
      source: local
      table: customers
      columns: [id, tenant_id, region, org]
      filters: {region: [eq]}
      row_filter: %RF%
`

// TestDataBindConfig: bound parameters and row filters parse; the route's
// bound claims and version follow them.
func TestDataBindConfig(t *testing.T) {
	c, err := Parse([]byte(bindYAML(t, strings.ReplaceAll(boundSQL, "%AUTH%", "jwt"))))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Routes[2].Data
	if got := d.BoundClaims(); !slices.Equal(got, []string{"tenant_id"}) || !d.Bound() {
		t.Fatalf("bound claims %v", got)
	}
	if d.Params["tenant"].From != "claim.tenant_id" || d.Params["region"].From != "" {
		t.Fatalf("params %+v", d.Params)
	}
	for _, rf := range []string{"{column: tenant_id, from: claim.tenant_id}", "[{column: tenant_id, from: claim.tenant_id}, {column: org, from: subject}]"} {
		c, err := Parse([]byte(bindYAML(t, strings.ReplaceAll(boundTable, "%RF%", rf))))
		if err != nil {
			t.Fatalf("%s: %v", rf, err)
		}
		d := c.Routes[2].Data
		if len(d.RowFilter) == 0 || d.RowFilter[0] != (DataRowFilter{Column: "tenant_id", From: "claim.tenant_id"}) || !slices.Equal(d.BoundClaims(), []string{"tenant_id"}) {
			t.Fatalf("%s: row filters %+v", rf, d.RowFilter)
		}
		if c.Routes[1].Data.Bound() {
			t.Fatal("a route without from binds nothing")
		}
	}
}

// TestDataBindRejects: each mistake is refused naming its field.
func TestDataBindRejects(t *testing.T) {
	sql := func(auth string) string { return strings.ReplaceAll(boundSQL, "%AUTH%", auth) }
	table := func(rf string) string { return strings.ReplaceAll(boundTable, "%RF%", rf) }
	for _, tc := range []struct{ name, route, want string }{
		{"claim without jwt", sql("api_key"), "routes[2].data.params.tenant.from: claim.tenant_id needs auth: jwt on the route"},
		{"subject without jwt", sql("hmac"), "routes[2].data.params.owner.from: subject needs auth: jwt"},
		{"app.id without auth", strings.ReplaceAll(sql("none"), "from: claim.tenant_id", "from: app.id"), `routes[2].data.params.app.from: app.id needs an auth that identifies an app (api_key, hmac, jwt, basic or client_cert), got auth "none"`},
		{"bad source", strings.Replace(sql("jwt"), "claim.tenant_id", "header.x", 1), `routes[2].data.params.tenant.from: want app.id, subject or claim.<name>, got "header.x"`},
		{"empty claim", strings.Replace(sql("jwt"), "claim.tenant_id", "claim.", 1), `routes[2].data.params.tenant.from: want app.id, subject or claim.<name>`},
		{"required with from", strings.Replace(sql("jwt"), "from: subject}", "from: subject, required: true}", 1), "routes[2].data.params.owner.required: does not apply with from"},
		{"default with from", strings.Replace(sql("jwt"), "from: subject}", "from: subject, default: x}", 1), "routes[2].data.params.owner.default: does not apply with from"},
		{"row filter not a column", table("{column: owner, from: subject}"), `routes[2].data.row_filter.column: must be one of the route's columns (id, tenant_id, region, org), got "owner"`},
		{"row filter is a filter", table("{column: region, from: subject}"), `routes[2].data.row_filter.column: "region" is also in filters`},
		{"row filter twice", table("[{column: org, from: subject}, {column: org, from: app.id}]"), `routes[2].data.row_filter[1].column: column "org" filtered twice`},
		{"row filter bad from", table("{column: org, from: cookie}"), `routes[2].data.row_filter.from: want app.id`},
		{"row filter without jwt", strings.Replace(table("{column: org, from: claim.org}"), "auth: jwt", "auth: hmac", 1), "routes[2].data.row_filter.from: claim.org needs auth: jwt"},
		{"row filter in sql mode", strings.Replace(sql("jwt"), "      params:", "      row_filter: {column: id, from: subject}\n      params:", 1), "routes[2].data.row_filter: only applies to a table-mode route"},
	} {
		_, err := Parse([]byte(bindYAML(t, tc.route)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v\nwant %s", tc.name, err, tc.want)
		}
	}
}
