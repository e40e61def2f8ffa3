package admin

import (
	"math"
	"net/http"
	"slices"
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
		writeJSON(w, http.StatusOK, summarize(mfs))
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
func summarize(mfs []*dto.MetricFamily) Summary {
	s := Summary{Classes: map[string]float64{}, Refusals: []ReasonCount{}, Endpoints: map[string]float64{}}
	refusals := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "levee_requests_total":
				v := m.GetCounter().GetValue()
				code := label(m, "code")
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
	for reason, n := range refusals {
		if n > 0 {
			s.Refusals = append(s.Refusals, ReasonCount{Reason: reason, Total: n})
		}
	}
	slices.SortFunc(s.Refusals, func(a, b ReasonCount) int {
		if a.Total != b.Total {
			if a.Total > b.Total {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Reason, b.Reason)
	})
	return s
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
