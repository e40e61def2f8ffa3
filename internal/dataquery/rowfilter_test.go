package dataquery

import (
	"net/url"
	"reflect"
	"strings"
	"testing"
)

// TestRowFilters: a row filter is an equality ANDed first, its value a
// bind argument checked against the column's kind, part of the canonical
// parameters; a request cannot filter the column in any form.
func TestRowFilters(t *testing.T) {
	spec := customersSpec()
	delete(spec.Filters, "region")
	spec.RowFilters = []string{"region"}
	q := mustTable(t, spec, nil, Postgres)
	b, err := q.Bind(url.Values{"region": {"north'; DROP TABLE x; --"}, "id": {"gte.3"}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := customersSelect + ` WHERE "region" = $1 AND "id" >= $2`; b.SQL != want {
		t.Fatalf("SQL %s\nwant %s", b.SQL, want)
	}
	if !reflect.DeepEqual(b.Args, []any{"north'; DROP TABLE x; --", int64(3)}) {
		t.Fatalf("args %v", b.Args)
	}
	other, _ := q.Bind(url.Values{"region": {"south"}, "id": {"gte.3"}}, false)
	if b.Params == other.Params || !strings.HasPrefix(other.Params, "region=") {
		t.Fatalf("canonical parameters %q and %q: a cache key would be shared", b.Params, other.Params)
	}
	for _, c := range []struct{ q, param, reason string }{
		{"", "region", ReasonIdentityClaimMissing},
		{"or=(region.eq.south,id.eq.1)&region=north", "region", ReasonUnknownParameter},
		{"and=(id.eq.1,or(region.eq.south))&region=north", "region", ReasonUnknownParameter},
		{"region=north&region=south", "region", ReasonInvalidParameter},
	} {
		vals, _ := url.ParseQuery(c.q)
		_, err := q.Bind(vals, false)
		e, ok := err.(*Error)
		if !ok || e.Param != c.param || e.Reason != c.reason {
			t.Errorf("%q: %v, want %s naming %s", c.q, err, c.reason, c.param)
		}
	}
	// A value of the wrong kind is refused as the column's value.
	spec.RowFilters = []string{"id"}
	delete(spec.Filters, "id")
	q = mustTable(t, spec, nil, SQLite)
	if _, err := q.Bind(url.Values{"id": {"seven"}}, false); err == nil || err.(*Error).Param != "id" || err.(*Error).Reason != ReasonInvalidParameter {
		t.Errorf("id=seven: %v", err)
	}
	if b, err := q.Bind(url.Values{"id": {"7"}}, false); err != nil || !strings.Contains(b.SQL, `WHERE "id" = ?`) || b.Args[0] != int64(7) {
		t.Errorf("id=7: %v %v", b, err)
	}
	// Declarations a row filter refuses.
	for _, c := range []struct {
		rows []string
		want string
	}{
		{[]string{"nope"}, "not one of the columns"},
		{[]string{"name"}, "also a filter"},
		{[]string{"id", "id"}, "listed twice"},
		{[]string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}, "at most 8"},
	} {
		s := customersSpec()
		delete(s.Filters, "id")
		s.RowFilters = c.rows
		if _, err := CompileTable(s, nil, Postgres); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.rows, err, c.want)
		}
	}
}

// TestParseFrom: the three sources, and what is refused.
func TestParseFrom(t *testing.T) {
	for s, want := range map[string]From{
		"app.id": {Kind: FromApp}, "subject": {Kind: FromSubject}, "claim.tenant_id": {Kind: FromClaim, Claim: "tenant_id"},
		"claim.https://example.com/tenant": {Kind: FromClaim, Claim: "https://example.com/tenant"},
	} {
		got, err := ParseFrom(s)
		if err != nil || got != want || got.String() != s {
			t.Errorf("%q: %+v %v", s, got, err)
		}
	}
	for _, s := range []string{"", "claim.", "claim.a b", "claim.\x00", "app", "sub", "header.x", "Claim.x", "claim." + strings.Repeat("x", MaxClaimName+1)} {
		if _, err := ParseFrom(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
	if v, ok := (From{Kind: FromClaim, Claim: "t"}).Value("app", "sub", map[string]string{"t": "x"}); !ok || v != "x" {
		t.Errorf("claim value %q %v", v, ok)
	}
	if _, ok := (From{Kind: FromSubject}).Value("app", "", nil); ok {
		t.Error("an empty subject is a value")
	}
}

// FuzzParseFrom: ParseFrom never panics; what it accepts prints back as
// the input, and a claim name is bounded printable ASCII.
func FuzzParseFrom(f *testing.F) {
	for _, s := range []string{"app.id", "subject", "claim.tenant_id", "claim.", "claim.a b", "claim.ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fr, err := ParseFrom(s)
		if err != nil {
			return
		}
		if fr.String() != s {
			t.Fatalf("%q parsed as %+v, prints %q", s, fr, fr.String())
		}
		if fr.Kind == FromClaim && (fr.Claim == "" || len(fr.Claim) > MaxClaimName || strings.ContainsFunc(fr.Claim, func(r rune) bool { return r <= ' ' || r >= 0x7f })) {
			t.Fatalf("claim name %q", fr.Claim)
		}
	})
}
