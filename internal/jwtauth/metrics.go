package jwtauth

import "github.com/prometheus/client_golang/prometheus"

// Key set metrics, read at scrape time from each issuer's counters
// (label issuer: a name of identity.jwt_issuers, bounded with them).
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

// Collector reports the key sets that each calls back with, by issuer
// name, at every scrape.
func Collector(each func(yield func(issuer string, ks *KeySet))) prometheus.Collector {
	return collector{each}
}

type collector struct {
	each func(yield func(issuer string, ks *KeySet))
}

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jwksFetchesDesc
	ch <- jwksFailuresDesc
	ch <- jwksKeysDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.each(func(name string, ks *KeySet) {
		fetches, fails, keys := ks.Stats()
		ch <- prometheus.MustNewConstMetric(jwksFetchesDesc, prometheus.CounterValue, float64(fetches), name)
		ch <- prometheus.MustNewConstMetric(jwksFailuresDesc, prometheus.CounterValue, float64(fails), name)
		ch <- prometheus.MustNewConstMetric(jwksKeysDesc, prometheus.GaugeValue, float64(keys), name)
	})
}
