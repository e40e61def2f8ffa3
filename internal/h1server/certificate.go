package h1server

import (
	"crypto/tls"
	"errors"
	"sync/atomic"
	"time"

	"github.com/levee-gw/levee/internal/certset"
	"github.com/prometheus/client_golang/prometheus"
)

// Certificate is the data listener's TLS as loaded last: its certificates
// chosen by SNI, its version and cipher policy and its client certificate
// rule, one immutable certset.Set swapped whole. A reload loads a new set
// (Load) and every handshake that starts from then on uses it; a
// connection already open keeps the certificate it was served (TLS does
// not renegotiate). The zero value holds none; safe for concurrent use.
type Certificate struct {
	set atomic.Pointer[certset.Set]
}

// Load reads spec's files (certset.Load); on error the set loaded before
// stays and the error names every problem.
func (c *Certificate) Load(spec certset.Spec) error {
	s, err := certset.Load(spec)
	if err != nil {
		return err
	}
	c.set.Store(s)
	return nil
}

// Set is the set loaded last (nil before the first Load).
func (c *Certificate) Set() *certset.Set { return c.set.Load() }

// TLSConfig is the data listener's TLS configuration (Options.TLSConfig)
// over c: each handshake takes the configuration of the set loaded last
// (GetConfigForClient), so a reload changes the certificates, the minimum
// version, the cipher suites and the client certificate rule of every
// handshake from then on. ALPN offers HTTP/2 first, as net/http's
// ServeTLS did.
func (c *Certificate) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			s := c.set.Load()
			if s == nil {
				return nil, errNoCertificate
			}
			return s.Config(), nil
		},
	}
}

// errNoCertificate fails a handshake before any set was loaded (the
// gateway loads one before it listens).
var errNoCertificate = errors.New("h1server: no certificate loaded")

var certExpiryDesc = prometheus.NewDesc("levee_tls_certificate_expiry_timestamp_seconds",
	"When each certificate the data listener serves expires (its leaf's NotAfter, Unix seconds), by the certificate's first name (one series per configured certificate: tls.cert_file and tls.certificates). None on a clear-text listener.", []string{"name"}, nil)

// NewCertificateCollector reports the expiry of every certificate of the
// set c holds at scrape time (nothing before the first Load).
func NewCertificateCollector(c *Certificate) prometheus.Collector {
	return NewExpiryCollector(func(yield func(string, time.Time) bool) {
		c.Entries(yield)
	})
}

// Entries yields the name and expiry of every certificate of the set
// loaded last (none before the first Load), until yield returns false.
func (c *Certificate) Entries(yield func(name string, notAfter time.Time) bool) bool {
	s := c.Set()
	if s == nil {
		return true
	}
	for _, e := range s.Entries() {
		if !yield(e.Name, e.NotAfter) {
			return false
		}
	}
	return true
}

// NewExpiryCollector reports levee_tls_certificate_expiry_timestamp_seconds
// for every certificate entries yields at scrape time (several listeners'
// sets and ACME's certificates): one series per name, the earliest expiry
// when a name comes twice (a registry refuses a repeated series). entries
// is bounded by its sources (certset.MaxCertificates per set, the ACME
// domains).
func NewExpiryCollector(entries func(yield func(name string, notAfter time.Time) bool)) prometheus.Collector {
	return certCollector{entries}
}

type certCollector struct {
	entries func(yield func(string, time.Time) bool)
}

func (cc certCollector) Describe(ch chan<- *prometheus.Desc) { ch <- certExpiryDesc }

func (cc certCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]time.Time{}
	var order []string
	cc.entries(func(name string, notAfter time.Time) bool {
		prev, ok := seen[name]
		if !ok {
			order = append(order, name)
		}
		if !ok || notAfter.Before(prev) {
			seen[name] = notAfter
		}
		return true
	})
	for _, name := range order {
		ch <- prometheus.MustNewConstMetric(certExpiryDesc, prometheus.GaugeValue, float64(seen[name].Unix()), name)
	}
}
