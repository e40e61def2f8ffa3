package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLIDefaultsPrecedence: the admin CLI's address and token come from
// the flags, else $LEVEE_ADMIN and $LEVEE_TOKEN_FILE (or the earlier
// $LEVEE_ADMIN_TOKEN_FILE), else the CLI file ($XDG_CONFIG_HOME/levee/cli.yaml,
// its relative token_file against its directory), else what -config
// implies, else the built-in default; a problem in the CLI file is
// refused, placed in it (file:line:col). Each level is set in turn with
// every level below it also set, so a level that lost its precedence
// fails.
func TestCLIDefaultsPrecedence(t *testing.T) {
	dir := t.TempDir()
	token := func(name string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(name+"-token-0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	flagTok, envTok, legacyTok, fileTok, cfgTok := token("flag"), token("env"), token("legacy"), token("file"), token("config")
	xdg := filepath.Join(dir, "xdg")
	os.MkdirAll(filepath.Join(xdg, "levee"), 0o700)
	cliYAML := filepath.Join(xdg, "levee", "cli.yaml")
	// A relative token_file resolves against the CLI file's directory.
	if err := os.Rename(fileTok, filepath.Join(xdg, "levee", "file")); err != nil {
		t.Fatal(err)
	}
	fileTok = filepath.Join(xdg, "levee", "file")
	if err := os.WriteFile(cliYAML, []byte("admin: http://127.0.0.1:7003\ntoken_file: file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeFile(t, `
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:7004, token_file: `+cfgTok+`}
upstreams:
  u: {endpoints: [{address: 127.0.0.1:1}]}
routes:
  - {name: r, match: {path_prefix: /}, upstream: u}
`)
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Setenv(adminEnv, "http://127.0.0.1:7002")
	t.Setenv(tokenFileEnv, envTok)
	t.Setenv(legacyTokenFileEnv, legacyTok)
	const defaultURL = "http://" + defaultAdminAddr
	check := func(level string, adminURL string, adminSet bool, tokenFile, wantURL, wantToken string) {
		t.Helper()
		got, err := resolveAdmin(adminURL, adminSet, tokenFile, cfg)
		if err != nil || got.url != wantURL || got.tokenFrom != wantToken {
			t.Errorf("%s: url %q token %q (%v), want %q and %q", level, got.url, got.tokenFrom, err, wantURL, wantToken)
		}
	}
	check("flags", "http://127.0.0.1:7001", true, flagTok, "http://127.0.0.1:7001", flagTok)
	check("environment", defaultURL, false, "", "http://127.0.0.1:7002", envTok)
	t.Setenv(tokenFileEnv, "")
	check("the earlier environment variable", defaultURL, false, "", "http://127.0.0.1:7002", legacyTok)
	t.Setenv(adminEnv, "")
	t.Setenv(legacyTokenFileEnv, "")
	check("the CLI file", defaultURL, false, "", "http://127.0.0.1:7003", fileTok)
	os.Remove(cliYAML)
	check("-config", defaultURL, false, "", "http://127.0.0.1:7004", cfgTok)
	if got, err := resolveAdmin(defaultURL, false, "", ""); err != nil || got.url != defaultURL {
		t.Errorf("built-in default: url %q (%v), want %q", got.url, err, defaultURL)
	}

	os.WriteFile(cliYAML, []byte("admin: http://127.0.0.1:7003\ntokenfile: x\nadmin_url: [1]\n"), 0o600)
	_, err := resolveAdmin(defaultURL, false, "", "")
	want := cliYAML + `:2:1: tokenfile: unknown field (did you mean "token_file"?)` + "\n" + cliYAML + `:3:1: admin_url: unknown field`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a CLI file with unknown keys: %v, want it to hold\n%s", err, want)
	}
	os.WriteFile(cliYAML, []byte("admin: [http://127.0.0.1:7003]\n"), 0o600)
	if _, err := resolveAdmin(defaultURL, false, "", ""); err == nil || !strings.Contains(err.Error(), cliYAML+":1:8: admin: must be a string, got a sequence") {
		t.Errorf("a CLI file with a value of the wrong type: %v", err)
	}
	os.WriteFile(cliYAML, []byte("admin: [\n"), 0o600)
	if _, err := resolveAdmin(defaultURL, false, "", ""); err == nil || !strings.Contains(err.Error(), cliYAML+":1: yaml: ") {
		t.Errorf("a CLI file with a syntax error: %v", err)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", dir)
	os.MkdirAll(filepath.Join(dir, ".config", "levee"), 0o700)
	os.WriteFile(filepath.Join(dir, ".config", "levee", "cli.yaml"), []byte("admin: http://127.0.0.1:7005\ntoken_file: ~/flag\n"), 0o600)
	if got, err := resolveAdmin(defaultURL, false, "", ""); err != nil || got.url != "http://127.0.0.1:7005" || got.tokenFrom != flagTok {
		t.Errorf("~/.config/levee/cli.yaml without XDG_CONFIG_HOME: url %q token %q (%v)", got.url, got.tokenFrom, err)
	}
}
