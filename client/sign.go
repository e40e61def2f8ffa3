package client

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/levee-gw/levee/internal/auth"
)

// Sign signs req for levee's LEVEE-HMAC-SHA256 authentication: it sets the
// Date header to now (IMF-fixdate, UTC) and the Authorization header to
//
//	LEVEE-HMAC-SHA256 keyId=KEYID, signature=BASE64
//
// where the signature is the HMAC-SHA256, under secret, of the canonical
// request (method, escaped path, sorted query, Date, SHA-256 of body); see
// docs/authentication.md. body must be exactly the bytes req will send
// (nil for none): Sign does not read req.Body. Sign the request last, after
// its URL and method are final; levee refuses it once now is more than the
// server's skew (default 5 minutes) away, and refuses a second use of the
// same signature, so a retried request must be signed again.
func Sign(req *http.Request, keyID string, secret []byte, body []byte, now time.Time) error {
	if req.URL == nil {
		return errors.New("client: sign: request has no URL")
	}
	if req.URL.Opaque != "" {
		return errors.New("client: sign: opaque URLs are not supported")
	}
	if req.Header == nil {
		req.Header = http.Header{}
	}
	date := now.UTC().Format(http.TimeFormat)
	canon, err := auth.AppendCanonical(nil, req.Method, req.URL.EscapedPath(), req.URL.RawQuery, date, sha256.Sum256(body))
	if err != nil {
		return fmt.Errorf("client: sign: %w", err)
	}
	h, err := auth.FormatSignatureHeader(keyID, auth.MAC(secret, canon))
	if err != nil {
		return fmt.Errorf("client: sign: %w", err)
	}
	req.Header.Set("Date", date)
	req.Header.Set("Authorization", h)
	return nil
}
