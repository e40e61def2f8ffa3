package acme

import (
	"context"
	"crypto/tls"
	"sync"
	"time"
)

// The renewal watch. autocert renews each certificate from a timer of
// its own, RenewBefore its expiry (plus a jitter of up to a tenth of
// RenewBefore, at most an hour), and on failure keeps serving the old
// certificate and tries again 30 to 60 minutes later; it reports neither
// the attempt nor its failure. So levee judges the outcome instead: a
// certificate still the one it knows (the latest expiry stored or read
// for its name) once its renewal time plus the jitter plus a grace for
// the attempt itself has passed means the renewals are failing. That is
// counted as levee_acme_errors_total{reason="renewal_overdue"}, once
// when it happens and again every overdueRecount while it stays so, so
// that an alert on the counter's increase keeps firing until a renewal
// succeeds; the old certificate serves meanwhile (autocert never drops a
// certificate before it expires). The watch also loads each stored
// certificate at start, so its renewal timer runs even if no client
// asks for the name.

// overdueRecount is how often a certificate still overdue is counted
// again.
const overdueRecount = 30 * time.Minute

// renewWatch is the watch's state.
type renewWatch struct {
	mu      sync.Mutex
	overdue map[string]time.Time // domain → when last counted; bounded by the domains
	stop    chan struct{}
	done    chan struct{}
	started bool
}

// overdueAfter is the time past a certificate's renewal time (NotAfter -
// renewBefore) at which it counts as overdue: autocert's largest jitter
// (renewBefore/10, at most an hour) and a grace for the attempt
// (renewBefore/4, at most 10 minutes: an order takes seconds).
func overdueAfter(renewBefore time.Duration) time.Duration {
	return min(renewBefore/10, time.Hour) + min(renewBefore/4, 10*time.Minute)
}

// checkEvery is the watch's period: renewBefore/20, 1 s to 1 min.
func checkEvery(renewBefore time.Duration) time.Duration {
	return min(max(renewBefore/20, time.Second), time.Minute)
}

// Start loads the stored certificates (their expiry, and their renewal
// timers) and starts the renewal watch; with Options.Etcd it connects to
// etcd first. Close stops it. Both are no-ops on a nil Manager.
func (m *Manager) Start() error {
	if m == nil {
		return nil
	}
	if m.etcd != nil {
		if err := m.etcd.open(); err != nil {
			return err
		}
	}
	m.watch.mu.Lock()
	m.watch.stop, m.watch.done = make(chan struct{}), make(chan struct{})
	m.watch.started = true
	m.watch.mu.Unlock()
	go m.watchLoop()
	return nil
}

// Close stops the watch, the etcd client and every later request to
// the ACME server (closableTransport).
func (m *Manager) Close() {
	if m == nil {
		return
	}
	m.transport.close()
	m.watch.mu.Lock()
	started := m.watch.started
	m.watch.started = false
	m.watch.mu.Unlock()
	if !started {
		return
	}
	close(m.watch.stop)
	<-m.watch.done
	if m.etcd != nil {
		m.etcd.close()
	}
}

func (m *Manager) watchLoop() {
	defer close(m.watch.done)
	m.load()
	t := time.NewTicker(checkEvery(m.renewBefore))
	defer t.Stop()
	for {
		select {
		case <-m.watch.stop:
			return
		case <-t.C:
			m.checkRenewals(m.now())
		}
	}
}

// loadTimeout bounds the start's read of each stored certificate.
const loadTimeout = 10 * time.Second

// load reads each domain's stored certificate (without the cluster
// lock) for its expiry and, when it has not expired, hands it to
// autocert (a handshake's GetCertificate without a client), which serves
// it and starts its renewal timer (at once when it is already due). A
// missing or expired one is left to the first handshake (ordering here
// would hold Close up for an order's length).
func (m *Manager) load() {
	for d := range m.domains { // bounded: at most 100 domains
		select {
		case <-m.watch.stop:
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
		var data []byte
		var err error
		if m.etcd != nil {
			data, err = m.etcd.peek(ctx, d)
		} else {
			data, err = m.cache.next.Get(ctx, d)
		}
		cancel()
		if err != nil {
			continue
		}
		m.cache.note(d, data, false)
		if leaf := leafOf(data); leaf != nil && m.now().Before(leaf.NotAfter) {
			if _, err := m.m.GetCertificate(&tls.ClientHelloInfo{ServerName: d}); err != nil {
				m.log.Warn("acme: loading the stored certificate", "name", d, "error", err)
			}
		}
	}
}

// checkRenewals counts each certificate overdue at now (see the file's
// comment).
func (m *Manager) checkRenewals(now time.Time) {
	grace := overdueAfter(m.renewBefore)
	m.cache.mu.Lock()
	expiry := make(map[string]time.Time, len(m.cache.expiry))
	for k, v := range m.cache.expiry {
		expiry[k] = v
	}
	m.cache.mu.Unlock()
	m.watch.mu.Lock()
	defer m.watch.mu.Unlock()
	for d, notAfter := range expiry { // bounded by the domains
		if now.Before(notAfter.Add(-m.renewBefore).Add(grace)) {
			delete(m.watch.overdue, d)
			continue
		}
		if last, ok := m.watch.overdue[d]; ok && now.Sub(last) < overdueRecount {
			continue
		}
		m.watch.overdue[d] = now
		if m.metrics != nil {
			m.metrics.errors.WithLabelValues(d, "renewal_overdue").Inc()
		}
		m.log.Error("acme: certificate not renewed in time; the old one keeps serving", "name", d,
			"not_after", notAfter.UTC().Format(time.RFC3339), "renew_before", m.renewBefore.String())
	}
}
