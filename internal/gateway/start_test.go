package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/levee-gw/levee/internal/config"
	"github.com/levee-gw/levee/internal/h1server"
	"go.uber.org/goleak"
)

// TestStartUndoesPartialStart makes Start fail at its second and at its
// last fallible step (the admin address already taken; the data server
// refused) with the access log on and the app store open by then. After
// the failure no goroutine of the attempt may remain (the access-log
// writer, the store's database), the store must not be kept, and once the
// cause is gone the same gateway starts and serves.
func TestStartUndoesPartialStart(t *testing.T) {
	for _, step := range []string{"admin listen", "h1 server"} {
		t.Run(step, func(t *testing.T) {
			taken, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer taken.Close()
			adminAddr, want := "127.0.0.1:0", "h1server refused"
			if step == "admin listen" {
				adminAddr, want = taken.Addr().String(), "admin.listen on "+taken.Addr().String()
			} else {
				newH1Server = func(h1server.Options) (*h1server.Server, error) { return nil, errors.New(want) }
				defer func() { newH1Server = h1server.New }()
			}
			h := &harness{t: t, cfgPath: filepath.Join(t.TempDir(), "levee.yaml"), logs: &lockedBuffer{}}
			h.writeConfig(fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: %q}
log: {access: true}
upstreams:
  api:
    endpoints: [{address: 127.0.0.1:1, weight: 1}]
routes:
  - {name: api, match: {path_prefix: /}, upstream: api}
`, adminAddr))
			g, err := New(Options{Load: func() (*config.Config, error) { return config.Load(h.cfgPath) }, LogOutput: h.logs})
			if err != nil {
				t.Fatal(err)
			}
			before := goleak.IgnoreCurrent()
			err = g.Start()
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("Start = %v, want an error with %q", err, want)
			}
			if err := goleak.Find(before); err != nil {
				t.Fatalf("a failed Start left goroutines running: %v", err)
			}
			if g.Apps() != nil {
				t.Error("a failed Start kept the app store")
			}
			if ready, _ := g.Ready(); ready {
				t.Error("a failed Start left the gateway ready")
			}

			// The cause gone, the same gateway starts (its store reopens,
			// its access log runs) and drains.
			taken.Close()
			newH1Server = h1server.New
			if err := g.Start(); err != nil {
				t.Fatalf("Start after the cause is gone: %v", err)
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := g.Shutdown(ctx); err != nil {
					t.Errorf("Shutdown: %v", err)
				}
			}()
			resp, err := http.Get("http://" + g.AdminAddr().String() + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 || g.Apps() == nil {
				t.Fatalf("after the second Start: /readyz %d, store %v", resp.StatusCode, g.Apps())
			}
		})
	}
}
