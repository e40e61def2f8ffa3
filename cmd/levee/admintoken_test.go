package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/testkit"
)

// TestCLIFindsGeneratedToken: a levee run with no admin token configured
// writes one into state_dir (mode 0600) and logs the file, not the token;
// `levee apps` then writes with it given no token flag, found in
// ./levee-state or through -config; a write with another token is 401
// with a hint naming the file sent; a generated token file others may
// read is refused by the CLI; `levee validate` and `levee run` refuse
// admin.token: none off loopback alike.
func TestCLIFindsGeneratedToken(t *testing.T) {
	t.Setenv(tokenFileEnv, "")
	cfg := writeFile(t, `
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
upstreams:
  u: {endpoints: [{address: 127.0.0.1:1}]}
routes:
  - {name: video, match: {path_prefix: /}, upstream: u, auth: api_key}
`)
	p := startProcess(t, "run", "-config", cfg)
	tokPath := filepath.Join(p.cmd.Dir, "levee-state", "admin-token")
	fi, err := os.Stat(tokPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("generated token: %v %v, want mode 0600", fi, err)
	}
	tok, _ := os.ReadFile(tokPath)
	if n := len(strings.TrimSpace(string(tok))); n != 64 {
		t.Errorf("token of %d characters, want 64 hex digits", n)
	}
	// The line follows "levee listening", which startProcess waited for.
	testkit.Until(t, 10*time.Second, "the admin token's log line", func() bool { return strings.Contains(p.log(), "levee-state/admin-token") })
	if log := p.log(); !strings.Contains(log, `"file":"`+tokPath+`"`) || strings.Contains(log, strings.TrimSpace(string(tok))) {
		t.Errorf("the startup log should name the file and never the token:\n%s", log)
	}
	cli := func(args ...string) (int, string) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := run(append([]string{"apps"}, args...), &out, &errOut)
		return code, out.String() + errOut.String()
	}

	t.Chdir(p.cmd.Dir) // where levee's ./levee-state is
	if code, out := cli("create", "-id", "found-by-default", "-admin", p.admin); code != 0 {
		t.Fatalf("create with the token found in ./levee-state: %d %s", code, out)
	}
	if code, out := cli("key-create", "found-by-default", "-config", cfg, "-admin", p.admin); code != 0 || !strings.Contains(out, `"key": "lvk_`) {
		t.Fatalf("key-create with -config: %d %s", code, out)
	}
	other := filepath.Join(t.TempDir(), "other")
	if err := os.WriteFile(other, []byte("not-the-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := cli("delete", "found-by-default", "-admin", p.admin, "-token-file", other); code != 1 ||
		!strings.Contains(out, "401 unauthorized") || !strings.Contains(out, "the token sent was "+other+"'s") {
		t.Errorf("delete with another token: %d %s", code, out)
	}
	if code, out := cli("list", "-admin", p.admin, "-token-file", other); code != 0 || !strings.Contains(out, "found-by-default") {
		t.Errorf("list (a read: open with the generated token) with another token: %d %s", code, out)
	}
	if err := os.Chmod(tokPath, 0o644); err != nil {
		t.Fatal(err)
	}
	if code, out := cli("delete", "found-by-default", "-admin", p.admin); code != 2 || !strings.Contains(out, "mode 0644") {
		t.Errorf("a token file others may read: %d %s, want refused naming the mode", code, out)
	}
	if err := os.Chmod(tokPath, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := cli("delete", "found-by-default", "-admin", p.admin); code != 0 {
		t.Errorf("delete with the generated token: %d %s", code, out)
	}
	// No flag at all, from a directory with no ./levee-state: the address
	// and the token from the environment, then from the CLI file.
	t.Chdir(t.TempDir())
	t.Setenv(adminEnv, p.admin)
	t.Setenv(tokenFileEnv, tokPath)
	if code, out := cli("create", "-id", "by-environment"); code != 0 {
		t.Errorf("create with LEVEE_ADMIN and LEVEE_TOKEN_FILE: %d %s", code, out)
	}
	t.Setenv(adminEnv, "")
	t.Setenv(tokenFileEnv, "")
	xdg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", xdg)
	os.MkdirAll(filepath.Join(xdg, "levee"), 0o700)
	if err := os.WriteFile(filepath.Join(xdg, "levee", "cli.yaml"), []byte("admin: "+p.admin+"\ntoken_file: "+tokPath+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := cli("delete", "by-environment"); code != 0 {
		t.Errorf("delete with the CLI file's admin and token_file: %d %s", code, out)
	}

	open := writeFile(t, `
listen: 127.0.0.1:0
admin: {listen: "0.0.0.0:0", token: none}
upstreams:
  u: {endpoints: [{address: 127.0.0.1:1}]}
routes:
  - {name: video, match: {path_prefix: /}, upstream: u}
`)
	const want = `admin.token: "none" (no token) is allowed only with a loopback admin.listen`
	var out, errOut bytes.Buffer
	if code := run([]string{"validate", "-config", open}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), want) {
		t.Errorf("validate: %d %s", code, errOut.String())
	}
	errOut.Reset()
	if code := run([]string{"run", "-config", open}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), want) {
		t.Errorf("run: %d %s", code, errOut.String())
	}
}
