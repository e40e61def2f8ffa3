// Package auth authenticates consumers (apps) from what a request carries:
// an API key, or an HMAC signature over the request. It is pure: the app
// store hands it an immutable identity index (Index) built once per
// change, the request path hands it the request and the current time, and it answers with the
// app's ID or an *Error carrying a stable Reason.
//
// Every Reason maps to 401 unauthenticated; deciding that an authenticated
// app is suspended, or has no grant for the route (403 forbidden), is the
// caller's job: revoked keys are simply absent from the indexes, and an
// index holds no status.
//
// # API keys
//
// A key is presented as "Authorization: Bearer KEY" or "X-Api-Key: KEY"
// (ExtractAPIKey). Keys are stored only as SHA-256 digests; Index maps a
// presented key's digest to its app, and a signing key's ID to its app and
// secret, refusing a digest or key ID two apps hold. See Index for why the
// lookup leaks nothing useful about stored keys.
//
// # Signatures
//
// A signed request carries
//
//	Date: <IMF-fixdate>
//	Authorization: LEVEE-HMAC-SHA256 keyId=<key id>, signature=<base64 HMAC>
//
// where the HMAC-SHA256, under the key's secret, is over the canonical
// string built by AppendCanonical. Verifier checks the date against a skew
// window and refuses replays with a bounded cache of recent signatures.
// docs/authentication.md has the format, a worked example and the bounds.
package auth
