package upstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/rawsock"
)

// TLS to upstreams.
//
// An upstream with TLS options dials every connection of both pools (the
// fast path's and net/http's) through Transport.dial: a TCP connect, then
// a TLS handshake, both within Options.Connect. The files are read once,
// by LoadClientTLS, into a ClientTLS that the transport keeps for its
// whole life: a reload that changes the options or the files' contents
// builds a new Transport (the gateway compares Options.Equal), so no
// connection of the old configuration is reused, while requests in flight
// on the old one finish (Close retires its connections as they come back).
// A reload that reads the same contents keeps the transport and its warm
// connections.
//
// A handshake that fails is a *TLSError with one of a fixed set of
// details; the request path answers it 502 upstream_tls and treats it as
// a connect failure (the request never reached the application).

// The details of a *TLSError: a fixed set, stable for clients and
// dashboards.
const (
	// TLSUnknownAuthority: the endpoint's certificate chain does not lead
	// to a trusted root (ca_file, or the system roots).
	TLSUnknownAuthority = "unknown_authority"
	// TLSNameMismatch: the certificate is not valid for the server name.
	TLSNameMismatch = "name_mismatch"
	// TLSExpired: the certificate (or one of its chain) has expired or is
	// not yet valid.
	TLSExpired = "expired"
	// TLSHandshakeFailure: any other failure of the handshake (a TLS alert
	// from the endpoint, such as a client certificate it requires or
	// refuses; no TLS spoken; no common version or cipher).
	TLSHandshakeFailure = "handshake_failure"
)

// sessionCacheSize bounds each upstream's TLS session cache (LRU, shared by
// its endpoints: keyed by server name).
const sessionCacheSize = 64

// TLSOptions are an upstream's TLS settings as the configuration gives
// them. Comparable: two equal values describe the same settings (the
// files' contents are compared by ClientTLS).
type TLSOptions struct {
	// CAFile is a PEM bundle of the roots that verify endpoints; "": the
	// system roots.
	CAFile string
	// ServerName is the name sent (SNI) and verified; "": the host of
	// each endpoint's address.
	ServerName string
	// CertFile and KeyFile are the client certificate (mTLS); both "" for
	// none.
	CertFile, KeyFile string
	// InsecureSkipVerify accepts any certificate.
	InsecureSkipVerify bool
	// MinVersion is tls.VersionTLS12 or tls.VersionTLS13 (0: 1.2).
	MinVersion uint16
}

// ClientTLS is an upstream's loaded TLS client configuration. Immutable
// once loaded; safe for concurrent use.
type ClientTLS struct {
	opts TLSOptions
	base *tls.Config
	// sum is a digest of the files' contents: equal options with equal
	// sums mean nothing changed.
	sum [sha256.Size]byte
}

// LoadClientTLS reads the files of o and returns the configuration the
// transport dials with. An error names the file and what is wrong with it.
func LoadClientTLS(o TLSOptions) (*ClientTLS, error) {
	h := sha256.New()
	cfg := &tls.Config{
		MinVersion:         max(o.MinVersion, tls.VersionTLS12),
		ServerName:         o.ServerName,
		InsecureSkipVerify: o.InsecureSkipVerify, //nolint:gosec // the operator's explicit choice, warned about at start and reload
		ClientSessionCache: tls.NewLRUClientSessionCache(sessionCacheSize),
		NextProtos:         []string{"http/1.1"},
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file: no PEM certificate in %q", o.CAFile)
		}
		cfg.RootCAs = pool
		h.Write([]byte("ca\x00"))
		h.Write(pem)
	}
	if o.CertFile != "" || o.KeyFile != "" {
		certPEM, err := os.ReadFile(o.CertFile)
		if err != nil {
			return nil, fmt.Errorf("cert_file: %w", err)
		}
		keyPEM, err := os.ReadFile(o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("key_file: %w", err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("key_file: %q with cert_file %q: %w", o.KeyFile, o.CertFile, err)
		}
		// Always offered when asked for, whatever CAs the endpoint names
		// (as NGINX's proxy_ssl_certificate): the endpoint decides.
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &pair, nil }
		h.Write([]byte("\x00cert\x00"))
		h.Write(certPEM)
		h.Write([]byte("\x00key\x00"))
		h.Write(keyPEM)
	}
	c := &ClientTLS{opts: o, base: cfg}
	h.Sum(c.sum[:0])
	return c, nil
}

