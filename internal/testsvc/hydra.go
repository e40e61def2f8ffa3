package testsvc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// HydraVersion is the Ory Hydra that scripts/install-services.sh builds
// from tools/hydra (its own module, so levee's go.mod does not grow) into
// HydraPath.
const HydraVersion = "v2.3.0"

// HydraPath is where scripts/install-services.sh puts the hydra binary:
// $LEVEE_TOOLS_DIR, or $XDG_CACHE_HOME/levee-tools, or
// ~/.cache/levee-tools, then hydra-<HydraVersion>/hydra.
func HydraPath() string {
	dir := os.Getenv("LEVEE_TOOLS_DIR")
	if dir == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			home, _ := os.UserHomeDir()
			cache = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(cache, "levee-tools")
	}
	return filepath.Join(dir, "hydra-"+HydraVersion, "hydra")
}

// Hydra is a running Ory Hydra OAuth 2.0 and OpenID Connect provider
// (`hydra serve all --dev`, an in-memory SQLite database, so a restart
// starts empty) issuing JWT access tokens, on two loopback ports.
type Hydra struct {
	// PublicURL is the issuer (with its trailing slash, as Hydra puts it
	// in iss) and the base of /.well-known/openid-configuration and
	// /oauth2/token; AdminURL the admin API's base.
	PublicURL, AdminURL string
	bin, dir            string
	proc                *daemon
	client              *http.Client
}

// StartHydra starts Hydra for t and stops it in t.Cleanup.
func StartHydra(t testing.TB) *Hydra {
	t.Helper()
	bin := HydraPath()
	if _, err := os.Stat(bin); err != nil {
		if requireServices() {
			t.Fatalf("Ory Hydra is not built at %s: run scripts/install-services.sh", bin)
		}
		t.Skipf("Ory Hydra is not built at %s (scripts/install-services.sh builds it; make test requires it)", bin)
	}
	// No kept-alive connections: Hydra closes idle ones, and a POST sent on
	// one it just closed fails with EOF rather than being retried.
	h := &Hydra{bin: bin, dir: t.TempDir(), client: &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{DisableKeepAlives: true}}}
	t.Cleanup(h.Stop)
	startOnFreePorts(t, "hydra", 2, func(ports []int) error {
		h.PublicURL = fmt.Sprintf("http://127.0.0.1:%d/", ports[0])
		h.AdminURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
		return h.start(ports)
	})
	return h
}

func (h *Hydra) start(ports []int) error {
	var err error
	h.proc, err = startDaemonEnv(filepath.Join(h.dir, "hydra.log"), []string{
		"DSN=memory",
		"SERVE_PUBLIC_HOST=127.0.0.1", fmt.Sprintf("SERVE_PUBLIC_PORT=%d", ports[0]),
		"SERVE_ADMIN_HOST=127.0.0.1", fmt.Sprintf("SERVE_ADMIN_PORT=%d", ports[1]),
		"URLS_SELF_ISSUER=" + h.PublicURL,
		"SECRETS_SYSTEM=levee-test-system-secret-of-32-bytes-at-least",
		"STRATEGIES_ACCESS_TOKEN=jwt",
		"LOG_LEVEL=warn",
	}, h.bin, "serve", "all", "--dev", "--sqa-opt-out")
	if err != nil {
		return err
	}
	// Ready when both APIs answer their health checks on ports that are
	// ours (bounded wait). The first start also generates the signing
	// keys, which a busy machine takes seconds for.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if h.ok(h.AdminURL+"/health/ready") && h.ok(h.PublicURL+"health/ready") &&
			listensOn(h.proc.cmd.Process.Pid, ports[0]) && listensOn(h.proc.cmd.Process.Pid, ports[1]) {
			return nil
		}
		select {
		case <-h.proc.done:
			out := h.proc.output()
			return portTakenError(fmt.Errorf("hydra exited at start: %s", lastLines(out, 20)), out)
		case <-time.After(50 * time.Millisecond):
		}
	}
	h.proc.kill()
	return errors.New("hydra was not ready within 60s: " + lastLines(h.proc.output(), 20))
}

func (h *Hydra) ok(u string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(u)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Stop stops the provider (SIGTERM, SIGKILL after 5 s) and waits for it.
// Its ports refuse connections from then on.
func (h *Hydra) Stop() {
	if h.proc != nil {
		h.proc.stop()
	}
}

// CreateClient registers an OAuth 2.0 client allowed the
// client_credentials grant, the scopes and the audiences, authenticating
// with client_secret_post.
func (h *Hydra) CreateClient(t testing.TB, id, secret string, scopes, audiences []string) {
	t.Helper()
	h.admin(t, http.MethodPost, "/admin/clients", map[string]any{
		"client_id": id, "client_secret": secret, "grant_types": []string{"client_credentials"},
		"scope": strings.Join(scopes, " "), "audience": audiences, "token_endpoint_auth_method": "client_secret_post",
	}, http.StatusCreated)
}

// Token asks the token endpoint for a client-credentials access token
// (a JWT signed with the current key of the hydra.jwt.access-token set).
func (h *Hydra) Token(t testing.TB, id, secret string, scopes, audiences []string) string {
	t.Helper()
	tok, err := h.TokenE(id, secret, scopes, audiences)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TokenE is Token for a goroutine other than the test's: it returns the
// failure.
func (h *Hydra) TokenE(id, secret string, scopes, audiences []string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {id}, "client_secret": {secret},
		"scope": {strings.Join(scopes, " ")}}
	for _, a := range audiences {
		form.Add("audience", a)
	}
	resp, err := h.client.PostForm(h.PublicURL+"oauth2/token", form)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var out struct {
		AccessToken string `json:"access_token"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.AccessToken == "" {
		return "", fmt.Errorf("hydra token endpoint: %d %s", resp.StatusCode, b)
	}
	return out.AccessToken, nil
}

// RotateKey creates a new RS256 key kid in the hydra.jwt.access-token
// set through the admin API: Hydra signs new access tokens with it from
// then on and publishes it beside the older keys in its JWKS.
func (h *Hydra) RotateKey(t testing.TB, kid string) {
	t.Helper()
	h.admin(t, http.MethodPost, "/admin/keys/hydra.jwt.access-token",
		map[string]string{"alg": "RS256", "use": "sig", "kid": kid}, http.StatusCreated)
}

func (h *Hydra) admin(t testing.TB, method, path string, body any, want int) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(method, h.AdminURL+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != want {
		t.Fatalf("hydra %s %s: %d %s", method, path, resp.StatusCode, out)
	}
}
