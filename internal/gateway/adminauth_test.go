package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/config"
)

// TestGeneratedAdminToken: with no token configured, the first start
// writes state_dir/admin-token (mode 0600, 64 hex digits) and logs its
// path, never the token; a write without it is 401, with it 2xx, a read
// needs none; a second start on the same state_dir reuses it; a token file
// others may read, or a state_dir levee cannot write, stops the start with
// an error naming the file or admin.token_file; admin.token none opens
// writes on loopback; a reload to a token_file replaces the generated
// token (reads need a token again).
func TestGeneratedAdminToken(t *testing.T) {
	a, _ := backend(t, "a")
	dir := t.TempDir()
	stateDir := filepath.Join(dir, "state")
	cfgPath := filepath.Join(dir, "levee.yaml")
	yaml := func(admin string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0%s}
state_dir: %s
upstreams:
  video: {endpoints: [{address: %s}]}
routes:
  - {name: video, match: {path_prefix: /}, upstream: video, auth: api_key}
`, admin, stateDir, hostPort(a))
	}
	write := func(s string) {
		if err := os.WriteFile(cfgPath, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(yaml(""))
	logs := &lockedBuffer{}
	g, err := New(Options{Load: func() (*config.Config, error) { return config.Load(cfgPath) }, LogOutput: logs})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(); err != nil {
		t.Fatal(err)
	}
	tokPath := filepath.Join(stateDir, "admin-token")
	fi, err := os.Stat(tokPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the generated token: %v %v, want a file of mode 0600", fi, err)
	}
	raw, _ := os.ReadFile(tokPath)
	tok := strings.TrimSpace(string(raw))
	if len(tok) != 64 || strings.Trim(tok, "0123456789abcdef") != "" {
		t.Errorf("token %d characters, want 64 hex digits", len(tok))
	}
	if l := logs.String(); !strings.Contains(l, `"file":"`+tokPath+`"`) || !strings.Contains(l, `"token":"generated"`) || strings.Contains(l, tok) {
		t.Errorf("the start log must name the file, never the token:\n%s", l)
	}
	anon := &instance{t: t, g: g, admin: "http://" + g.AdminAddr().String(), token: "not-the-token-0123456789"}
	writer := &instance{t: t, g: g, admin: anon.admin, token: tok}
	if status, doc := anon.api("POST", "/api/v1/apps", `{"id":"x","grants":["video"]}`); status != 401 || doc["reason"] != "unauthorized" {
		t.Errorf("a write without the generated token: %d %v, want 401", status, doc)
	}
	if status, doc := writer.api("POST", "/api/v1/apps", `{"id":"x","grants":["video"]}`); status != 201 {
		t.Errorf("a write with the generated token: %d %v, want 201", status, doc)
	}
	for _, path := range []string{"/api/v1/apps", "/metrics", "/api/v1/config", "/healthz"} {
		if status, _ := anon.api("GET", path, ""); status != 200 {
			t.Errorf("GET %s without a token: %d, want 200 (reads stay open with the generated token)", path, status)
		}
	}
	// Reload to a configured token: the generated one is no longer
	// accepted and reads need a token.
	own := filepath.Join(dir, "own-token")
	if err := os.WriteFile(own, []byte("own-write-token-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	write(yaml(", token_file: " + own))
	if status, doc := writer.api("POST", "/api/v1/reload", ""); status != 200 {
		t.Fatalf("reload to token_file: %d %v", status, doc)
	}
	if status, _ := writer.api("POST", "/api/v1/reload", ""); status != 401 {
		t.Errorf("the generated token after a reload to token_file: %d, want 401", status)
	}
	if status, _ := anon.api("GET", "/api/v1/apps", ""); status != 401 {
		t.Errorf("a read without a token under token_file: %d, want 401", status)
	}
	write(yaml(""))
	ownWriter := &instance{t: t, g: g, admin: anon.admin, token: "own-write-token-0123456789"}
	if status, doc := ownWriter.api("POST", "/api/v1/reload", ""); status != 200 {
		t.Fatalf("reload back to the generated token: %d %v", status, doc)
	}
	writer.stop()

	// A second start reuses the file.
	logs2 := &lockedBuffer{}
	g2, err := New(Options{Load: func() (*config.Config, error) { return config.Load(cfgPath) }, LogOutput: logs2})
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Start(); err != nil {
		t.Fatal(err)
	}
	again := &instance{t: t, g: g2, admin: "http://" + g2.AdminAddr().String(), token: tok}
	if raw2, _ := os.ReadFile(tokPath); string(raw2) != string(raw) {
		t.Errorf("the second start changed the token file")
	}
	if !strings.Contains(logs2.String(), `"token":"reused"`) {
		t.Errorf("the second start's log: %s", logs2.String())
	}
	if status, doc := again.api("DELETE", "/api/v1/apps/x", ""); status != 204 {
		t.Errorf("a write with the reused token: %d %v", status, doc)
	}
	again.stop()

	// A token file others may read stops the start.
	if err := os.Chmod(tokPath, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Load: func() (*config.Config, error) { return config.Load(cfgPath) }, LogOutput: io.Discard}); err == nil ||
		!strings.Contains(err.Error(), tokPath) || !strings.Contains(err.Error(), "mode 0640") {
		t.Errorf("a token file of mode 0640: %v, want refused naming it and its mode", err)
	}
	// A state_dir levee cannot write: the error names admin.token_file.
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		_, _, _, err := generatedAdminToken(ro)
		if err == nil || !strings.Contains(err.Error(), "admin.token_file") || !strings.Contains(err.Error(), ro) {
			t.Errorf("an unwritable state_dir: %v, want an error naming it and admin.token_file", err)
		}
	}
	_, _, _, err = generatedAdminToken(filepath.Join(tokPath, "sub")) // state_dir under a file: cannot exist
	if err == nil || !strings.Contains(err.Error(), "admin.token_file") {
		t.Errorf("a state_dir that cannot be made: %v, want an error naming admin.token_file", err)
	}

	// admin.token none: no token, writes open (loopback only).
	if err := os.Chmod(tokPath, 0o600); err != nil {
		t.Fatal(err)
	}
	write(yaml(", token: none"))
	g3, err := New(Options{Load: func() (*config.Config, error) { return config.Load(cfgPath) }, LogOutput: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := g3.Start(); err != nil {
		t.Fatal(err)
	}
	open := &instance{t: t, g: g3, admin: "http://" + g3.AdminAddr().String()}
	defer open.stop()
	if status, doc := open.api("POST", "/api/v1/apps", `{"id":"y"}`); status != 201 {
		t.Errorf("a write with admin.token none: %d %v, want 201", status, doc)
	}
}

// TestAdminHostsRawSocket: on a real levee, a request whose Host is not
// an IP, localhost or a name of admin.hosts is 421 (a DNS-rebinding
// page's), /healthz answers any Host, and a reload that adds a name to
// admin.hosts makes it accepted at once.
func TestAdminHostsRawSocket(t *testing.T) {
	a, _ := backend(t, "a")
	cfg := func(hosts string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, hosts: [%s]}
upstreams:
  video: {endpoints: [{address: %s}]}
routes:
  - {name: video, match: {path_prefix: /}, upstream: video}
`, hosts, hostPort(a))
	}
	h := start(t, cfg("levee-admin.internal"))
	addr := h.g.AdminAddr().String()
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	send := func(method, path, host string) (int, string) {
		t.Helper()
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", method, path, host)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, c := range []struct {
		path, host string
		status     int
	}{
		{"/api/v1/config", "evil.example:" + port, 421},
		{"/debug/pprof/", "evil.example:" + port, 421},
		{"/metrics", "rebind.evil.example", 421},
		{"/healthz", "evil.example:" + port, 200},
		{"/api/v1/config", "levee-admin.internal:" + port, 200},
		{"/api/v1/config", "127.0.0.1:" + port, 200},
		{"/api/v1/config", "localhost:" + port, 200},
		{"/api/v1/config", "other.internal:" + port, 421},
	} {
		status, body := send("GET", c.path, c.host)
		if status != c.status || (status == 421 && !strings.Contains(body, `"reason": "host_not_allowed"`)) {
			t.Errorf("GET %s Host %s: %d %s, want %d", c.path, c.host, status, body, c.status)
		}
	}
	h.writeConfig(cfg("levee-admin.internal, other.internal"))
	resp, err := h.client.Post(h.admin+"/api/v1/reload", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("reload: %d", resp.StatusCode)
	}
	if status, body := send("GET", "/api/v1/config", "other.internal:"+port); status != 200 {
		t.Errorf("a name added to admin.hosts by a reload: %d %s, want 200", status, body)
	}
}
