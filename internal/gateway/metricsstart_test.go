package gateway

import (
	"strings"
	"testing"
)

// TestEveryFamilyAtStart: a scrape of a fresh levee with every part on (cluster.redis too) and
// no traffic yet has a sample of every registered levee_ family, but for
// those whose label values come only from parts this configuration does
// not have (data routes and data sources: their own tests cover them).
func TestEveryFamilyAtStart(t *testing.T) {
	without := map[string]string{
		"levee_data_cache_total":                         "no data route",
		"levee_data_pool_connections":                    "no data source",
		"levee_data_query_duration_seconds":              "no data route",
		"levee_data_rows_total":                          "no data route",
		"levee_tls_certificate_expiry_timestamp_seconds": "no tls (listen_tls_test.go reads it)",
		"levee_cors_preflights_total":                    "no cors route (steps_test.go's TestCORS reads it)",
		"levee_compressed_responses_total":               "no compression route (compress_test.go reads it)",
		"levee_compressed_input_bytes_total":             "no compression route (compress_test.go reads it)",
		"levee_route_split_requests_total":               "no split route (split_test.go reads it)",
		"levee_mirror_requests_total":                    "no mirror route (mirror_test.go reads it)",
		"levee_data_api_compile_failures_total":          "per shared data API, cluster.etcd only (cluster_dataapis_test.go reads it)",
		"levee_data_api_published_version":               "per shared data API, cluster.etcd only",
		"levee_data_api_served_version":                  "per shared data API, cluster.etcd only (cluster_dataapis_test.go reads it)",
		"levee_jwks_keys":                                "per JWT issuer; none declared here",
		"levee_jwks_fetches_total":                       "per JWT issuer; none declared here (jwt_hydra_test.go reads it)",
		"levee_jwks_fetch_failures_total":                "per JWT issuer; none declared here",
		"levee_auth_failures_total":                      "a series per refusal reason appears with its first count (jwt_hydra_test.go reads it)",
		"levee_forward_auth_calls_total":                 "no forward-auth route (fwdauth_test.go reads it)",
		"levee_forward_auth_cache_hits_total":            "no forward-auth route (fwdauth_test.go reads it)",
		"levee_forward_auth_passed_on_error_total":       "no forward-auth route (fwdauth_test.go reads it)",
		"levee_acme_errors_total":                        "per ACME name; no tls.acme here (acme_test.go reads it)",
	}
	be, _ := backend(t, "web")
	h := start(t, catalogueConfig(hostPort(be))+clusterRedisBlock(t))
	page := h.metricsPage()
	for name := range registeredFamilies(h.g.Registry()) {
		if _, ok := without[name]; ok {
			continue
		}
		found := false
		for _, suffix := range []string{"{", " ", "_bucket{", "_count "} {
			if strings.Contains(page, "\n"+name+suffix) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("%s has no sample before the first request", name)
		}
	}
}
