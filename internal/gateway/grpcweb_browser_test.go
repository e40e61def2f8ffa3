package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/levee-gw/levee/internal/testsvc"
)

// grpcWebPageJS runs on a page of another origin: gRPC-Web unary calls of
// grpc.health.v1.Health/Check with fetch(), the 5-byte frame and the
// HealthCheckRequest built by hand, binary and -text; it reads the
// answer's message (the serving status, field 1) and the grpc-status of
// the trailer frame. One line per call, or the error the browser raised.
const grpcWebPageJS = `(async () => {
  const base = BASE, out = [];
  const frame = (service) => {
    const s = new TextEncoder().encode(service);
    const msg = service ? [0x0a, s.length, ...s] : [];
    return new Uint8Array([0, 0, 0, 0, msg.length, ...msg]);
  };
  const b64 = (u8) => btoa(String.fromCharCode(...u8));
  const unb64 = (t) => { // 4-character groups, each on its own (padding may sit between messages)
    const out = [];
    for (let i = 0; i < t.length; i += 4) for (const c of atob(t.slice(i, i + 4))) out.push(c.charCodeAt(0));
    return new Uint8Array(out);
  };
  const call = async (what, service, text) => {
    try {
      const ct = text ? 'application/grpc-web-text' : 'application/grpc-web+proto';
      const r = await fetch(base + '/grpc.health.v1.Health/Check', {method: 'POST',
        headers: {'Content-Type': ct, 'X-Grpc-Web': '1', 'X-User-Agent': 'grpc-web-javascript/0.1', 'Grpc-Timeout': '5S'},
        body: text ? b64(frame(service)) : frame(service)});
      const b = text ? unb64(await r.text()) : new Uint8Array(await r.arrayBuffer());
      let serving = 'none', trailers = '';
      for (let i = 0; i + 5 <= b.length; ) {
        const flag = b[i], n = (b[i+1] << 24) | (b[i+2] << 16) | (b[i+3] << 8) | b[i+4];
        const p = b.slice(i + 5, i + 5 + n);
        i += 5 + n;
        if (flag === 0x80) trailers = new TextDecoder().decode(p);
        else serving = p.length >= 2 && p[0] === 0x08 ? String(p[1]) : '0';
      }
      const st = /grpc-status: (\d+)/.exec(trailers), msg = /grpc-message: (.*)\r\n/.exec(trailers);
      out.push(what + ': http=' + r.status + ' serving=' + serving + ' grpc-status=' + (st ? st[1] : 'none') +
        ' grpc-message=' + (msg ? msg[1] : '') + ' header-grpc-status=' + r.headers.get('grpc-status') +
        ' ct=' + r.headers.get('content-type'));
    } catch (e) { out.push(what + ': ' + e.name); }
  };
  await call('binary', 'app', false);
  await call('text', 'app', true);
  await call('unknown', 'nope', false);
  await call('whole server', '', false);
  return out.join('\n');
})()`

// TestGRPCWebInBrowser (issue 24.3): a page served from another origin in
// a real headless Chromium makes gRPC-Web unary calls with fetch() through
// levee to a real grpc-go server: the preflight for the gRPC-Web request
// headers passes on the route's cors block, and the page reads the
// answer's message and the grpc-status from the trailer frame (binary and
// text), an upstream error's status and message among them.
func TestGRPCWebInBrowser(t *testing.T) {
	chromium := testsvc.ChromiumPath(t)
	e := startGRPCEndpoint(t, "a", nil)
	e.health.SetServingStatus("app", healthpb.HealthCheckResponse_SERVING)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>app</title><p>app</p>`)
	}))
	defer page.Close()
	origin := page.URL // another port, another origin
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
log: {access: false}
upstreams:
  g: {protocol: h2c, endpoints: [{address: %s}]}
routes:
  - name: grpc
    match: {path_prefix: /grpc.health.v1.Health/}
    upstream: g
    cors:
      allow_origins: [%q]
      allow_methods: [POST]
      allow_headers: [Content-Type, X-Grpc-Web, X-User-Agent, Grpc-Timeout]
      expose_headers: [Grpc-Status, Grpc-Message]
`, e.addr, origin))

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(800, 600))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	if err := chromedp.Do(bctx, chromedp.Navigate(origin+"/")); err != nil {
		t.Fatalf("navigating to the page: %v", err)
	}
	js := strings.Replace(grpcWebPageJS, "BASE", fmt.Sprintf("%q", h.base), 1)
	out, err := chromedp.Run(bctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("running the page's script: %v", err)
	}
	t.Logf("page %s calling levee %s:\n%s", origin, h.base, out)
	lines := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(l, ": ")
		lines[k] = v
	}
	for what, want := range map[string]string{
		"binary":       "http=200 serving=1 grpc-status=0 grpc-message= header-grpc-status=null ct=application/grpc-web+proto",
		"text":         "http=200 serving=1 grpc-status=0 grpc-message= header-grpc-status=null ct=application/grpc-web-text",
		"unknown":      "http=200 serving=none grpc-status=5 grpc-message=unknown service header-grpc-status=null ct=application/grpc-web+proto",
		"whole server": "http=200 serving=1 grpc-status=0 grpc-message= header-grpc-status=null ct=application/grpc-web+proto",
	} {
		if lines[what] != want {
			t.Errorf("%s: the page saw %q, want %q", what, lines[what], want)
		}
	}
}
