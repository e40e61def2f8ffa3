package h1server

import (
	"crypto/tls"
	"fmt"
	"sync/atomic"
)

// Certificate is the data listener's certificate as loaded last: a reload
// loads a new one (Load) and the next handshake serves it. The zero value
// holds none; safe for concurrent use.
type Certificate struct {
	cert atomic.Pointer[tls.Certificate]
}

// Load reads the certificate and key pair; on error the one loaded before
// stays.
func (c *Certificate) Load(certFile, keyFile string) error {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return fmt.Errorf("tls: loading %s and %s: %w", certFile, keyFile, err)
	}
	c.cert.Store(&cert)
	return nil
}

// TLSConfig is the data listener's TLS configuration (Options.TLSConfig)
// over c: the certificate as loaded last, ALPN offering HTTP/2 first, as
// net/http's ServeTLS did.
func (c *Certificate) TLSConfig() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"h2", "http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return c.cert.Load(), nil
		},
	}
}
