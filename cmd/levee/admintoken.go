package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/levee-gw/levee/internal/adminclient"
	"github.com/levee-gw/levee/internal/config"
)

// The environment of the admin CLI (levee apps, levee data-apis): adminEnv
// is the admin API's URL when -admin is not given, tokenFileEnv a file
// holding the admin token when -token-file is not given
// (legacyTokenFileEnv, its earlier name, is still read after it).
const (
	adminEnv           = "LEVEE_ADMIN"
	tokenFileEnv       = "LEVEE_TOKEN_FILE"
	legacyTokenFileEnv = "LEVEE_ADMIN_TOKEN_FILE"
)

// cliFile reads the CLI file (config.CLIFilePath: $XDG_CONFIG_HOME or
// ~/.config, levee/cli.yaml); none is no error. A problem in it is
// placed in it: "file:line:col: key: message".
func cliFile() (config.CLIDefaults, error) {
	path := config.CLIFilePath()
	if path == "" {
		return config.CLIDefaults{}, nil
	}
	d, err := config.ReadCLIFile(path)
	var errs *config.Errors
	if errors.As(err, &errs) {
		lines := make([]string, len(*errs))
		for i, fe := range *errs {
			lines[i] = fe.Located(path)
		}
		return d, errors.New(strings.Join(lines, "\n"))
	}
	return d, err
}

// demoStatePattern names the directory `levee demo` keeps its state in
// (its generated admin token included), under the temp directory, removed
// when the demo stops; `levee apps` looks there for the demo's token.
const demoStatePattern = "levee-demo-*"

// maxDemoDirs bounds the demo state directories looked at.
const maxDemoDirs = 16

// demoTokens returns the admin token files of running demos, the newest
// first (a demo killed before it could remove its directory leaves one
// behind: the newest is the likeliest to be running).
func demoTokens() []string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), demoStatePattern))
	type tok struct {
		path string
		mod  time.Time
	}
	var toks []tok
	for _, d := range dirs {
		p := filepath.Join(d, config.AdminTokenFileName)
		if fi, err := os.Stat(p); err == nil {
			toks = append(toks, tok{p, fi.ModTime()})
		}
	}
	slices.SortFunc(toks, func(a, b tok) int { return b.mod.Compare(a.mod) })
	out := make([]string, 0, min(len(toks), maxDemoDirs))
	for i := 0; i < len(toks) && i < maxDemoDirs; i++ {
		out = append(out, toks[i].path)
	}
	return out
}

// adminTarget is where `levee apps` and `levee data-apis` send their calls
// and with which token.
type adminTarget struct {
	url, token string
	// tokenFrom says where the token came from, for a refusal's hint:
	// the file, or "" when no token is sent.
	tokenFrom string
}

