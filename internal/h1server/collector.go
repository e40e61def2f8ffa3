package h1server

import "github.com/prometheus/client_golang/prometheus"

var handoffDesc = prometheus.NewDesc("levee_h1_handoffs_total",
	"Connections levee's HTTP/1.1 loop handed to net/http, by reason (h2_preface, upgrade, expect, transfer_encoding, other; alpn_h2: a TLS connection that negotiated HTTP/2).", []string{"reason"}, nil)

var tlsHandshakesDesc = prometheus.NewDesc("levee_tls_handshakes_total",
	"TLS handshakes on the data listener, by result (success; error: a client that failed or did not finish one within the header timeout). Both 0 on a clear-text listener.", []string{"result"}, nil)

var http2GoAwaysDesc = prometheus.NewDesc("levee_http2_goaways_total",
	"HTTP/2 GOAWAY frames levee's data listener wrote, by error code in snake case (no_error: idle timeout or shutdown; enhance_your_calm: Rapid Reset; protocol_error, ...; unknown: a code RFC 9113 does not name), and HTTP/2 connections it closed without one: continuation_flood (more than 8 CONTINUATION frames in a header block), header_block_too_large (a header block over the server's header cap).", []string{"reason"}, nil)

var http2ResetDroppedDesc = prometheus.NewDesc("levee_http2_reset_streams_dropped_total",
	"HTTP/2 streams a client opened and reset at once (a HEADERS frame followed by an RST_STREAM for it in the same read: Rapid Reset) that levee's data listener dropped before serving them.", nil, nil)

var proxyRefusedDesc = prometheus.NewDesc("levee_proxy_protocol_refused_total",
	"Connections to the data listener closed unanswered for their PROXY protocol header (server.proxy_protocol), by reason: untrusted (a peer outside proxy_protocol.trusted), missing (no header), malformed, unsupported (UDP or UNIX), truncated (closed within it), timeout (not complete within the read header timeout).", []string{"reason"}, nil)

var proxyHeadersDesc = prometheus.NewDesc("levee_proxy_protocol_headers_total",
	"PROXY protocol headers the data listener accepted from trusted peers, by version (v1, v2).", []string{"version"}, nil)

// NewCollector reports the handoff, TLS handshake and HTTP/2 GOAWAY
// counters (kept by the server as atomics) of the server that server
// returns at scrape time; every reason reads 0 while it returns nil
// (before the listener starts).
func NewCollector(server func() *Server) prometheus.Collector { return collector{server} }

type collector struct{ server func() *Server }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- handoffDesc
	ch <- tlsHandshakesDesc
	ch <- http2GoAwaysDesc
	ch <- http2ResetDroppedDesc
	ch <- proxyRefusedDesc
	ch <- proxyHeadersDesc
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	var st Stats
	if srv := c.server(); srv != nil {
		st = srv.Stats()
	}
	for _, reason := range HandoffReasons() {
		ch <- prometheus.MustNewConstMetric(handoffDesc, prometheus.CounterValue, float64(st.Handoffs[reason]), reason)
	}
	for _, result := range TLSResults() {
		ch <- prometheus.MustNewConstMetric(tlsHandshakesDesc, prometheus.CounterValue, float64(st.TLSHandshakes[result]), result)
	}
	for _, reason := range HTTP2GoAwayReasons() {
		ch <- prometheus.MustNewConstMetric(http2GoAwaysDesc, prometheus.CounterValue, float64(st.HTTP2GoAways[reason]), reason)
	}
	ch <- prometheus.MustNewConstMetric(http2ResetDroppedDesc, prometheus.CounterValue, float64(st.HTTP2ResetStreamsDropped))
	for _, reason := range ProxyProtocolReasons() {
		ch <- prometheus.MustNewConstMetric(proxyRefusedDesc, prometheus.CounterValue, float64(st.ProxyProtocolRefused[reason]), reason)
	}
	for _, v := range [...]string{"v1", "v2"} {
		ch <- prometheus.MustNewConstMetric(proxyHeadersDesc, prometheus.CounterValue, float64(st.ProxyProtocolHeaders[v]), v)
	}
}
