package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/levee-gw/levee/internal/acme"
	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/h1server"
	"github.com/levee-gw/levee/internal/netlimit"
	"github.com/levee-gw/levee/internal/proxy"
)

// The listener set: every data-plane listener of config.ListenerSet (the
// one-listener form's one, or `listeners`), each an h1server with its own
// fallback net/http server, TLS, PROXY protocol and connection caps. The
// primary (config.PrimaryListener, the first that serves routes) is also
// g.dataLn, g.h1 and g.dataLimit, which the metrics and Addr read. A
// listener with redirect_https serves only redirects (and ACME HTTP-01
// challenges). Which listeners exist, their addresses and TLS on/off need
// a restart; a reload loads each listener's certificate files again.

// dataListener is one data-plane listener as Start built it.
type dataListener struct {
	cfg   config.Listener
	ln    net.Listener // wrapped by limit
	limit *netlimit.Listener
	h1    *h1server.Server
}

// listenerCerts are the listeners' certificates, by listener name, made
// by New for every listener with TLS (the primary's is &g.cert) and
// loaded again by each reload; the map itself never changes after New.
type listenerCerts map[string]*h1server.Certificate

// newListenerCerts makes and loads the certificates of cfg's listeners.
func (g *Gateway) newListenerCerts(cfg *config.Config) (listenerCerts, error) {
	certs := listenerCerts{}
	primary := cfg.PrimaryListener().Name
	for _, l := range cfg.ListenerSet() {
		if l.TLS == nil {
			continue
		}
		c := &g.cert
		if !l.TLS.HasFiles() {
			if l.Name != primary {
				c = &h1server.Certificate{}
			}
			certs[l.Name] = c // every certificate from ACME: no set
			continue
		}
		if l.Name != primary {
			c = &h1server.Certificate{}
		}
		if err := c.Load(l.TLS.Spec()); err != nil {
			return nil, listenerErr(cfg, l, err)
		}
		certs[l.Name] = c
	}
	return certs, nil
}

// load reads every listener's certificate files again (a reload); on
// error each keeps the set it had. A listener without an entry (none: a
// change of listeners is refused before) is skipped.
func (lc listenerCerts) load(cfg *config.Config) error {
	var errs []error
	for _, l := range cfg.ListenerSet() {
		c := lc[l.Name]
		if l.TLS == nil || c == nil || !l.TLS.HasFiles() {
			continue
		}
		if err := c.Load(l.TLS.Spec()); err != nil {
			errs = append(errs, listenerErr(cfg, l, err))
		}
	}
	return errors.Join(errs...)
}

// entries yields every listener's certificates' names and expiries.
func (lc listenerCerts) entries(yield func(string, time.Time) bool) bool {
	for _, c := range lc {
		if !c.Entries(yield) {
			return false
		}
	}
	return true
}

// listenerErr names the listener an error is of (in the listeners form).
func listenerErr(cfg *config.Config, l config.Listener, err error) error {
	if len(cfg.Listeners) == 0 {
		return err
	}
	return fmt.Errorf("listener %q: %w", l.Name, err)
}

// listenAll opens every listener's socket, in ListenerSet's order; on
// error those opened are closed.
func listenAll(cfg *config.Config) ([]net.Listener, error) {
	set := cfg.ListenerSet()
	lns := make([]net.Listener, 0, len(set))
	for _, l := range set {
		ln, err := net.Listen("tcp", l.Listen)
		if err != nil {
			for _, o := range lns {
				o.Close()
			}
			if len(cfg.Listeners) == 0 {
				return nil, fmt.Errorf("listen (data plane) on %s: %w", l.Listen, err)
			}
			return nil, fmt.Errorf("listener %q on %s: %w", l.Name, l.Listen, err)
		}
		lns = append(lns, ln)
	}
	return lns, nil
}