// resolveAdmin decides the admin address and token of a CLI call. The
// rule for both: a flag, else the environment, else the CLI file
// (cliFile), else what -config FILE implies, else the built-in default.
//
//   - the token: -token-file, else $LEVEE_TOKEN_FILE (or
//     $LEVEE_ADMIN_TOKEN_FILE), else the CLI file's token_file, else with
//     -config FILE that file's admin.token_file (or its first write token
//     of admin.tokens, else its first token), or the token levee generated
//     in its state_dir (none with admin.token: none); without -config the
//     generated token of the default state_dir (./levee-state), else that
//     of `levee demo`; else no token (reads may still work).
//   - the address: -admin when given, else $LEVEE_ADMIN, else the CLI
//     file's admin, else with -config its admin.listen (an unspecified
//     host is called on 127.0.0.1), else the default.
//
// A generated token file readable by group or others is refused, as levee
// refuses it: its token may have leaked.
func resolveAdmin(adminURL string, adminSet bool, tokenFile, configPath string) (adminTarget, error) {
	t := adminTarget{url: adminURL}
	defaults, err := cliFile()
	if err != nil {
		return t, fmt.Errorf("the CLI file: %w", err)
	}
	if !adminSet {
		if u := cmp.Or(os.Getenv(adminEnv), defaults.Admin); u != "" {
			t.url, adminSet = u, true
		}
	}
	if tokenFile == "" {
		tokenFile = cmp.Or(os.Getenv(tokenFileEnv), os.Getenv(legacyTokenFileEnv), defaults.TokenFile)
	}
	if tokenFile != "" {
		tok, err := config.ReadTokenFile(tokenFile)
		if err != nil {
			return t, fmt.Errorf("-token-file: %w", err)
		}
		t.token, t.tokenFrom = tok, tokenFile
		if configPath == "" {
			return t, nil
		}
	}
	candidates := append([]string{filepath.Join(config.DefaultStateDir, config.AdminTokenFileName)}, demoTokens()...)
	if configPath != "" {
		cfg, err := config.Load(configPath)
		if err != nil {
			return t, fmt.Errorf("-config %s: %w", configPath, err)
		}
		if !adminSet {
			if u, ok := adminURLOf(cfg.Admin.Listen); ok {
				t.url = u
			}
		}
		if t.token != "" {
			return t, nil
		}
		a := cfg.Admin
		switch {
		case a.TokenFile != "":
			return readConfigured(t, a.TokenFile)
		case len(a.Tokens) > 0:
			pick := a.Tokens[0]
			for _, tok := range a.Tokens {
				if tok.Scope == config.AdminScopeWrite {
					pick = tok
					break
				}
			}
			return readConfigured(t, pick.File)
		case a.Token == config.AdminTokenNone:
			return t, nil
		}
		candidates = []string{filepath.Join(cfg.StateDir, config.AdminTokenFileName)}
	}
	for _, path := range candidates { // at most 1 + maxDemoDirs
		tok, err := readGenerated(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return t, err
		}
		t.token, t.tokenFrom = tok, path
		return t, nil
	}
	return t, nil
}

// readConfigured reads a token file the configuration names.
func readConfigured(t adminTarget, path string) (adminTarget, error) {
	tok, err := config.ReadTokenFile(path)
	if err != nil {
		return t, fmt.Errorf("-config: %w", err)
	}
	t.token, t.tokenFrom = tok, path
	return t, nil
}

// readGenerated reads a token levee generated, refusing a file others may
// read; an error wrapping fs.ErrNotExist when there is none.
func readGenerated(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("the admin token %s: %w", path, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("the admin token %s has mode %04o: group or others may read it; chmod 600 it (levee refuses it too)", path, perm)
	}
	tok, err := config.ReadTokenFile(path)
	if err != nil {
		return "", fmt.Errorf("the admin token: %w", err)
	}
	return tok, nil
}

// adminURLOf returns the URL to call an admin listener on listen at:
// an empty or unspecified host is called on loopback; port 0 cannot be
// known (false).
func adminURLOf(listen string) (string, bool) {
	host, port, err := net.SplitHostPort(listen)
	if err != nil || port == "0" {
		return "", false
	}
	if a, err := netip.ParseAddr(host); host == "" || (err == nil && a.IsUnspecified()) {
		host = "127.0.0.1"
		if err == nil && a.Is6() && !a.Is4In6() {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port), true
}

// newAdminClient is the admin API's client for levee apps and levee
// data-apis (resolveAdmin says how it finds the address and the token).
func newAdminClient(adminURL string, adminSet bool, tokenFile, configPath string) (*adminclient.Client, adminTarget, error) {
	t, err := resolveAdmin(adminURL, adminSet, tokenFile, configPath)
	if err != nil {
		return nil, t, err
	}
	c, err := adminclient.New(t.url, t.token)
	if err != nil {
		return nil, t, fmt.Errorf("-admin: %w", err)
	}
	return c, t, nil
}

// refusalHint is what to add to a 401 refusal: which token was sent.
func refusalHint(err error, t adminTarget) string {
	var ae *adminclient.Error
	if !errors.As(err, &ae) || ae.Status != 401 {
		return ""
	}
	if t.tokenFrom == "" {
		return fmt.Sprintf(" (no token found: pass -token-file FILE, set %s, token_file in %s, or -config FILE of the levee you call)", tokenFileEnv, cmp.Or(config.CLIFilePath(), "~/.config/levee/cli.yaml"))
	}
	return " (the token sent was " + t.tokenFrom + "'s)"
}
