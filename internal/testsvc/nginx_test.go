package testsvc

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestNGINXProxies starts nginx in front of a Go backend and gets the
// backend's answer through it.
func TestNGINXProxies(t *testing.T) {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "from-backend "+r.URL.Path)
	}))
	defer backend.Close()
	n := StartNGINX(t, NGINXOptions{
		Server: "location / { proxy_pass " + backend.URL + "; }",
	})
	resp, err := http.Get("http://" + n.Address + "/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "from-backend /x") {
		t.Fatalf("status %d body %q", resp.StatusCode, b)
	}
	if !strings.HasPrefix(resp.Header.Get("Server"), "nginx") {
		t.Fatalf("Server %q: not nginx answering", resp.Header.Get("Server"))
	}
}
