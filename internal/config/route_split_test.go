package config

import (
	"reflect"
	"testing"
)

// splitUps declares two upstreams, blue and green.
const splitUps = "upstreams:\n  blue:\n    endpoints: [{address: 10.0.0.1:80}]\n  green:\n    endpoints: [{address: 10.0.0.2:80}]\n"

// splitRoute is a route without upstream on splitUps, with the given lines.
func splitRoute(extra string) string {
	return head + splitUps + "routes:\n  - name: api\n" + extra
}

// rejectsSplit are TestParseRejects' cases of a route's split.
var rejectsSplit = []rejectCase{
	{"split unknown upstream", splitRoute("    split: [{upstream: blue, weight: 90}, {upstream: gren, weight: 10}]\n"), []string{
		`routes[0].split[1].upstream: unknown upstream "gren" (did you mean "green"?)`,
	}},
	{"split duplicate upstream", splitRoute("    split: [{upstream: blue, weight: 90}, {upstream: blue, weight: 10}]\n"), []string{
		`routes[0].split[1].upstream: duplicate upstream "blue" (first at split[0])`,
	}},
	{"split weights sum too big", splitRoute("    split: [{upstream: blue, weight: 9000}, {upstream: green, weight: 1001}]\n"), []string{
		`routes[0].split: weights must sum to at most 10000, got 10001`,
	}},
	{"split weights all zero", splitRoute("    split: [{upstream: blue, weight: 0}, {upstream: green, weight: 0}]\n"), []string{
		`routes[0].split: at least one weight must be above 0`,
	}},
	{"split negative weight", splitRoute("    split: [{upstream: blue, weight: -1}, {upstream: green, weight: 1}]\n"), []string{
		`routes[0].split[0].weight: must be a number from 0 to 10000, got -1`,
	}},
	{"split one side", splitRoute("    split: [{upstream: blue, weight: 1}]\n"), []string{
		`routes[0].split: must list 2 to 16 sides, got 1`,
	}},
	{"split missing weight", splitRoute("    split: [{upstream: blue}, {upstream: green, weight: 1}]\n"), []string{
		`routes[0].split[0].weight: required`,
	}},
	{"split with upstream", splitRoute("    upstream: blue\n    split: [{upstream: blue, weight: 1}, {upstream: green, weight: 1}]\n"), []string{
		`routes[0].split: a route has exactly one of upstream, split, data, redirect and respond, got upstream and split`,
	}},
	{"split with respond", splitRoute("    respond: {body: x}\n    split: [{upstream: blue, weight: 1}, {upstream: green, weight: 1}]\n"), []string{
		`routes[0]: a route has exactly one of upstream, split, data, redirect and respond, got split and respond`,
	}},
	{"split sticky both", splitRoute("    split: [{upstream: blue, weight: 1}, {upstream: green, weight: 1}]\n    split_sticky: {header: x-user, cookie: u}\n"), []string{
		`routes[0].split_sticky: must set exactly one of header and cookie`,
	}},
	{"split sticky without split", splitRoute("    upstream: blue\n    split_sticky: {cookie: u}\n"), []string{
		`routes[0].split_sticky: only allowed with split`,
	}},
	{"split sticky bad header", splitRoute("    split: [{upstream: blue, weight: 1}, {upstream: green, weight: 1}]\n    split_sticky: {header: x_user}\n"), []string{
		`routes[0].split_sticky.header: must be a header field name (a token without "_"), got "x_user"`,
	}},
}

// TestParseSplit reads a split with a sticky header into the route.
func TestParseSplit(t *testing.T) {
	cfg, err := Parse([]byte(splitRoute("    split: [{upstream: blue, weight: 90}, {upstream: green, weight: 10}]\n    split_sticky: {header: x-user}\n")))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Routes[0]
	if want := []SplitSide{{"blue", 90}, {"green", 10}}; !reflect.DeepEqual(r.Split, want) || r.Upstream != "" {
		t.Errorf("split = %+v (upstream %q), want %+v", r.Split, r.Upstream, want)
	}
	if r.SplitSticky == nil || r.SplitSticky.Header != "X-User" || r.SplitSticky.Cookie != "" {
		t.Errorf("split_sticky = %+v, want header X-User", r.SplitSticky)
	}
}