// newListenerServer builds listener l's h1server (and its fallback):
// g.handler, or a redirect to HTTPS for a redirect_https listener.
func (g *Gateway) newListenerServer(cfg *config.Config, l config.Listener) (*h1server.Server, error) {
	var handler http.Handler = g.handler
	if r := l.RedirectHTTPS; r != nil {
		handler = g.acmeChallenges(redirectHTTPS(r.Port, func() {
			g.metrics.CountRefusal("", proxy.ReasonBadRequest)
		}))
	}
	fallback := g.newDataServer(cfg, l.TLS != nil, handler)
	var tlsConfig *tls.Config
	if c := g.certs[l.Name]; c != nil && l.TLS != nil {
		tlsConfig = g.listenerTLSConfig(l, c)
	}
	return newH1Server(h1server.Options{
		Handler:           handler,
		Fallback:          fallback,
		ReadHeaderTimeout: cfg.Server.ReadHeaderTimeout,
		IdleTimeout:       cfg.Server.IdleTimeout,
		MaxHeaderBytes:    fallback.MaxHeaderBytes,
		HeaderTooLarge: func(w http.ResponseWriter) {
			g.metrics.CountRefusal("", proxy.ReasonHeaderTooLarge)
			proxy.Refuse(w, proxy.ReasonHeaderTooLarge)
		},
		Logger:        g.logger,
		TLSConfig:     tlsConfig,
		ProxyProtocol: proxyProtocolOf(l.ProxyProtocol),
	})
}

// limitListener wraps ln with l's connection caps (without caps it only
// counts).
func (g *Gateway) limitListener(l config.Listener, ln net.Listener) *netlimit.Listener {
	limited := netlimit.LimitPerIP(ln, l.MaxConnections, l.MaxConnectionsPerIP,
		func() { g.metrics.CountRefusal("", proxy.ReasonConnectionLimit) })
	if l.ProxyProtocol != nil {
		limited.DeferPerIP() // counted by h1server's Claim, per the header's client
	}
	return limited
}

// shutdownListeners drains every listener at once (each stops accepting
// first), closing what remains of one whose drain outlives ctx; then it
// stops the ACME manager, which no handshake needs any more.
func (g *Gateway) shutdownListeners(ctx context.Context, ls []*dataListener) error {
	errs := make([]error, len(ls))
	var wg sync.WaitGroup
	for i, dl := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := dl.h1.Shutdown(ctx); err != nil { // the handed-off connections too
				errs[i] = err
				_ = dl.h1.Close()
			}
		}()
	}
	wg.Wait()
	g.acme.Close() // the ACME renewal watch and its etcd client (nil-safe)
	return errors.Join(errs...)
}

// ListenerAddr returns the address of the data listener named name (after
// Start); nil when there is none.
func (g *Gateway) ListenerAddr(name string) net.Addr {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, dl := range g.listeners {
		if dl.cfg.Name == name {
			return dl.ln.Addr()
		}
	}
	return nil
}

// redirectHTTPS answers every request 308 to the same host, path and
// query over HTTPS on port (omitted when 443). A Host that is not a DNS
// name or an IP address, or a request target that is not a path, is
// refused 400 bad_request (bad counts it): the Location never carries a
// client's text but a validated host and the request's own path.
func redirectHTTPS(port int, bad func()) http.Handler {
	suffix := ""
	if port != 443 {
		suffix = ":" + strconv.Itoa(port)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, ok := redirectHost(r.Host)
		uri := r.URL.RequestURI()
		if !ok || !strings.HasPrefix(uri, "/") || strings.HasPrefix(uri, "//") {
			bad()
			proxy.Refuse(w, proxy.ReasonBadRequest)
			return
		}
		w.Header()["Location"] = []string{"https://" + host + suffix + uri}
		w.WriteHeader(http.StatusPermanentRedirect)
	})
}

// maxHostLen bounds a Host redirectHost accepts (a DNS name is at most
// 253 bytes; an IPv6 literal with brackets and a port is shorter).
const maxHostLen = 260

