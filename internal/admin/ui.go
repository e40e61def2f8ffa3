package admin

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/levee-gw/levee/internal/adminui"
)

// This file serves what the admin web UI (package adminui, at /ui/) reads
// besides the JSON the API already had: GET /api/v1/summary, the overview's
// figures from the metrics registry as JSON (so the page need not parse
// the Prometheus text format), and GET /api/v1/reloads, the recent reload
// history.

// uiRoutes registers the UI's files under /ui/ (served without a token:
// requireToken lets isOpenPath through) and GET /api/v1/summary.
func uiRoutes(mux *adminMux, g prometheus.Gatherer) {
	mux.Handle("GET "+adminui.Prefix, adminui.Handler())
	mux.HandleFunc("GET /api/v1/summary", func(w http.ResponseWriter, r *http.Request) {
		mfs, err := g.Gather()
		if err != nil && len(mfs) == 0 {
			writeError(w, http.StatusInternalServerError, "internal", "gathering the metrics: "+err.Error())
			return
		}
		routes := r.URL.Query()["route"]
		if len(routes) > maxSummaryRoutes {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "at most " + strconv.Itoa(maxSummaryRoutes) + " route= parameters", "reason": "bad_request", "field": "route"})
			return
		}
		writeJSON(w, http.StatusOK, summarize(mfs, routes...))
	})
}

// isOpenPath reports whether requireToken serves path without a token:
// the probes, and the UI's files, which hold no data (the page asks for
// the token and sends it on every API call).
func isOpenPath(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == strings.TrimSuffix(adminui.Prefix, "/") || strings.HasPrefix(path, adminui.Prefix)
}

// Summary is GET /api/v1/summary: totals since levee started, read from
// the metrics registry. The UI computes rates from two of them.
type Summary struct {
	// Requests counts the requests answered (levee_requests_total);
	// Errors those answered 5xx; Classes all of them by status class.
	Requests float64            `json:"requests"`
	Errors   float64            `json:"errors"`
	Classes  map[string]float64 `json:"classes"`
	// Refusals are the answers levee wrote itself, by reason, most first
	// (levee_refusals_total summed over routes).
	Refusals []ReasonCount `json:"refusals"`
	// Inflight is the requests being served now.
	Inflight float64 `json:"inflight"`
	// Endpoints counts the endpoints of every upstream by state.
	Endpoints  map[string]float64 `json:"endpoints"`
	LastReload LastReload         `json:"last_reload"`
	// Routes are the figures of the routes named by ?route= (the Data
	// APIs page's query failures), by name; absent without ?route=.
	Routes map[string]*RouteSummary `json:"routes,omitempty"`
}

// maxSummaryRoutes bounds the ?route= parameters of one summary (the
// Data APIs page asks for one page of APIs, at most 50).
const maxSummaryRoutes = 100

// RouteSummary is one route's totals since levee started: requests
// answered, those answered 5xx, and the refusals levee wrote by reason
// (a data route's query failures are among them: query_failed,
// statement_timeout, data_source_unavailable), most first.
type RouteSummary struct {
	Requests float64       `json:"requests"`
	Errors   float64       `json:"errors"`
	Refusals []ReasonCount `json:"refusals"`
}

// ReasonCount is one refusal reason's total.
type ReasonCount struct {
	Reason string  `json:"reason"`
	Total  float64 `json:"total"`
}

// LastReload is the last configuration load (start counts as one).
type LastReload struct {
	Time    time.Time `json:"time,omitzero"`
	Success bool      `json:"success"`
}

// summarize reduces the gathered families to a Summary. The loops are
// bounded by the registry, whose label sets are bounded themselves.
//
// routes names the routes whose own figures are wanted (Summary.Routes).
func summarize(mfs []*dto.MetricFamily, routes ...string) Summary {
	s := Summary{Classes: map[string]float64{}, Refusals: []ReasonCount{}, Endpoints: map[string]float64{}}
	refusals := map[string]float64{}
	byRoute := map[string]map[string]float64{} // route -> reason -> total
	if len(routes) > 0 {
		s.Routes = make(map[string]*RouteSummary, len(routes))
		for _, name := range routes {
			s.Routes[name] = &RouteSummary{Refusals: []ReasonCount{}}
			byRoute[name] = map[string]float64{}
		}
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "levee_requests_total":
				v := m.GetCounter().GetValue()
				code := label(m, "code")
				if rs := s.Routes[label(m, "route")]; rs != nil {
					rs.Requests += v
					if len(code) == 3 && code[0] == '5' {
						rs.Errors += v
					}
				}
				s.Requests += v
				class := "other"
				if len(code) == 3 && code[0] >= '1' && code[0] <= '5' {
					class = code[:1] + "xx"
				}
				s.Classes[class] += v
				if class == "5xx" {
					s.Errors += v
				}
			case "levee_refusals_total":
				refusals[label(m, "reason")] += m.GetCounter().GetValue()
				if rr := byRoute[label(m, "route")]; rr != nil {
					rr[label(m, "reason")] += m.GetCounter().GetValue()
				}
			case "levee_inflight_requests":
				s.Inflight += m.GetGauge().GetValue()
			case "levee_upstream_endpoints":
				s.Endpoints[label(m, "state")] += m.GetGauge().GetValue()
			case "levee_config_last_reload_timestamp_seconds":
				if v := m.GetGauge().GetValue(); v > 0 && !math.IsInf(v, 0) {
					sec, frac := math.Modf(v)
					s.LastReload.Time = time.Unix(int64(sec), int64(frac*1e9)).UTC()
				}
			case "levee_config_last_reload_success":
				s.LastReload.Success = m.GetGauge().GetValue() == 1
			}
		}
	}
	s.Refusals = reasonCounts(refusals)
	for name, rr := range byRoute {
		s.Routes[name].Refusals = reasonCounts(rr)
	}
	return s
}

// reasonCounts lists the reasons counted above 0, most first.
func reasonCounts(totals map[string]float64) []ReasonCount {
	out := []ReasonCount{}
	for reason, n := range totals {
		if n > 0 {
			out = append(out, ReasonCount{Reason: reason, Total: n})
		}
	}
	slices.SortFunc(out, func(a, b ReasonCount) int {
		if a.Total != b.Total {
			if a.Total > b.Total {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Reason, b.Reason)
	})
	return out
}

// label returns m's value of the label name, "" when it has none.
func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// ReloadView is one configuration load as GET /api/v1/reloads shows it.
type ReloadView struct {
	Time time.Time `json:"time"`
	// Result is "start" (levee's first load), "success" or "error" (the
	// previous configuration kept serving).
	Result string `json:"result"`
	// Problems are the refused reload's errors, one per line.
	Problems []string `json:"problems,omitempty"`
}

// reloadRoutes registers GET /api/v1/reloads: a read, scope read is
// enough.
func reloadRoutes(mux *adminMux, reloads func() []ReloadView) {
	mux.HandleFunc("GET /api/v1/reloads", func(w http.ResponseWriter, r *http.Request) {
		list := reloads()
		if list == nil {
			list = []ReloadView{}
		}
		writeJSON(w, http.StatusOK, map[string]any{"reloads": list})
	})
}
