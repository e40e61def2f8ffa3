package h1server

import "github.com/prometheus/client_golang/prometheus"

var handoffDesc = prometheus.NewDesc("levee_h1_handoffs_total",
	"Connections levee's HTTP/1.1 loop handed to net/http, by reason (h2_preface, upgrade, expect, transfer_encoding, other; alpn_h2: a TLS connection that negotiated HTTP/2).", []string{"reason"}, nil)

// NewCollector reports the handoff counters (kept by the server as
// atomics) of the server that server returns at scrape time; every reason
// reads 0 while it returns nil (before the listener starts).
func NewCollector(server func() *Server) prometheus.Collector { return collector{server} }

type collector struct{ server func() *Server }

func (c collector) Describe(ch chan<- *prometheus.Desc) { ch <- handoffDesc }

func (c collector) Collect(ch chan<- prometheus.Metric) {
	var st Stats
	if srv := c.server(); srv != nil {
		st = srv.Stats()
	}
	for _, reason := range HandoffReasons() {
		ch <- prometheus.MustNewConstMetric(handoffDesc, prometheus.CounterValue, float64(st.Handoffs[reason]), reason)
	}
}
