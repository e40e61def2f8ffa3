package gateway

import (
	"github.com/prometheus/client_golang/prometheus"
)

// JWKS metrics, read at scrape time from each issuer's key set counters
// (label issuer: a name of identity.jwt_issuers, at most
// config.MaxJWTIssuers of them, bounded with the key sets).
var (
	jwksFetchesDesc = prometheus.NewDesc("levee_jwks_fetches_total",
		"Fetches of a JWT issuer's key set (discovery document and JWKS), by issuer: at start, on an unknown kid at most once per min_refresh_interval, and when the set's max-age has passed.",
		[]string{"issuer"}, nil)
	jwksFailuresDesc = prometheus.NewDesc("levee_jwks_fetch_failures_total",
		"Fetches of a JWT issuer's key set that failed (the last good set is kept), by issuer.",
		[]string{"issuer"}, nil)
	jwksKeysDesc = prometheus.NewDesc("levee_jwks_keys",
		"Signature keys in a JWT issuer's key set in use, by issuer; 0: none yet (its routes answer 401 key_unavailable).",
		[]string{"issuer"}, nil)
)

type jwksCollector struct{ g *Gateway }

func (c jwksCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jwksFetchesDesc
	ch <- jwksFailuresDesc
	ch <- jwksKeysDesc
}

func (c jwksCollector) Collect(ch chan<- prometheus.Metric) {
	s := &c.g.jwtKeys
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, ks := range s.sets {
		fetches, fails, keys := ks.keys.Stats()
		ch <- prometheus.MustNewConstMetric(jwksFetchesDesc, prometheus.CounterValue, float64(fetches), name)
		ch <- prometheus.MustNewConstMetric(jwksFailuresDesc, prometheus.CounterValue, float64(fails), name)
		ch <- prometheus.MustNewConstMetric(jwksKeysDesc, prometheus.GaugeValue, float64(keys), name)
	}
}
