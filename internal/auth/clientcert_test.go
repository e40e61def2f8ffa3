package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"errors"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"
)

// leafWith returns a self-signed certificate with the given names, as
// crypto/tls would hand it in a verified chain.
func leafWith(t testing.TB, dns []string, uris ...string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: dns}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func verified(c *x509.Certificate) *tls.ConnectionState {
	return &tls.ConnectionState{PeerCertificates: []*x509.Certificate{c}, VerifiedChains: [][]*x509.Certificate{{c}}}
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// TestIdentifyClientCert: a fingerprint, a SAN URI and a SAN DNS name
// each identify their app; the fingerprint wins over names; names of two
// apps are ambiguous; an unverified certificate is missing; a value two
// apps map admits neither.
func TestIdentifyClientCert(t *testing.T) {
	pinned := leafWith(t, []string{"orders.internal"}, "spiffe://example.org/ns/prod/sa/orders")
	byURI := leafWith(t, nil, "SPIFFE://Example.ORG/ns/prod/sa/orders")
	byDNS := leafWith(t, []string{"Billing.Internal"})
	both := leafWith(t, []string{"billing.internal"}, "spiffe://example.org/ns/prod/sa/orders")
	stranger := leafWith(t, []string{"other.internal"}, "spiffe://example.org/ns/prod/sa/other")
	x := (*Index)(nil).WithCerts([]CertMapping{
		{AppID: "pinned", ID: "c1", Kind: CertFingerprint, Value: fingerprint(pinned)},
		{AppID: "orders", ID: "c2", Kind: CertSANURI, Value: "spiffe://example.org/ns/prod/sa/orders"},
		{AppID: "billing", ID: "c3", Kind: CertSANDNS, Value: "billing.internal"},
		{AppID: "a", ID: "c4", Kind: CertSANDNS, Value: "shared.internal"},
		{AppID: "b", ID: "c5", Kind: CertSANDNS, Value: "shared.internal"},
	})
	for _, tc := range []struct {
		name    string
		st      *tls.ConnectionState
		app, id string
		err     error
	}{
		{"fingerprint wins over its SAN", verified(pinned), "pinned", "c1", nil},
		{"SAN URI, scheme and host in any case", verified(byURI), "orders", "c2", nil},
		{"SAN DNS, any case", verified(byDNS), "billing", "c3", nil},
		{"names of two apps", verified(both), "", "", ErrClientCertAmbiguous},
		{"no mapping", verified(stranger), "", "", ErrClientCertUnknown},
		{"shared value admits neither", verified(leafWith(t, []string{"shared.internal"})), "", "", ErrClientCertUnknown},
		{"peer certificate not verified", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{pinned}}, "", "", ErrClientCertMissing},
		{"clear text", nil, "", "", ErrClientCertMissing},
	} {
		app, id, err := x.IdentifyClientCert(tc.st)
		if app != tc.app || id != tc.id || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: got %q %q %v, want %q %q %v", tc.name, app, id, err, tc.app, tc.id, tc.err)
		}
	}
	if c := x.Conflicts(); len(c) != 1 || c[0].Apps != [2]string{"a", "b"} || c[0].Key != "c5" {
		t.Errorf("conflicts = %v, want the shared DNS name of a and b", c)
	}
	if x.CertLen() != 3 {
		t.Errorf("CertLen = %d, want 3", x.CertLen())
	}
	// The original index is not changed by WithCerts.
	base, _ := NewIndex(nil)
	if base.WithCerts(nil); base.certs != nil {
		t.Error("WithCerts changed its receiver")
	}
}

