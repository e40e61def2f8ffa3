package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestTLSRejects: what the tls reader refuses, each with its field path
// and the value or files at fault: the certificates are loaded as the
// gateway loads them (certset.Load), so `levee validate` refuses what
// `levee run` would.
func TestTLSRejects(t *testing.T) {
	const (
		pair  = "{cert_file: testdata/tls/cert.pem, key_file: testdata/tls/key.pem}"
		wild  = "{cert_file: testdata/tls/wild-cert.pem, key_file: testdata/tls/wild-key.pem}"
		other = "{cert_file: testdata/tls/other-cert.pem, key_file: testdata/tls/other-key.pem}"
	)
	for _, tc := range []struct {
		name, tls string
		want      []string
	}{
		{"the same name in two certificates", "{certificates: [" + pair + ", " + wild + ", " + other + "]}", []string{
			`tls.certificates[2]: name "localhost" is in two certificates: testdata/tls/cert.pem and testdata/tls/other-cert.pem`,
		}},
		{"the default's name in a listed certificate", "{cert_file: testdata/tls/other-cert.pem, key_file: testdata/tls/other-key.pem, certificates: [" + pair + "]}", []string{
			`tls.certificates[0]: name "localhost" is in two certificates: testdata/tls/other-cert.pem and testdata/tls/cert.pem`,
		}},
		{"a key of another certificate", "{certificates: [{cert_file: testdata/tls/cert.pem, key_file: testdata/tls/wild-key.pem}]}", []string{
			"tls.certificates[0]: loading testdata/tls/cert.pem and testdata/tls/wild-key.pem: tls: private key does not match public key",
		}},
		{"an item without its key", "{certificates: [{cert_file: testdata/tls/cert.pem}, 3]}", []string{
			"tls.certificates[0].key_file: required",
			"tls.certificates[1]: must be a mapping {cert_file, key_file}, got 3",
		}},
		{"key_file alone", "{key_file: testdata/tls/key.pem}", []string{
			"tls.cert_file: required with tls.key_file",
		}},
		{"an insecure cipher suite", "{cert_file: testdata/tls/cert.pem, key_file: testdata/tls/key.pem, cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, TLS_RSA_WITH_RC4_128_SHA, TLS_FOO]}", []string{
			`tls.cipher_suites[1]: "TLS_RSA_WITH_RC4_128_SHA" is insecure`,
			`tls.cipher_suites[2]: unknown cipher suite "TLS_FOO"`,
		}},
		{"a TLS 1.3 suite", "{cert_file: testdata/tls/cert.pem, key_file: testdata/tls/key.pem, cipher_suites: [TLS_AES_128_GCM_SHA256]}", []string{
			`tls.cipher_suites[0]: "TLS_AES_128_GCM_SHA256" is a TLS 1.3 suite, which is not configurable`,
		}},
		{"cipher suites with min_version 1.3", "{cert_file: testdata/tls/cert.pem, key_file: testdata/tls/key.pem, min_version: \"1.3\", cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]}", []string{
			`tls.cipher_suites: has no effect with min_version "1.3" (TLS 1.3 suites are not configurable); omit it`,
		}},
		{"min_version 1.1", "{cert_file: testdata/tls/cert.pem, key_file: testdata/tls/key.pem, min_version: \"1.1\", cipher_suites: []}", []string{
			`tls.min_version: must be one of "1.2", "1.3", got "1.1"`,
			"tls.cipher_suites: must list at least one suite (omit it for Go's defaults)",
		}},
		{"client_auth without a CA and a bad mode", "{cert_file: testdata/tls/cert.pem, key_file: testdata/tls/key.pem, client_auth: {mode: optional}}", []string{
			"tls.client_auth.ca_file: required",
			`tls.client_auth.mode: must be one of "require", "request", got "optional"`,
		}},
		{"client_auth CA file without a certificate", "{cert_file: testdata/tls/cert.pem, key_file: testdata/tls/key.pem, client_auth: {ca_file: testdata/tls/key.pem}}", []string{
			"tls.client_auth.ca_file: testdata/tls/key.pem holds no PEM certificate",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(head + "tls: " + tc.tls + "\n" + upstreams + routes))
			if err == nil || cfg != nil {
				t.Fatalf("Parse accepted it")
			}
			got := errorLines(t, err)
			if len(got) != len(tc.want) {
				t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tc.want[i]) {
					t.Errorf("error %d: %s\nwant it to begin %s", i, got[i], tc.want[i])
				}
			}
		})
	}
}

// TestTLSAccepts: the forms of tls that parse, read into TLS as the
// gateway's certset.Spec takes them.
func TestTLSAccepts(t *testing.T) {
	cfg, err := Parse([]byte(head + `tls:
  cert_file: testdata/tls/cert.pem
  key_file: testdata/tls/key.pem
  certificates: [{cert_file: testdata/tls/wild-cert.pem, key_file: testdata/tls/wild-key.pem}]
  min_version: "1.3"
  client_auth: {ca_file: testdata/tls/cert.pem, mode: request}
` + upstreams + routes))
	if err != nil {
		t.Fatal(err)
	}
	want := TLS{CertFile: "testdata/tls/cert.pem", KeyFile: "testdata/tls/key.pem",
		Certificates: []TLSCertificate{{"testdata/tls/wild-cert.pem", "testdata/tls/wild-key.pem"}},
		MinVersion:   "1.3", ClientAuth: &TLSClientAuth{CAFile: "testdata/tls/cert.pem", Mode: "request"}}
	if !reflect.DeepEqual(*cfg.TLS, want) {
		t.Fatalf("TLS %+v, want %+v", *cfg.TLS, want)
	}
	spec := cfg.TLS.Spec()
	if spec.Default.CertFile != want.CertFile || len(spec.Certificates) != 1 || spec.ClientAuth.Mode != "request" || spec.MinVersion != "1.3" {
		t.Fatalf("spec %+v", spec)
	}
}