// Options returns the settings c was loaded from.
func (c *ClientTLS) Options() TLSOptions { return c.opts }

// same reports whether c and d have the same options and file contents
// (both nil: no TLS).
func (c *ClientTLS) same(d *ClientTLS) bool {
	if c == nil || d == nil {
		return c == d
	}
	return c.opts == d.opts && bytes.Equal(c.sum[:], d.sum[:])
}

// config returns the tls.Config of a connection to addr: the base one, or
// with no server name configured a copy naming addr's host (shares the
// session cache). Called once per new connection.
func (c *ClientTLS) config(addr string) *tls.Config {
	if c.base.ServerName != "" {
		return c.base
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	cfg := c.base.Clone()
	cfg.ServerName = strings.TrimSuffix(host, ".") // a fully qualified name's root dot is not sent (RFC 6066)
	return cfg
}

// TLSError is a failed TLS handshake with an endpoint (or a TLS alert it
// sent before any response): the attempt never reached the application.
type TLSError struct {
	// Detail is one of TLSUnknownAuthority, TLSNameMismatch, TLSExpired,
	// TLSHandshakeFailure.
	Detail string
	// Err is the handshake's error.
	Err error
}

func (e *TLSError) Error() string { return "upstream TLS " + e.Detail + ": " + e.Err.Error() }
func (e *TLSError) Unwrap() error { return e.Err }

// TLSHandshakeFailed marks the error as a failed handshake for packages
// that do not import this one (internal/health).
func (e *TLSError) TLSHandshakeFailed() bool { return true }

// TLSFailure returns the detail of err when it is a failed TLS handshake
// with an endpoint (a *TLSError), or "". Called only for a failed
// attempt.
func TLSFailure(err error) string {
	var te *TLSError
	if errors.As(err, &te) {
		return te.Detail
	}
	return ""
}

// classifyTLS names a handshake error by the fixed set of details.
func classifyTLS(err error) string {
	var unknown x509.UnknownAuthorityError
	if errors.As(err, &unknown) {
		return TLSUnknownAuthority
	}
	var host x509.HostnameError
	if errors.As(err, &host) {
		return TLSNameMismatch
	}
	var invalid x509.CertificateInvalidError
	if errors.As(err, &invalid) && invalid.Reason == x509.Expired {
		return TLSExpired
	}
	return TLSHandshakeFailure
}

// remoteAlert reports whether err is a TLS alert the endpoint sent (the
// crypto/tls package reports one as a *net.OpError with Op "remote
// error"). Under TLS 1.3 an endpoint that refuses the client's
// certificate says so after the client's handshake has returned, on the
// first read.
func remoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// asTLSError returns err as a *TLSError when it is an endpoint's TLS
// alert, otherwise err. Only for errors met before any byte of a response.
func asTLSError(err error) error {
	if err != nil && remoteAlert(err) && TLSFailure(err) == "" {
		return &TLSError{Detail: TLSHandshakeFailure, Err: err}
	}
	return err
}

// dialTLS opens a connection to addr and completes the TLS handshake with
// c's configuration, both within timeout (0: ctx alone bounds them). The
// socket reads and writes through rawsock beneath TLS. A handshake that
// fails is a *TLSError; a dial that fails is the dialer's error, as
// without TLS.
//
// alpn, when set, replaces the protocols offered (HTTP/2: protocol.go).
func dialTLS(ctx context.Context, d *net.Dialer, c *ClientTLS, addr string, timeout time.Duration, alpn []string) (net.Conn, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	nc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cfg := c.config(addr)
	if alpn != nil {
		if cfg == c.base {
			cfg = cfg.Clone()
		}
		cfg.NextProtos = alpn
	}
	tc := tls.Client(rawsock.Wrap(nc), cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		_ = nc.Close()
		if ctx.Err() != nil && !remoteAlert(err) {
			// The client left, the attempt's time ran out, or the
			// handshake outlasted the connect timeout.
			return nil, &net.OpError{Op: "dial", Net: "tcp", Addr: nc.RemoteAddr(), Err: context.Cause(ctx)}
		}
		return nil, &TLSError{Detail: classifyTLS(err), Err: err}
	}
	return tc, nil
}
