package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
)

// certFlags are the flags of "levee apps cert-add": exactly one mapping.
type certFlags struct {
	fingerprint, certFile, sanDNS, sanURI *string
}

func (c *certFlags) register(fs *flag.FlagSet) {
	c.fingerprint = fs.String("fingerprint", "", "the certificate's SHA-256 (64 hex digits, or openssl's AB:CD:... form)")
	c.certFile = fs.String("cert-file", "", "a PEM file: map its first certificate's SHA-256 fingerprint")
	c.sanDNS = fs.String("san-dns", "", "a DNS name among the certificate's subject alternative names")
	c.sanURI = fs.String("san-uri", "", "a URI among the certificate's subject alternative names (a SPIFFE ID)")
}

// maxCertFile bounds what -cert-file reads: a certificate chain is a few
// KiB.
const maxCertFile = 1 << 20

// body is the JSON body of POST .../certificates: the one mapping the
// flags name (the server checks its value).
func (c *certFlags) body() ([]byte, error) {
	doc := map[string]string{}
	if *c.fingerprint != "" {
		doc["fingerprint_sha256"] = *c.fingerprint
	}
	if *c.certFile != "" {
		fp, err := pemFingerprint(*c.certFile)
		if err != nil {
			return nil, err
		}
		doc["fingerprint_sha256"] = fp
	}
	if *c.sanDNS != "" {
		doc["san_dns"] = *c.sanDNS
	}
	if *c.sanURI != "" {
		doc["san_uri"] = *c.sanURI
	}
	if n := len(doc) + boolInt(*c.fingerprint != "" && *c.certFile != ""); n != 1 {
		return nil, errors.New("give exactly one of -fingerprint, -cert-file, -san-dns and -san-uri")
	}
	return json.Marshal(doc)
}

// pemFingerprint is the hex SHA-256 of the DER bytes of the first
// CERTIFICATE block of file.
func pemFingerprint(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxCertFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxCertFile {
		return "", fmt.Errorf("%s: longer than %d bytes", file, maxCertFile)
	}
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return "", fmt.Errorf("%s: no PEM CERTIFICATE block", file)
		}
		if blk.Type == "CERTIFICATE" {
			sum := sha256.Sum256(blk.Bytes)
			return hex.EncodeToString(sum[:]), nil
		}
	}
}
