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

	"github.com/levee-gw/levee/internal/testsvc"
)

// corsPageJS runs on a page of another origin: fetches a browser sends
// without a preflight and with one, a data route, a route whose cors
// does not allow the page, and a limited route until it refuses. One
// line per fetch: the status, the body the page could read, and an
// exposed header; or the error the browser raised.
const corsPageJS = `(async () => {
  const base = BASE, out = [];
  const go = async (what, path, init) => {
    try {
      const r = await fetch(base + path, init);
      const b = await r.text();
      out.push(what + ': ' + r.status + ' ' + b.trim().slice(0, 300) + ' x-up=' + r.headers.get('X-Up'));
    } catch (e) { out.push(what + ': ' + e.name); }
  };
  await go('simple', '/api/x', {});
  await go('preflighted', '/api/x', {method: 'POST', headers: {'Content-Type': 'application/json', 'X-Token': 't'}, body: '{"a":1}'});
  await go('data', '/v1/customers?region=eq.north', {});
  await go('disallowed', '/other/x', {});
  await go('disallowed preflighted', '/api/x', {method: 'POST', headers: {'X-Secret': 's'}, body: 'x'});
  await go('limited 1', '/limited', {cache: 'no-store'});
  await go('limited 2', '/limited', {cache: 'no-store'});
  return out.join('\n');
})()`

// TestCORSInBrowser (issue 25 item 7): a page served from another origin
// in a real headless Chromium calls CORS routes with fetch() and reads
// their JSON (an upstream route, with and without a preflight, a data
// route over SQLite, a 429 refusal's body), and is refused by the browser
// on a route whose cors does not allow its origin and on a preflight
// asking for a header the route does not allow. The preflights never
// reach the upstream.
func TestCORSInBrowser(t *testing.T) {
	chromium := testsvc.ChromiumPath(t)
	up := newHeaderUpstream(t)
	dbPath, _ := sqliteOrders(t)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>dashboard</title><p>dashboard</p>`)
	}))
	defer page.Close()
	origin := page.URL // http://127.0.0.1:port: another port, another origin
	h := start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
state_dir: %s
log: {access: false}
upstreams:
  web: {endpoints: [{address: %s}]}
data_sources:
  sales: {driver: sqlite, path: %s, max_conns: 2}
routes:
  - name: api
    match: {path_prefix: /api, methods: [GET, POST]}
    upstream: web
    cors: {allow_origins: [%q], allow_headers: [Content-Type, X-Token], expose_headers: [X-Up]}
  - name: customers
    match: {path_prefix: /v1/customers}
    cors: {allow_origins: [%q]}
    data: {source: sales, table: customers, columns: [id, name, region], filters: {region: [eq]}, order: [id]}
  - {name: other, match: {path_prefix: /other}, upstream: web, cors: {allow_origins: ["https://elsewhere.example"]}}
  - {name: limited, match: {path_prefix: /limited}, upstream: web, anonymous_limits: {rate: 0.01, burst: 1}, cors: {allow_origins: [%q]}}
`, dataQuote(t.TempDir()), hostPort(up.srv), dataQuote(dbPath), origin, origin, origin))

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
	js := strings.Replace(corsPageJS, "BASE", fmt.Sprintf("%q", h.base), 1)
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
		"simple":                 `200 {"ok":true} x-up=up`,
		"preflighted":            `200 {"ok":true} x-up=up`,
		"disallowed":             "TypeError",
		"disallowed preflighted": "TypeError",
		"limited 1":              `200 {"ok":true} x-up=null`,
	} {
		if lines[what] != want {
			t.Errorf("%s: the page saw %q, want %q", what, lines[what], want)
		}
	}
	if l := lines["data"]; !strings.HasPrefix(l, "200 ") || !strings.Contains(l, "Customer 4") {
		t.Errorf("data: the page saw %q, want 200 and the rows", l)
	}
	if l := lines["limited 2"]; !strings.HasPrefix(l, "429 ") || !strings.Contains(l, `"reason":"rate_limited"`) {
		t.Errorf("limited 2: the page saw %q, want 429 with its JSON reason", l)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	for _, s := range up.seen {
		if s.Method == http.MethodOptions {
			t.Errorf("a preflight reached the upstream: %+v", s)
		}
	}
}
