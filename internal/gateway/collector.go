package gateway

import (
	"github.com/levee-gw/levee/internal/h1server"
	"github.com/prometheus/client_golang/prometheus"
)

var (
	admissionInflightDesc = prometheus.NewDesc("levee_admission_inflight",
		"Requests in flight to the upstream, as its admission limiter counts them.", []string{"upstream"}, nil)
	admissionQueuedDesc = prometheus.NewDesc("levee_admission_queue_length",
		"Requests waiting in the upstream's admission queue.", []string{"upstream"}, nil)
	admissionLimitDesc = prometheus.NewDesc("levee_admission_limit",
		"The upstream's current concurrency limit (static, or found by the adaptive limiter).", []string{"upstream"}, nil)
	memoryLevelDesc = prometheus.NewDesc("levee_memory_pressure_level",
		"Memory pressure: 0 ok, 1 above the soft watermark (sheddable refused), 2 above the hard (all but critical refused).", nil, nil)
	memoryHeapDesc = prometheus.NewDesc("levee_memory_heap_bytes",
		"The live heap (marked by the last garbage collection) at the memory guard's last sample; its watermarks compare this plus levee_memory_reserved_bytes.", nil, nil)
	memoryReservedDesc = prometheus.NewDesc("levee_memory_reserved_bytes",
		"Bytes admitted requests have reserved from the memory budget (replay copies of bodies), released when each request ends.", nil, nil)
	memoryRefusedDesc = prometheus.NewDesc("levee_memory_reservations_refused_total",
		"Reservations the memory budget had no room for: the request streamed its body unreplayed, or (sheddable) was refused 503 memory_pressure.", nil, nil)
	memoryCollectionsDesc = prometheus.NewDesc("levee_memory_forced_collections_total",
		"Garbage collections the memory guard ran because the live heap reading was stale under pressure.", nil, nil)
	handoffDesc = prometheus.NewDesc("levee_h1_handoffs_total",
		"Connections levee's HTTP/1.1 loop handed to net/http, by reason (h2_preface, upgrade, expect, transfer_encoding, other; alpn_h2: a TLS connection that negotiated HTTP/2).", []string{"reason"}, nil)
)

// h1Collector reports the data server's handoff counters (kept by the
// server as atomics) at scrape time.
type h1Collector struct{ g *Gateway }

func (c h1Collector) Describe(ch chan<- *prometheus.Desc) { ch <- handoffDesc }

func (c h1Collector) Collect(ch chan<- prometheus.Metric) {
	srv := c.g.h1.Load()
	var st h1server.Stats
	if srv != nil {
		st = srv.Stats()
	}
	for _, reason := range h1server.HandoffReasons() {
		ch <- prometheus.MustNewConstMetric(handoffDesc, prometheus.CounterValue, float64(st.Handoffs[reason]), reason)
	}
}

// admissionCollector reports the serving table's admission limiters and the
// memory guard at scrape time (their state lives in them; nothing is
// copied on the request path).
type admissionCollector struct{ g *Gateway }

func (c admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- admissionInflightDesc
	ch <- admissionQueuedDesc
	ch <- admissionLimitDesc
	ch <- memoryLevelDesc
	ch <- memoryHeapDesc
	ch <- memoryReservedDesc
	ch <- memoryRefusedDesc
	ch <- memoryCollectionsDesc
}

func (c admissionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, up := range c.g.handler.Table().Upstreams() {
		if up.Admission == nil {
			continue
		}
		st := up.Admission.Stats()
		ch <- prometheus.MustNewConstMetric(admissionInflightDesc, prometheus.GaugeValue, float64(st.InFlight), up.Name)
		ch <- prometheus.MustNewConstMetric(admissionQueuedDesc, prometheus.GaugeValue, float64(st.Queued), up.Name)
		ch <- prometheus.MustNewConstMetric(admissionLimitDesc, prometheus.GaugeValue, float64(up.Admission.Limit()), up.Name)
	}
	if m := c.g.memory; m != nil {
		ch <- prometheus.MustNewConstMetric(memoryLevelDesc, prometheus.GaugeValue, float64(m.Level()))
		ch <- prometheus.MustNewConstMetric(memoryHeapDesc, prometheus.GaugeValue, float64(m.HeapBytes()))
		ch <- prometheus.MustNewConstMetric(memoryReservedDesc, prometheus.GaugeValue, float64(m.Reserved()))
		ch <- prometheus.MustNewConstMetric(memoryRefusedDesc, prometheus.CounterValue, float64(m.RefusedReservations()))
		ch <- prometheus.MustNewConstMetric(memoryCollectionsDesc, prometheus.CounterValue, float64(m.Collections()))
	}
}