// TestIdentifyClientCertAllocs: the request path's lookup allocates
// nothing, by fingerprint or by name.
func TestIdentifyClientCertAllocs(t *testing.T) {
	pinned := leafWith(t, nil)
	named := leafWith(t, []string{"A.example", "Orders.Internal"}, "spiffe://example.org/x")
	x := (*Index)(nil).WithCerts([]CertMapping{
		{AppID: "p", ID: "1", Kind: CertFingerprint, Value: fingerprint(pinned)},
		{AppID: "o", ID: "2", Kind: CertSANDNS, Value: "orders.internal"},
		{AppID: "o", ID: "3", Kind: CertSANURI, Value: "spiffe://example.org/x"},
	})
	for _, c := range []*x509.Certificate{pinned, named} {
		st := verified(c)
		if n := testing.AllocsPerRun(100, func() {
			if _, _, err := x.IdentifyClientCert(st); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("IdentifyClientCert allocates %v times", n)
		}
	}
}

func TestCanonicalCertValue(t *testing.T) {
	fp := strings.Repeat("ab", 32)
	colons := strings.TrimSuffix(strings.Repeat("AB:", 32), ":")
	for _, tc := range []struct {
		kind      CertKind
		in, want  string
		wantError string
	}{
		{CertFingerprint, strings.ToUpper(fp), fp, ""},
		{CertFingerprint, colons, fp, ""},
		{CertFingerprint, fp[:63], "", "64 hex digits"},
		{CertFingerprint, strings.Repeat("zz", 32), "", "not hex"},
		{CertSANDNS, "Orders.Internal", "orders.internal", ""},
		{CertSANDNS, "*.internal", "", "wildcard"},
		{CertSANDNS, "orders.internal.", "", "trailing dot"},
		{CertSANDNS, "-a.b", "", "begin or end"},
		{CertSANDNS, "a b", "", "only letters"},
		{CertSANURI, "SPIFFE://Example.org/ns/a", "spiffe://example.org/ns/a", ""},
		{CertSANURI, "spiffe://example.org/ns/a?x=1", "", "without user, query or fragment"},
		{CertSANURI, "spiffe://example.org/ns/a#f", "", "without user, query or fragment"},
		{CertSANURI, "/relative", "", "absolute URI"},
		{CertSANURI, "urn:x:y", "", "absolute URI"},
		{"subject", "CN=x", "", "kind must be"},
	} {
		got, err := CanonicalCertValue(tc.kind, tc.in)
		if tc.wantError != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantError) {
				t.Errorf("%s %q: got %q, %v; want an error with %q", tc.kind, tc.in, got, err, tc.wantError)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s %q: got %q, %v; want %q", tc.kind, tc.in, got, err, tc.want)
		}
	}
}

// FuzzCanonicalCertValue: the canonicaliser of the admin API's mapping
// values never panics; what it accepts is canonical (a fixed point),
// bounded, and admitted by the index; a URI or DNS name it accepts
// matches a certificate carrying it.
func FuzzCanonicalCertValue(f *testing.F) {
	for _, s := range []string{strings.Repeat("ab", 32), strings.TrimSuffix(strings.Repeat("0F:", 32), ":"), "orders.internal",
		"Orders.Internal", "*.x", "spiffe://example.org/ns/prod/sa/orders", "spiffe://EX/a%20b", "spiffe://h/%2f", "x://h", "spiffe://u@h/p", ""} {
		for _, k := range []uint8{0, 1, 2, 3} {
			f.Add(k, s)
		}
	}
	f.Fuzz(func(t *testing.T, k uint8, v string) {
		kinds := []CertKind{CertFingerprint, CertSANDNS, CertSANURI, "other"}
		kind := kinds[int(k)%len(kinds)]
		c, err := CanonicalCertValue(kind, v)
		if err != nil {
			if len(err.Error()) > 300 {
				t.Fatalf("error of %d bytes: %v", len(err.Error()), err)
			}
			return
		}
		if again, err := CanonicalCertValue(kind, c); err != nil || again != c {
			t.Fatalf("%s %q: canonical %q gives %q, %v", kind, v, c, again, err)
		}
		if len(c) > MaxCertURILen {
			t.Fatalf("canonical value of %d bytes", len(c))
		}
		x := (*Index)(nil).WithCerts([]CertMapping{{AppID: "a", ID: "1", Kind: kind, Value: c}})
		if x.CertLen() != 1 {
			t.Fatalf("%s %q: the index refuses canonical %q", kind, v, c)
		}
		var leaf *x509.Certificate
		switch kind {
		case CertSANDNS:
			leaf = &x509.Certificate{Raw: []byte("x"), DNSNames: []string{strings.ToUpper(c)}}
		case CertSANURI:
			u, err := url.Parse(v) // as a certificate would carry the value given
			if err != nil {
				t.Fatalf("%q accepted but does not parse: %v", v, err)
			}
			leaf = &x509.Certificate{Raw: []byte("x"), URIs: []*url.URL{u}}
		default:
			return
		}
		if app, _, err := x.IdentifyClientCert(verified(leaf)); err != nil || app != "a" {
			t.Fatalf("%s %q (canonical %q): a certificate carrying it is not identified: %q %v", kind, v, c, app, err)
		}
	})
}

func BenchmarkIdentifyClientCert(b *testing.B) {
	pinned := leafWith(b, nil)
	x := (*Index)(nil).WithCerts([]CertMapping{{AppID: "p", ID: "1", Kind: CertFingerprint, Value: fingerprint(pinned)}})
	st := verified(pinned)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := x.IdentifyClientCert(st); err != nil {
			b.Fatal(err)
		}
	}
}
