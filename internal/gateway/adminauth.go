package gateway

import (
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
// config.AdminTokenFileName, making it first when there is none
// (admin.GeneratedToken).
func generatedAdminToken(stateDir string) (tok, path string, created bool, err error) {
	return admin.GeneratedToken(stateDir, config.AdminTokenFileName, config.ReadTokenFile)
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
