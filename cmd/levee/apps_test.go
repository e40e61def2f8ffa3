package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAppsCLI drives "levee apps" against a real levee's admin listener
// (a child process on loopback, with a write token in token_file and a
// read token in admin.tokens).
func TestAppsCLI(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("cli-test-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	readFile := filepath.Join(dir, "read-token")
	if err := os.WriteFile(readFile, []byte("cli-read-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token_file: %s, tokens: [{file: `+readFile+`, scope: read}]}
state_dir: %s
upstreams:
  u: {endpoints: [{address: 127.0.0.1:1}]}
routes:
  - {name: video, match: {path_prefix: /}, upstream: u, auth: api_key}
`, tokenFile, filepath.Join(dir, "state")))
	p := startProcess(t, "run", "-config", cfg)
	cli := func(args ...string) (int, map[string]any, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(append(append([]string{"apps"}, args...), "-admin", p.admin, "-token-file", tokenFile), &out, &errOut)
		var doc map[string]any
		if code == 0 {
			if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
				t.Fatalf("apps %v: output is not JSON: %q", args, out.String())
			}
		}
		return code, doc, errOut.String()
	}

	code, doc, stderr := cli("create", "-id", "safety", "-grants", "video", "-rate", "2.5", "-quota", "1000/24h")
	if code != 0 || doc["id"] != "safety" || doc["limits"].(map[string]any)["burst"] != 3.0 {
		t.Fatalf("create: %d %v %s", code, doc, stderr)
	}
	code, _, stderr = cli("create", "-id", "safety")
	if code != 1 || !strings.Contains(stderr, "409 app_exists") {
		t.Errorf("duplicate create: %d %q", code, stderr)
	}
	code, _, stderr = cli("create", "-id", "x", "-grants", "nope")
	if code != 1 || !strings.Contains(stderr, "422 invalid_app") || !strings.Contains(stderr, `no route is named "nope"`) {
		t.Errorf("unknown grant: %d %q", code, stderr)
	}
	code, _, stderr = cli("create", "-json", `{"id":"y","bogus":1}`)
	if code != 1 || !strings.Contains(stderr, "400 bad_request") || !strings.Contains(stderr, "bogus") {
		t.Errorf("unknown JSON field: %d %q", code, stderr)
	}
	if code, doc, stderr = cli("patch", "safety", "-status", "suspended"); code != 0 || doc["status"] != "suspended" {
		t.Errorf("patch: %d %v %s", code, doc, stderr)
	}
	code, doc, stderr = cli("key-create", "safety")
	key, _ := doc["key"].(string)
	keyID, _ := doc["id"].(string)
	if code != 0 || !strings.HasPrefix(key, "lvk_") || keyID == "" {
		t.Fatalf("key-create: %d %v %s", code, doc, stderr)
	}
	if code, doc, _ = cli("get", "safety"); code != 0 || len(doc["keys"].([]any)) != 1 {
		t.Errorf("get: %d %v", code, doc)
	}
	if code, doc, _ = cli("key-revoke", "safety", keyID); code != 0 || doc["revoked"] == nil {
		t.Errorf("key-revoke: %d %v", code, doc)
	}
	if code, _, stderr = cli("key-revoke", "safety", keyID); code != 1 || !strings.Contains(stderr, "409 conflict") {
		t.Errorf("second revoke: %d %q", code, stderr)
	}
	// Basic-auth passwords: generated (printed once), chosen from a file,
	// a bad one refused by the store, revoked.
	code, doc, stderr = cli("password-create", "safety")
	pwID, _ := doc["id"].(string)
	if pw, _ := doc["password"].(string); code != 0 || !strings.HasPrefix(pw, "lvp_") || pwID == "" {
		t.Fatalf("password-create: %d %v %s", code, doc, stderr)
	}
	pwFile := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pwFile, []byte("correct horse battery\n"), 0o600)
	if code, doc, stderr = cli("password-create", "safety", "-password-file", pwFile); code != 0 || doc["password"] != nil {
		t.Errorf("password-create -password-file: %d %v %s", code, doc, stderr)
	}
	os.WriteFile(pwFile, []byte("short"), 0o600)
	if code, _, stderr = cli("password-create", "safety", "-password-file", pwFile); code != 1 || !strings.Contains(stderr, "422") {
		t.Errorf("a short password: %d %q", code, stderr)
	}
	if code, doc, _ = cli("password-revoke", "safety", pwID); code != 0 || doc["revoked"] == nil {
		t.Errorf("password-revoke: %d %v", code, doc)
	}
	if code, doc, _ = cli("get", "safety"); code != 0 || len(doc["passwords"].([]any)) != 2 {
		t.Errorf("get after passwords: %d %v", code, doc)
	}
	// Certificate mappings: by a PEM file's fingerprint and by a SAN,
	// listed, a value twice refused, deleted.
	certFile := filepath.Join(t.TempDir(), "c.pem")
	der := []byte("not really DER, but the fingerprint is of these bytes")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	sum := sha256.Sum256(der)
	code, doc, stderr = cli("cert-add", "safety", "-cert-file", certFile)
	certID, _ := doc["id"].(string)
	if code != 0 || doc["fingerprint_sha256"] != hex.EncodeToString(sum[:]) || certID == "" {
		t.Fatalf("cert-add -cert-file: %d %v %s", code, doc, stderr)
	}
	if code, doc, stderr = cli("cert-add", "safety", "-san-uri", "spiffe://Example.org/ns/a"); code != 0 || doc["san_uri"] != "spiffe://example.org/ns/a" {
		t.Errorf("cert-add -san-uri: %d %v %s", code, doc, stderr)
	}
	if code, _, stderr = cli("cert-add", "safety", "-san-uri", "spiffe://example.org/ns/a"); code != 1 || !strings.Contains(stderr, "409 conflict") {
		t.Errorf("cert-add twice: %d %q", code, stderr)
	}
	if code, _, stderr = cli("cert-add", "safety", "-san-dns", "a.b", "-san-uri", "x://y"); code != 2 || !strings.Contains(stderr, "exactly one") {
		t.Errorf("cert-add with two: %d %q", code, stderr)
	}
	if code, _, stderr = cli("cert-add", "safety", "-san-dns", "*.b"); code != 1 || !strings.Contains(stderr, "422") {
		t.Errorf("cert-add of a wildcard: %d %q", code, stderr)
	}
	if code, doc, _ = cli("cert-list", "safety"); code != 0 || len(doc["certificates"].([]any)) != 2 {
		t.Errorf("cert-list: %d %v", code, doc)
	}
	if code, doc, _ = cli("cert-delete", "safety", certID); code != 0 || doc["id"] != certID {
		t.Errorf("cert-delete: %d %v", code, doc)
	}
	cli("create", "-id", "second")
	if code, doc, _ = cli("list", "-limit", "1"); code != 0 || doc["next"] != "safety" {
		t.Errorf("list page: %d %v", code, doc)
	}
	if code, doc, _ = cli("list", "-all", "-limit", "1"); code != 0 || len(doc["apps"].([]any)) != 2 {
		t.Errorf("list -all: %d %v", code, doc)
	}
	if code, doc, _ = cli("delete", "second"); code != 0 || doc["deleted"] != "second" {
		t.Errorf("delete: %d %v", code, doc)
	}
	if code, _, stderr = cli("get", "second"); code != 1 || !strings.Contains(stderr, "404 not_found") {
		t.Errorf("get deleted: %d %q", code, stderr)
	}

	// With the read token: list and get work; a change is 403
	// insufficient_scope, exit 1, and changes nothing.
	var out, errOut bytes.Buffer
	readCLI := func(args ...string) (int, string) {
		out.Reset()
		errOut.Reset()
		return run(append(append([]string{"apps"}, args...), "-admin", p.admin, "-token-file", readFile), &out, &errOut), errOut.String()
	}
	if code, stderr := readCLI("get", "safety"); code != 0 || !strings.Contains(out.String(), `"safety"`) {
		t.Errorf("get with the read token: %d %q", code, stderr)
	}
	if code, stderr := readCLI("list"); code != 0 {
		t.Errorf("list with the read token: %d %q", code, stderr)
	}
	for _, args := range [][]string{{"create", "-id", "third"}, {"patch", "safety", "-status", "active"}, {"key-create", "safety"}, {"delete", "safety"}} {
		if code, stderr := readCLI(args...); code != 1 || !strings.Contains(stderr, "403 insufficient_scope") {
			t.Errorf("%v with the read token: %d %q, want exit 1 and 403 insufficient_scope", args, code, stderr)
		}
	}
	if code, doc, _ := cli("get", "safety"); code != 0 || doc["status"] != "suspended" || len(doc["keys"].([]any)) != 1 {
		t.Errorf("after the read token's refused changes: %d %v", code, doc)
	}

	// Without the token: 401 from the API, exit 1.
	out.Reset()
	errOut.Reset()
	if code := run([]string{"apps", "list", "-admin", p.admin}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "401 unauthorized") {
		t.Errorf("no token: %d %q", code, errOut.String())
	}
	for _, bad := range [][]string{{"apps"}, {"apps", "frob"}, {"apps", "get"}, {"apps", "key-revoke", "a"}, {"apps", "create", "-name", "x"}, {"apps", "create", "-id", "a", "-quota", "lots"}} {
		if code := run(bad, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}
