// Package acme orders, keeps and renews the data listeners' certificates
// from an ACME server (RFC 8555) for tls.acme.domains. The client is
// golang.org/x/crypto/acme/autocert, the Go field's standard ACME client:
// it answers HTTP-01 challenges through HTTPHandler and TLS-ALPN-01 ones
// through GetCertificate (ALPN "acme-tls/1"), keeps the account key and
// each certificate in a Cache (a directory under state_dir, 0600 files;
// with cluster.etcd, etcd in front of it: etcdcache.go), and renews each
// certificate RenewBefore its expiry in the background; a failed renewal
// leaves the certificate it had serving and is tried again 30 to 60
// minutes later. This package adds what levee needs around it: the CA
// file of a private ACME server, a host policy that ignores the Host
// header's port, the certificates' expiry for
// levee_tls_certificate_expiry_timestamp_seconds,
// levee_acme_certificates_total (orders stored, first ones and renewals)
// and levee_acme_errors_total (renewal.go: autocert reports no failed
// renewal, so levee watches for a certificate still the old one past its
// renewal time).
package acme

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	xacme "golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// ALPNProto is TLS-ALPN-01's protocol name (RFC 8737); a listener offers
// it beside h2 and http/1.1 so the CA's validation handshake reaches
// GetCertificate.
const ALPNProto = xacme.ALPNProto

// Options configure a Manager.
type Options struct {
	Directory   string        // the ACME directory URL
	Email       string        // the account's contact; "" for none
	CAFile      string        // PEM roots for the directory's TLS; "" for the system's
	Domains     []string      // the names ordered for (lower case)
	RenewBefore time.Duration // how long before expiry a certificate is renewed
	// Dir is the directory the account key and certificates are kept in
	// (made 0700; files 0600), unless Cache is set.
	Dir   string
	Cache autocert.Cache
	// Etcd, when set, shares the account and the certificates with the
	// cluster's other nodes (etcdcache.go), Dir's copy the fallback.
	Etcd *EtcdOptions
	// Logger receives the renewal and etcd warnings (nil: none); Now is
	// the clock of the renewal watch (nil: time.Now).
	Logger *slog.Logger
	Now    func() time.Time
}

// Manager serves and renews the certificates of Options.Domains. Safe
// for concurrent use.
type Manager struct {
	m           *autocert.Manager
	domains     map[string]bool
	cache       *watchCache
	etcd        *etcdCache // nil without Options.Etcd
	metrics     *Metrics
	log         *slog.Logger
	now         func() time.Time
	renewBefore time.Duration
	watch       renewWatch
	transport   *closableTransport // the ACME server's; refuses every request after Close
}

// closableTransport is the ACME client's transport. autocert's renewal
// timers cannot be stopped from outside, so after Close a timer that
// fires finds every request to the ACME server refused at once and
// reschedules itself (30 to 60 minutes later) without any traffic.
type closableTransport struct {
	next   *http.Transport
	closed atomic.Bool
}

func (t *closableTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.closed.Load() {
		return nil, errors.New("acme: manager closed")
	}
	return t.next.RoundTrip(r)
}

func (t *closableTransport) close() {
	t.closed.Store(true)
	t.next.CloseIdleConnections()
}

// httpTimeout bounds each request to the ACME server.
const httpTimeout = 30 * time.Second

