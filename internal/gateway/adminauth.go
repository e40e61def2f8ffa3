package gateway

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/levee-gw/levee/internal/admin"
	"github.com/levee-gw/levee/internal/config"
)

// adminAuth is what the admin listener's guards read per request, swapped
// whole on reload.
type adminAuth struct {
	tokens []admin.Token
	// generated is the path of the write token levee made (or reused)
	// under state_dir because no token is configured (admin.token:
	// generate); "" otherwise. With it, reads need no token.
	generated string
	// created says the token was made by this load, not read back.
	created bool
	hosts   []string
}

// adminTokens returns the admin API's bearer tokens (none: open).
func (g *Gateway) adminTokens() []admin.Token {
	if a := g.token.Load(); a != nil {
		return a.tokens
	}
	return nil
}

// adminOpenReads reports whether GET and HEAD need no token: only while
// the one token is the generated one.
func (g *Gateway) adminOpenReads() bool {
	a := g.token.Load()
	return a != nil && a.generated != ""
}

// adminHosts returns admin.hosts.
func (g *Gateway) adminHosts() []string {
	if a := g.token.Load(); a != nil {
		return a.hosts
	}
	return nil
}

// loadToken reads cfg's admin token files (admin.token_file, scope write,
// and admin.tokens) as config.Parse does; without any and with
// admin.token generate (the default), it reads or makes the generated
// token under state_dir. On error nothing changes.
func (g *Gateway) loadToken(cfg *config.Config) error {
	secrets, scopes, errs := config.ReadAdminTokens(cfg.Admin)
	if len(errs) > 0 {
		return &errs
	}
	a := &adminAuth{hosts: cfg.Admin.Hosts}
	if len(secrets) == 0 && cfg.Admin.Token != config.AdminTokenNone {
		tok, path, created, err := generatedAdminToken(cfg.StateDir)
		if err != nil {
			return err
		}
		secrets, scopes = []string{tok}, []string{config.AdminScopeWrite}
		a.generated, a.created = path, created
	}
	a.tokens = make([]admin.Token, len(secrets))
	for i, s := range secrets {
		scope := admin.ScopeRead
		if scopes[i] == config.AdminScopeWrite {
			scope = admin.ScopeWrite
		}
		a.tokens[i] = admin.NewToken(s, scope)
	}
	g.token.Store(a)
	return nil
}

// logAdminToken says at start where the generated token is (never the
// token), or that the admin API is open.
func (g *Gateway) logAdminToken() {
	a := g.token.Load()
	switch {
	case a == nil:
	case a.generated != "":
		verb := "reused"
		if a.created {
			verb = "generated"
		}
		g.logger.Info("admin API writes need the token in this file (admin.token: generate; set admin.token_file to choose your own)",
			"file", a.generated, "token", verb)
	case len(a.tokens) == 0:
		g.logger.Warn("the admin API takes writes without a token (admin.token: none); any local process can change levee")
	}
}

// generatedAdminToken returns the token in stateDir's
// config.AdminTokenFileName, making it first when there is none: 32
// random bytes as 64 hex digits, written to a file created with O_EXCL
// and mode 0600. A file that is not a regular file, is readable by group
// or others, or does not hold a token is an error (levee does not start):
// its token may have leaked or been planted.
func generatedAdminToken(stateDir string) (tok, path string, created bool, err error) {
	path = filepath.Join(stateDir, config.AdminTokenFileName)
	if abs, aerr := filepath.Abs(path); aerr == nil {
		path = abs // the log line and the demo name it whole
	}
	for range 2 { // a second try reads a file another process created at once
		tok, err = readGeneratedToken(path)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return tok, path, false, err
		}
		tok, err = writeGeneratedToken(stateDir, path)
		if err == nil || !errors.Is(err, fs.ErrExist) {
			return tok, path, err == nil, err
		}
	}
	return "", path, false, err
}

// readGeneratedToken reads the generated token file; an error wrapping
// fs.ErrNotExist when there is none.
func readGeneratedToken(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("admin.token: reading the generated admin token: %w; fix state_dir, or set admin.token_file (or admin.token: none on a loopback admin.listen)", err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("admin.token: the generated admin token %s is not a regular file; remove it to have a new one made, or set admin.token_file", path)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("admin.token: the generated admin token %s has mode %04o: group or others may read it; chmod 600 it, or remove it to have a new one made", path, perm)
	}
	tok, err := config.ReadTokenFile(path)
	if err != nil {
		return "", fmt.Errorf("admin.token: the generated admin token: %v; remove the file to have a new one made", err)
	}
	return tok, nil
}

// writeGeneratedToken makes the token file; an error wrapping fs.ErrExist
// when another process made it first.
func writeGeneratedToken(stateDir, path string) (string, error) {
	fail := func(err error) error {
		return fmt.Errorf("admin.token: cannot write the generated admin token under state_dir %q: %w; make state_dir writable, or set admin.token_file (or admin.token: none on a loopback admin.listen)", stateDir, err)
	}
	if err := os.MkdirAll(stateDir, 0o750); err != nil {
		return "", fail(err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return "", err
		}
		return "", fail(err)
	}
	var secret [32]byte
	_, _ = rand.Read(secret[:]) // never fails (crypto/rand)
	tok := hex.EncodeToString(secret[:])
	_, err = f.WriteString(tok + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path) // half a token would stop the next start
		return "", fail(err)
	}
	return tok, nil
}

// AdminTokenFile returns the file of the admin token levee generated
// (admin.token: generate, no token configured), "" when it uses
// configured tokens or none.
func (g *Gateway) AdminTokenFile() string {
	if a := g.token.Load(); a != nil {
		return a.generated
	}
	return ""
}