// redirectHost is h (a Host header) without its port, lower-cased, when it
// is a DNS name (labels of letters, digits and hyphens, 1 to 63 bytes, at
// most 253 in all, one trailing dot allowed) or an IP address (IPv6 in
// brackets, without a zone); ok false otherwise.
func redirectHost(h string) (string, bool) {
	if h == "" || len(h) > maxHostLen {
		return "", false
	}
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 || (end+1 < len(h) && !validPort(h[end+1:])) {
			return "", false
		}
		a, err := netip.ParseAddr(h[1:end])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return "", false
		}
		return "[" + a.String() + "]", true
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		if !validPort(h[i:]) {
			return "", false
		}
		h = h[:i]
	}
	name := strings.TrimSuffix(h, ".")
	if name == "" || len(name) > 253 {
		return "", false
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
				return "", false
			}
		}
	}
	return strings.ToLower(name), true
}

// validPort reports whether s is ":" and a port, 1 to 65535.
func validPort(s string) bool {
	if len(s) < 2 || len(s) > 6 || s[0] != ':' {
		return false
	}
	n, err := strconv.Atoi(s[1:])
	return err == nil && n >= 1 && n <= 65535 && s[1] != '+' && s[1] != '-'
}

// acmeChallenges serves ACME HTTP-01 challenges before h (tls.acme);
// without ACME it is h.
func (g *Gateway) acmeChallenges(h http.Handler) http.Handler {
	if g.acme == nil {
		return h
	}
	return g.acme.HTTPHandler(h)
}

// newACME builds the ACME manager of the listener with tls.acme (config
// allows one), keeping its account and certificates under
// state_dir/acme and, with cluster.etcd, in etcd under the cluster's
// prefix (shared by the nodes: one order per name); nil without.
func newACME(cfg *config.Config, metrics *acme.Metrics, logger *slog.Logger) (*acme.Manager, error) {
	for _, l := range cfg.ListenerSet() {
		if l.TLS == nil || l.TLS.ACME == nil {
			continue
		}
		a := l.TLS.ACME
		o := acme.Options{Directory: a.Directory, Email: a.Email, CAFile: a.CAFile, Domains: a.Domains,
			RenewBefore: a.RenewBefore, Dir: filepath.Join(cfg.StateDir, "acme"), Logger: logger.With("component", "acme")}
		if cfg.Cluster != nil && cfg.Cluster.Etcd != nil {
			e := cfg.Cluster.Etcd
			o.Etcd = &acme.EtcdOptions{Endpoints: e.Endpoints, Prefix: e.Prefix, DialTimeout: e.DialTimeout, OpTimeout: e.OpTimeout}
		}
		return acme.New(o, metrics)
	}
	return nil, nil
}

// listenerTLSConfig is listener l's TLS configuration over c: with
// tls.acme, a handshake for one of its domains, or a TLS-ALPN-01
// validation, gets its certificate from ACME under the listener's policy;
// any other, c's set.
func (g *Gateway) listenerTLSConfig(l config.Listener, c *h1server.Certificate) *tls.Config {
	base := c.TLSConfig()
	if g.acme == nil || l.TLS.ACME == nil {
		return base
	}
	mgr := g.acme
	minVersion := uint16(tls.VersionTLS12)
	if l.TLS.MinVersion == config.TLSVersion13 {
		minVersion = tls.VersionTLS13
	}
	protos := []string{"h2", "http/1.1", acme.ALPNProto}
	return &tls.Config{
		MinVersion: minVersion,
		NextProtos: protos,
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			if !mgr.Serves(hello.ServerName) && !slices.Contains(hello.SupportedProtos, acme.ALPNProto) {
				return base.GetConfigForClient(hello)
			}
			var cfg *tls.Config
			if s := c.Set(); s != nil {
				cfg = s.Config().Clone() // the listener's policy: versions, suites, client certificates
				cfg.Certificates, cfg.GetCertificate = nil, nil
			} else {
				cfg = &tls.Config{MinVersion: minVersion}
			}
			cfg.GetCertificate = mgr.GetCertificate
			cfg.NextProtos = protos
			return cfg, nil
		},
	}
}

// certExpiries yields the expiry of every certificate the listeners serve
// (levee_tls_certificate_expiry_timestamp_seconds).
func (g *Gateway) certExpiries(yield func(string, time.Time) bool) {
	if g.certs.entries(yield) && g.acme != nil {
		g.acme.Entries(yield)
	}
}
