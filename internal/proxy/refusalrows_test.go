package proxy

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/levee-gw/levee/internal/dataquery"
)

// TestEveryDataReasonHasRefusal: every reason dataquery declares (the
// data routes' refusals) has its row placed in reasonTable (so the docs'
// tables and the metrics' slots have it), derived from its declaration,
// and Refuse answers it with that status and sentence, never 500
// internal.
func TestEveryDataReasonHasRefusal(t *testing.T) {
	rs := dataquery.Reasons()
	if len(rs) == 0 {
		t.Fatal("dataquery declares no reasons")
	}
	for _, d := range rs {
		r := Reason(d.Reason)
		i, ok := reasonIndex[r]
		if !ok {
			t.Errorf("data reason %q has no row in reasonTable (add dataRow(%q) where the docs list it)", r, r)
		} else if s := reasonTable[i]; s != dataSpec(d) {
			t.Errorf("%s: row %+v, not dataquery's declaration %+v", r, s, d)
		}
		rec := httptest.NewRecorder()
		got := Refuse(rec, r)
		var body struct{ Error, Reason string }
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("%s: body %q: %v", r, rec.Body.String(), err)
		}
		if got != d.Status || body.Reason != d.Reason || body.Error != d.Sentence {
			t.Errorf("%s: Refuse wrote %d %+v, want %d with dataquery's sentence", r, got, body, d.Status)
		}
		if (rec.Header().Get("Retry-After") != "") != d.RetryAfter {
			t.Errorf("%s: Retry-After %q, declared %v", r, rec.Header().Get("Retry-After"), d.RetryAfter)
		}
		if rf, ok := LookupRefusal(r); !ok || rf.Status != d.Status {
			t.Errorf("%s: LookupRefusal = %+v, %v", r, rf, ok)
		}
	}
}

// TestUnplacedDataReasonIsAnswered: a data reason reasonTable does not
// place (a declaration added in dataquery alone) still gets its own
// answer from the rows Refuse renders, not 500 internal.
func TestUnplacedDataReasonIsAnswered(t *testing.T) {
	placed := 0
	for _, s := range allRows() {
		if _, ok := dataquery.LookupReason(string(s.Reason)); ok {
			placed++
		}
	}
	if placed != len(dataquery.Reasons()) {
		t.Errorf("allRows has %d data rows, dataquery declares %d", placed, len(dataquery.Reasons()))
	}
	rf := renderRefusals()
	for _, d := range dataquery.Reasons() {
		if got := rf[Reason(d.Reason)]; got == nil || got.status != d.Status {
			t.Errorf("%s: rendered %+v", d.Reason, got)
		}
	}
}

// TestRouteRefusals: a route's refusals follow its shape: a proxied route
// with a queue, a data route that is paged and has a required parameter,
// one without either.
func TestRouteRefusals(t *testing.T) {
	reasons := func(rows []RefusalRow) []Reason {
		out := make([]Reason, len(rows))
		for i, r := range rows {
			out[i] = r.Reason
		}
		return out
	}
	cases := []struct {
		name  string
		shape RouteShape
		want  []Reason
	}{
		{"proxied, api_key, queue", RouteShape{Consumers: true, Admission: &AdmissionShape{Queue: true}},
			[]Reason{ReasonBadPath, ReasonHeaderTooLarge, ReasonUnauthenticated, ReasonForbidden, ReasonRateLimited, ReasonQuotaExhausted,
				ReasonBadRequest, ReasonQueueFull, ReasonQueueTimeout, ReasonShedPriority, ReasonConsumerLimit,
				ReasonNoAvailableEndpoint, ReasonUpstreamUnavailable, ReasonUpstreamTimeout}},
		{"data, sql, required, paged", RouteShape{Methods: true, AnonymousLimits: true, Data: &dataquery.RouteShape{SQL: true, Required: true, Paged: true}},
			[]Reason{ReasonBadPath, ReasonHeaderTooLarge, ReasonMethodNotAllowed, ReasonRateLimited,
				ReasonMissingParameter, ReasonInvalidParameter, ReasonUnknownParameter, ReasonDuplicateParameter, ReasonInvalidCursor, ReasonInvalidLimit,
				ReasonNotAcceptable, ReasonStatementTimeout, ReasonDataSourceDown, ReasonDBPoolExhausted, ReasonQueryFailed}},
		{"data, table, limits", RouteShape{Memory: true, Admission: &AdmissionShape{}, Data: &dataquery.RouteShape{Filters: true}},
			[]Reason{ReasonBadPath, ReasonHeaderTooLarge, ReasonMemoryPressure, ReasonConcurrencyLimit, ReasonShedPriority, ReasonConsumerLimit,
				ReasonInvalidParameter, ReasonUnknownParameter, ReasonDuplicateParameter, ReasonOperatorNotAllowed, ReasonInvalidLimit,
				ReasonNotAcceptable, ReasonStatementTimeout, ReasonDataSourceDown, ReasonDBPoolExhausted, ReasonQueryFailed}},
	}
	for _, c := range cases {
		got := RouteRefusals(c.shape)
		if g := reasons(got); !equalReasons(g, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.name, g, c.want)
		}
		for _, r := range got {
			if r.Status != StatusOf(r.Reason) || r.Sentence == "" {
				t.Errorf("%s: %+v, Refuse answers %d", c.name, r, StatusOf(r.Reason))
			}
			if want := r.Reason == ReasonRateLimited || r.Reason == ReasonQuotaExhausted || StatusOf(r.Reason) == 503 ||
				r.Reason == ReasonConsumerLimit; r.RetryAfter != want {
				t.Errorf("%s: %s RetryAfter %v", c.name, r.Reason, r.RetryAfter)
			}
		}
	}
}

func equalReasons(a, b []Reason) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