// New builds a Manager; nothing is ordered until a handshake for one of
// the domains (or Warm) asks for it. metrics may be nil.
func New(o Options, metrics *Metrics) (*Manager, error) {
	if len(o.Domains) == 0 {
		return nil, errors.New("acme: no domains")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("acme: ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("acme: ca_file %s holds no PEM certificate", o.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if o.RenewBefore <= 0 {
		return nil, errors.New("acme: RenewBefore must be positive")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	mgr := &Manager{domains: map[string]bool{}, metrics: metrics, log: log, now: now, renewBefore: o.RenewBefore,
		transport: &closableTransport{next: tr}}
	mgr.watch.overdue = map[string]time.Time{}
	for _, d := range o.Domains {
		mgr.domains[strings.ToLower(d)] = true
	}
	cache := o.Cache
	if cache == nil {
		if o.Dir == "" {
			return nil, errors.New("acme: neither Dir nor Cache")
		}
		cache = autocert.DirCache(o.Dir)
	}
	if o.Etcd != nil {
		mgr.etcd = newEtcdCache(*o.Etcd, cache, mgr.stale, log)
		cache = mgr.etcd
	}
	mgr.cache = &watchCache{next: cache, metrics: metrics, domains: mgr.domains, expiry: map[string]time.Time{}}
	mgr.m = &autocert.Manager{
		Prompt:      autocert.AcceptTOS,
		Cache:       mgr.cache,
		HostPolicy:  mgr.hostPolicy,
		RenewBefore: o.RenewBefore,
		Email:       o.Email,
		Client:      &xacme.Client{DirectoryURL: o.Directory, HTTPClient: &http.Client{Transport: mgr.transport, Timeout: httpTimeout}},
	}
	if metrics != nil {
		for d := range mgr.domains {
			for _, r := range ErrorReasons {
				metrics.errors.WithLabelValues(d, r)
			}
		}
	}
	return mgr, nil
}

// hostPolicy admits the domains; a Host header's port (an HTTP-01
// request to a port other than 80, as a private CA's may use) and a
// trailing dot are ignored.
func (m *Manager) hostPolicy(_ context.Context, host string) error {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if !m.Serves(host) {
		return fmt.Errorf("acme: host %q is not in tls.acme.domains", host)
	}
	return nil
}

// stale reports whether data (a cache value) is a certificate due for
// renewal: within RenewBefore of its expiry. Anything else is not.
func (m *Manager) stale(key string, data []byte) bool {
	if m.domainOf(key) == "" {
		return false
	}
	leaf := leafOf(data)
	return leaf != nil && !m.now().Before(leaf.NotAfter.Add(-m.renewBefore))
}

// domainOf is the domain whose certificate key is ("" for the account
// key, a token, or a name not in the domains).
func (m *Manager) domainOf(key string) string {
	d := strings.TrimSuffix(key, "+rsa") // autocert's key of an RSA certificate
	if !m.domains[d] {
		return ""
	}
	return d
}

// Serves reports whether name (an SNI, any case) is one of the domains.
func (m *Manager) Serves(name string) bool {
	return m.domains[strings.ToLower(strings.TrimSuffix(name, "."))]
}

// GetCertificate answers a handshake for one of the domains (ordering the
// certificate on first use) and TLS-ALPN-01 validation handshakes.
// A failed order for a domain is counted (order_failed) and frees the
// cluster lock this node took for it.
func (m *Manager) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert, err := m.m.GetCertificate(hello)
	if err != nil && !slices.Contains(hello.SupportedProtos, ALPNProto) {
		if d := strings.ToLower(strings.TrimSuffix(hello.ServerName, ".")); m.domains[d] {
			if m.metrics != nil {
				m.metrics.errors.WithLabelValues(d, "order_failed").Inc()
			}
			m.log.Warn("acme: no certificate for a handshake", "name", d, "error", err)
			if m.etcd != nil {
				m.etcd.release(d)
			}
		}
	}
	return cert, err
}

// HTTPHandler answers HTTP-01 challenges (/.well-known/acme-challenge/)
// and hands every other request to fallback.
func (m *Manager) HTTPHandler(fallback http.Handler) http.Handler {
	return m.m.HTTPHandler(fallback)
}

// Entries yields each domain's certificate expiry as last stored or read
// (a domain not issued yet is absent).
func (m *Manager) Entries(yield func(name string, notAfter time.Time) bool) bool {
	m.cache.mu.Lock()
	snapshot := make(map[string]time.Time, len(m.cache.expiry))
	for k, v := range m.cache.expiry {
		snapshot[k] = v
	}
	m.cache.mu.Unlock()
	for k, v := range snapshot {
		if !yield(k, v) {
			return false
		}
	}
	return true
}

// watchCache passes everything to next and watches the certificates that
// go through it: their expiry by domain, and a stored certificate counted
// as issued (the domain's first) or renewed.
type watchCache struct {
	next    autocert.Cache
	metrics *Metrics
	domains map[string]bool // read only
	mu      sync.Mutex
	expiry  map[string]time.Time // by domain; bounded by the domains (HostPolicy)
}

func (c *watchCache) Get(ctx context.Context, key string) ([]byte, error) {
	data, err := c.next.Get(ctx, key)
	if err == nil {
		c.note(key, data, false)
	}
	return data, err
}

func (c *watchCache) Put(ctx context.Context, key string, data []byte) error {
	if err := c.next.Put(ctx, key, data); err != nil {
		return err
	}
	c.note(key, data, true)
	return nil
}

func (c *watchCache) Delete(ctx context.Context, key string) error { return c.next.Delete(ctx, key) }

// note records the expiry of the leaf in data (autocert's format: the
// private key, then the chain, PEM) under key's domain; the account key,
// the challenge tokens (a TLS-ALPN-01 token is a certificate too, under
// "<domain>+token") and anything else are skipped.
func (c *watchCache) note(key string, data []byte, stored bool) {
	domain := strings.TrimSuffix(key, "+rsa") // autocert's key of an RSA certificate
	if !c.domains[domain] {
		return
	}
	leaf := leafOf(data)
	if leaf == nil {
		return
	}
	c.mu.Lock()
	prev, had := c.expiry[domain]
	if !had || leaf.NotAfter.After(prev) {
		c.expiry[domain] = leaf.NotAfter
	}
	c.mu.Unlock()
	if stored && c.metrics != nil {
		if had {
			c.metrics.stored.WithLabelValues("renewed").Inc()
		} else {
			c.metrics.stored.WithLabelValues("issued").Inc()
		}
	}
}

// maxPEMBlocks bounds the blocks leafOf reads (a key and a chain).
const maxPEMBlocks = 16

// leafOf is the first certificate in data's PEM blocks, nil when none.
func leafOf(data []byte) *x509.Certificate {
	for range maxPEMBlocks {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil
		}
		if b.Type == "CERTIFICATE" {
			leaf, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil
			}
			return leaf
		}
	}
	return nil
}

// Metrics are the ACME counters, shared by every Manager of a process.
type Metrics struct {
	stored *prometheus.CounterVec
	errors *prometheus.CounterVec
}

// ErrorReasons are the reason labels of levee_acme_errors_total:
// order_failed (a handshake for the name found no certificate and its
// order failed) and renewal_overdue (renewal.go).
var ErrorReasons = []string{"order_failed", "renewal_overdue"}

// CertificateResults are the result labels of levee_acme_certificates_total.
var CertificateResults = []string{"issued", "renewed"}

// NewMetrics registers the ACME metrics on reg, each series at 0.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{stored: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_acme_certificates_total",
		Help: "Certificates ordered from the ACME server and stored, by result: issued (a domain's first) or renewed.",
	}, []string{"result"}), errors: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "levee_acme_errors_total",
		Help: "ACME failures by name and reason: order_failed (a handshake's order failed) or renewal_overdue (a certificate past its renewal time by the grace is still the old one; counted again every 30 minutes while it stays so).",
	}, []string{"name", "reason"})}
	for _, r := range CertificateResults {
		m.stored.WithLabelValues(r)
	}
	for _, c := range []prometheus.Collector{m.stored, m.errors} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
