package gateway

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/levee-gw/levee/internal/testsvc"
)

// TestDataAPIPageInBrowser (issue 29 item 8) drives the web UI's Data
// APIs page in a real headless Chromium against a real levee whose data
// APIs read a real PostgreSQL. A read token sees each API's state, its
// versions and which node serves which, with Publish and Roll back
// disabled, and the API refuses its write (403 insufficient_scope, also
// when the page is made to send it). A write token publishes the draft
// version 2 by a click, and the data route then answers from version 2
// (a real HTTP call); Roll back to 1 by a click, and version 1 answers
// again. An API whose query fails in PostgreSQL shows the failure among
// its last errors, and each API its traffic. No console error,
// exception or CSP violation. 59 APIs show as a page of 50 and, after
// More, the other 9.
func TestDataAPIPageInBrowser(t *testing.T) {
	chromium := testsvc.ChromiumPath(t)
	pg := testsvc.StartPostgres(t)
	pg.Exec(t, pgTypesSQL)
	dir := t.TempDir()
	const writeSecret, readSecret = "dui-write-token-0123456789", "dui-read-token-0123456789"
	wf, rf := filepath.Join(dir, "write"), filepath.Join(dir, "read")
	for p, s := range map[string]string{wf: writeSecret, rf: readSecret} {
		if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(dir, "levee.yaml")
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token_file: %s, tokens: [{file: %s, scope: read}]}
state_dir: %s
log: {access: false}
data_sources:
  sales: {driver: postgres, dsn: %s, max_conns: 2}
routes:
  - {name: items, match: {path_prefix: /v1/items}, data: {source: sales, table: items, columns: [id], order: [id]}}
`, dataQuote(wf), dataQuote(rf), dataQuote(filepath.Join(dir, "state")), dataQuote(pg.DSN))
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	in := launch(t, cfgPath, writeSecret)
	defer in.stop()
	const rows = 40 // customer 1's orders in pgTypesSQL
	in.expectAPI("POST", "/api/v1/data-apis", `{"name": "orders-ui", `+versionDef("/v1/ui", 1)[1:], 201, "")
	in.expectAPI("POST", "/api/v1/data-apis/orders-ui/publish", "", 200, "")
	in.expectAPI("POST", "/api/v1/data-apis/orders-ui/versions", versionDef("/v1/ui", 2), 201, "")
	in.expectAPI("POST", "/api/v1/data-apis", `{"name": "drafty", `+versionDef("/v1/drafty", 7)[1:], 201, "")
	if v, _ := in.servedRows("/v1/ui", rows); v != 1 {
		t.Fatalf("before the browser: version %d serves, want 1", v)
	}
	// An API whose query fails in PostgreSQL at run time (a scalar
	// subquery of many rows: cardinality_violation): one call, answered
	// 502 query_failed, is among its last errors on the page.
	in.expectAPI("POST", "/api/v1/data-apis", `{"name": "broken", "match": {"path_prefix": "/v1/broken"}, "data": {"source": "sales",
		"sql": "SELECT id, (SELECT o.id FROM orders o) AS v FROM orders WHERE customer_id = :customer_id ORDER BY id",
		"params": {"customer_id": {"type": "int64", "required": true, "min": 1}}}}`, 201, "")
	in.expectAPI("POST", "/api/v1/data-apis/broken/publish", "", 200, "")
	resp, err := http.Get("http://" + in.g.Addr().String() + "/v1/broken?customer_id=1")
	if err != nil {
		t.Fatal(err)
	}
	brokenBody, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(brokenBody), "query_failed") {
		t.Fatalf("the broken API: %d %s, want 502 query_failed", resp.StatusCode, brokenBody)
	}

	b := newUIBrowser(t, chromium)
	defer b.close()
	t0 := time.Now()
	b.do("loading /ui/#dataapis", chromedp.Navigate(in.admin+"/ui/#dataapis"))
	b.login(readSecret)
	b.until("the data APIs", `document.body.dataset.loaded === 'dataapis' && document.getElementById('dataapi-orders-ui') !== null && document.getElementById('dataapi-drafty') !== null`)
	for _, c := range []struct{ what, js, want string }{
		{"orders-ui's state", `document.querySelector('#dataapi-orders-ui .da-state').textContent`, "published"},
		{"drafty's state", `document.querySelector('#dataapi-drafty .da-state').textContent`, "draft"},
		{"orders-ui's versions, newest first", `[...document.querySelectorAll('#dataapi-orders-ui tr.version')].map((r) => r.dataset.version + ':' + r.querySelector('.role').textContent).join(',')`, "2:draft,1:published"},
		{"the node serving orders-ui", `[...document.querySelectorAll('#dataapi-orders-ui tr.node')].map((r) => r.dataset.node + ':' + r.querySelector('.serves').textContent).join(',')`, "this node:version 1"},
		{"drafty served", `document.querySelector('#dataapi-drafty tr.node .serves').textContent`, "nothing"},
		{"the match", `document.querySelector('#dataapi-orders-ui tr.version code').textContent`, "/v1/ui"},
		{"the read token's buttons", `[...document.querySelectorAll('#dataapis button.publish, #dataapis button.rollback')].map((x) => x.textContent + ':' + x.disabled).join(',')`, "Publish 1:true,Publish 2:true"}, // broken has none, then drafty, then orders-ui (name order),
	} {
		if got := b.text(c.js); got != c.want {
			t.Errorf("%s: %q, want %q", c.what, got, c.want)
		}
	}
	if s := b.text(`document.querySelector('#dataapi-broken .da-errors').textContent`); !strings.Contains(s, "query_failed on this node since start: 1") {
		t.Errorf("the broken API's last errors: %q, want its query failure", s)
	}
	if s := b.text(`document.querySelector('#dataapi-orders-ui .da-traffic').textContent`); !strings.Contains(s, "1 requests, 0 answered 5xx") {
		t.Errorf("orders-ui's traffic: %q, want the one request before the browser", s)
	}
	if s := b.text(`document.getElementById('da-scope').textContent`); !strings.Contains(s, "scope read") {
		t.Errorf("the scope note: %q", s)
	}
	b.shot("dataapis-read-token")
	// The API refuses the read token's write, called directly and when
	// the page is made to send it (its button enabled by hand).
	req, _ := http.NewRequest("POST", in.admin+"/api/v1/data-apis/orders-ui/publish", strings.NewReader(`{"version": 2}`))
	req.Header.Set("Authorization", "Bearer "+readSecret)
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("publish with the read token: %d, want 403", resp.StatusCode)
	}
	b.do("forcing the read token's Publish",
		chromedp.Evaluate[chromedp.Void](`document.body.dataset.loaded = ''; const x = document.querySelector('#dataapi-orders-ui button.publish'); x.disabled = false; x.click()`))
	b.until("the refusal", `document.body.dataset.loaded === 'dataapis-refused' && document.getElementById('msg').className === 'error' && document.getElementById('msg').textContent.includes('insufficient_scope')`)
	if s := b.text(`document.querySelector('#dataapi-orders-ui .da-errors').textContent`); !strings.Contains(s, "403 insufficient_scope") {
		t.Errorf("orders-ui's last errors after the refused publish: %q", s)
	}
	if v, _ := in.servedRows("/v1/ui", rows); v != 1 {
		t.Fatalf("after the read token's publish: version %d serves, want still 1", v)
	}

	// The write token: Publish 2 by a click, then Roll back to 1.
	b.do("forgetting the read token", chromedp.Click(chromedp.ID("signout")))
	b.login(writeSecret)
	b.until("the enabled buttons", `document.body.dataset.loaded === 'dataapis' && document.querySelector('#dataapi-orders-ui button.publish[data-version="2"]') !== null && !document.querySelector('#dataapi-orders-ui button.publish[data-version="2"]').disabled`)
	b.do("publishing version 2",
		chromedp.Evaluate[chromedp.Void](`document.body.dataset.loaded = ''`),
		chromedp.Click(chromedp.CSS(`#dataapi-orders-ui button.publish[data-version="2"]`)))
	b.until("version 2 published", `document.body.dataset.loaded === 'dataapis' && document.getElementById('msg').textContent.includes('version 2 serves') && document.querySelector('#dataapi-orders-ui tr.node .serves').textContent === 'version 2'`)
	if v, _ := in.servedRows("/v1/ui", rows); v != 2 {
		t.Fatalf("after the click on Publish 2: version %d serves, want 2", v)
	}
	b.shot("dataapis-published")
	if got := b.text(`document.querySelector('#dataapi-orders-ui button.rollback').textContent`); got != "Roll back to 1" {
		t.Errorf("the rollback button: %q", got)
	}
	b.do("rolling back to version 1",
		chromedp.Evaluate[chromedp.Void](`document.body.dataset.loaded = ''`),
		chromedp.Click(chromedp.CSS(`#dataapi-orders-ui button.rollback[data-version="1"]`)))
	b.until("version 1 back", `document.body.dataset.loaded === 'dataapis' && document.getElementById('msg').textContent.includes('Rolled back orders-ui: version 1 serves') && document.querySelector('#dataapi-orders-ui tr.node .serves').textContent === 'version 1'`)
	if v, _ := in.servedRows("/v1/ui", rows); v != 1 {
		t.Fatalf("after the click on Roll back to 1: version %d serves, want 1", v)
	}
	b.shot("dataapis-rolled-back")

	// Paging: 55 more drafts make 59 APIs, 50 a page; More shows the
	// other 9, each once, and goes away.
	for i := range 55 {
		in.expectAPI("POST", "/api/v1/data-apis", fmt.Sprintf(`{"name": "zz-%02d", `, i)+versionDef(fmt.Sprintf("/v1/zz%02d", i), 1)[1:], 201, "")
	}
	const cards = `document.querySelectorAll('#dataapis .dataapi').length`
	b.do("refreshing",
		chromedp.Evaluate[chromedp.Void](`document.body.dataset.loaded = ''`),
		chromedp.Click(chromedp.CSS(`button[data-refresh="dataapis"]`)))
	b.until("the first page of 50", `document.body.dataset.loaded === 'dataapis' && `+cards+` === 50 && !document.getElementById('dataapis-more').hidden`)
	b.do("loading more", chromedp.Click(chromedp.ID("dataapis-more")))
	b.until("all 59", cards+` === 59 && document.getElementById('dataapis-more').hidden`)
	if n := b.text(`String(new Set([...document.querySelectorAll('#dataapis .dataapi')].map((c) => c.dataset.api)).size)`); n != "59" {
		t.Errorf("the pages show %s distinct APIs, want 59", n)
	}
	if got := b.text(`[...document.querySelectorAll('#dataapis .dataapi')].at(-1).dataset.api`); got != "zz-54" {
		t.Errorf("the last API shown: %s, want zz-54", got)
	}
	t.Logf("browser session: %v", time.Since(t0).Round(time.Millisecond))
	b.close()
	b.checkConsole()
}

// uiBrowser is a headless Chromium with one tab on the admin UI, with the
// steps TestAdminUIInBrowser uses (each state polled with a deadline) and
// a record of console errors, exceptions and non-network log errors.
type uiBrowser struct {
	t        *testing.T
	ctx      context.Context
	cancels  []context.CancelFunc
	shots    string
	mu       sync.Mutex
	problems []string
}

func newUIBrowser(t *testing.T, chromium string) *uiBrowser {
	b := &uiBrowser{t: t, shots: screenshotDir(t)}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	b.ctx, b.cancels = bctx, []context.CancelFunc{cancelBrowser, cancelAlloc, cancel}
	if err := chromedp.Listen(bctx, func(ev any) {
		var p string
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError || ev.Type == runtime.ConsoleAPICalledTypeWarning || ev.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value))
				}
				p = fmt.Sprintf("console.%s: %s", ev.Type, strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			p = "exception: " + ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				p += " " + ev.ExceptionDetails.Exception.Description
			}
		case *log.EventEntryAdded:
			if ev.Entry.Source != log.EntrySourceNetwork && (ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning) {
				p = fmt.Sprintf("log %s %s: %s", ev.Entry.Source, ev.Entry.Level, ev.Entry.Text)
			}
		}
		if p != "" {
			b.mu.Lock()
			b.problems = append(b.problems, p)
			b.mu.Unlock()
		}
	}); err != nil {
		b.close()
		t.Fatalf("starting the browser: %v", err)
	}
	return b
}

// close stops the browser (idempotent).
func (b *uiBrowser) close() {
	for _, c := range b.cancels {
		c()
	}
}

// checkConsole fails the test on each console problem recorded.
func (b *uiBrowser) checkConsole() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("browser console: %s", p)
	}
}

func (b *uiBrowser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// until polls js until it is true, for at most 15 s (generous for two
// busy cores); on timeout it fails with the page's text.
func (b *uiBrowser) until(what, js string) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
		b.t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, js, err, page)
	}
}

func (b *uiBrowser) text(js string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", js, err)
	}
	return s
}

func (b *uiBrowser) shot(name string) {
	b.t.Helper()
	img, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(p, img, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s (%d bytes)", p, len(img))
}

// login waits for the token prompt and enters secret.
func (b *uiBrowser) login(secret string) {
	b.t.Helper()
	b.until("the token prompt", `!document.getElementById('login').hidden`)
	b.do("entering the token",
		chromedp.Evaluate[chromedp.Void](`document.body.dataset.loaded = ''`),
		chromedp.SendKeys(chromedp.ID("token"), secret),
		chromedp.Click(chromedp.ID("token-save")))
}

// TestDataAPIPageFleetInBrowser (issue 29 item 8, with cluster.etcd): two
// levee gateways on one real etcd share the data-API store; node 2's file
// lacks the data source archive. On node 1's page (the generated admin
// token: reads open, the first click asks for the token) a click
// publishes version 2, which reads archive:
// node 1 serves it (a real HTTP call answers from version 2), node 2
// cannot compile it and keeps version 1 (a real HTTP call there), and
// after Refresh the page shows, per node, what it serves (node-1 version
// 2 serving, node-2 version 1 previous) and node 2's compile error among
// the last errors. A click on Roll back to 1 brings version 1 back on
// both nodes.
func TestDataAPIPageFleetInBrowser(t *testing.T) {
	chromium := testsvc.ChromiumPath(t)
	e := testsvc.StartEtcd(t)
	dbPath, _ := sqliteOrders(t)
	nodes := []*instance{
		launch(t, dataNode(t, 1, e.Endpoint, dbPath, true), ""),
		launch(t, dataNode(t, 2, e.Endpoint, dbPath, false), ""),
	}
	defer func() {
		for _, n := range nodes {
			n.stop()
		}
	}()
	for i, n := range nodes {
		waitFor(t, fmt.Sprintf("node %d reaching etcd", i+1), func() bool { return etcdUp(t, n) })
	}
	n1, n2 := nodes[0], nodes[1]
	const path = "/v1/fleet"
	n1.expectAPI("POST", "/api/v1/data-apis", `{"name": "orders-fleet", `+versionDef(path, 1)[1:], 201, "")
	n1.expectAPI("POST", "/api/v1/data-apis/orders-fleet/publish", "", 200, "")
	n1.expectAPI("POST", "/api/v1/data-apis/orders-fleet/versions", archiveDef(path, 2), 201, "")
	waitServed(t, "node 2 serving version 1", n2, path, 1)
	waitFor(t, "both nodes reporting version 1", func() bool {
		s1, s2 := nodeStatus(t, n1, "orders-fleet", "node-1"), nodeStatus(t, n1, "orders-fleet", "node-2")
		return s1 != nil && s2 != nil && s1["version"] == 1.0 && s2["version"] == 1.0
	})

	const nodesJS = `[...document.querySelectorAll('#dataapi-orders-fleet tr.node')].map((r) => r.dataset.node + ':' + r.querySelector('.serves').textContent + ':' + r.children[2].textContent).join(',')`
	b := newUIBrowser(t, chromium)
	defer b.close()
	b.do("loading node 1's /ui/#dataapis", chromedp.Navigate(n1.admin+"/ui/#dataapis"))
	b.until("both nodes serving version 1", `document.body.dataset.loaded === 'dataapis' && `+nodesJS+` === 'node-1:version 1:serving,node-2:version 1:serving'`)
	// The generated token (admin.token: generate): reads are open, the
	// buttons are enabled, and the first click asks for the token.
	if s := b.text(`document.getElementById('da-scope').textContent`); !strings.Contains(s, "No token given") {
		t.Errorf("the scope note with open reads: %q", s)
	}
	b.do("publishing version 2 without a token", chromedp.Click(chromedp.CSS(`#dataapi-orders-fleet button.publish[data-version="2"]`)))
	b.login(generatedToken(n1.g))
	b.until("the page with the token", `document.body.dataset.loaded === 'dataapis' && document.getElementById('da-scope').textContent === ''`)
	if v, _ := n1.served(path); v != 1 {
		t.Fatalf("node 1 after the click without a token: version %d serves, want still 1", v)
	}
	b.do("publishing version 2",
		chromedp.Evaluate[chromedp.Void](`document.body.dataset.loaded = ''`),
		chromedp.Click(chromedp.CSS(`#dataapi-orders-fleet button.publish[data-version="2"]`)))
	b.until("the publish answered", `document.body.dataset.loaded === 'dataapis' && document.getElementById('msg').textContent.includes('Published orders-fleet: version 2 serves')`)
	if v, _ := n1.served(path); v != 2 {
		t.Fatalf("node 1 after the click on Publish 2: version %d serves, want 2", v)
	}
	waitFor(t, "node 2 reporting that it cannot compile version 2", func() bool {
		st := nodeStatus(t, n1, "orders-fleet", "node-2")
		return st != nil && st["state"] == "previous" && st["version"] == 1.0
	})
	if v, _ := n2.served(path); v != 1 {
		t.Fatalf("node 2 serves version %d, want 1 (it cannot compile 2)", v)
	}
	b.do("refreshing",
		chromedp.Evaluate[chromedp.Void](`document.body.dataset.loaded = ''`),
		chromedp.Click(chromedp.CSS(`button[data-refresh="dataapis"]`)))
	b.until("node 2 on its previous version", `document.body.dataset.loaded === 'dataapis' && `+nodesJS+` === 'node-1:version 2:serving,node-2:version 1:previous'`)
	if s := b.text(`document.querySelector('#dataapi-orders-fleet .da-errors').textContent`); !strings.Contains(s, "node-2") || !strings.Contains(s, "does not compile here") || !strings.Contains(s, "archive") {
		t.Errorf("the last errors: %q, want node-2's compile error naming archive", s)
	}
	b.shot("dataapis-fleet-compile-error")

	b.do("rolling back to version 1",
		chromedp.Evaluate[chromedp.Void](`document.body.dataset.loaded = ''`),
		chromedp.Click(chromedp.CSS(`#dataapi-orders-fleet button.rollback[data-version="1"]`)))
	b.until("the rollback answered", `document.body.dataset.loaded === 'dataapis' && document.getElementById('msg').textContent.includes('Rolled back orders-fleet: version 1 serves')`)
	if v, _ := n1.served(path); v != 1 {
		t.Fatalf("node 1 after the click on Roll back to 1: version %d serves, want 1", v)
	}
	waitFor(t, "node 2 reporting version 1 published and served", func() bool {
		st := nodeStatus(t, n1, "orders-fleet", "node-2")
		return st != nil && st["state"] == "serving" && st["version"] == 1.0
	})
	b.do("refreshing",
		chromedp.Evaluate[chromedp.Void](`document.body.dataset.loaded = ''`),
		chromedp.Click(chromedp.CSS(`button[data-refresh="dataapis"]`)))
	b.until("both nodes on version 1", `document.body.dataset.loaded === 'dataapis' && `+nodesJS+` === 'node-1:version 1:serving,node-2:version 1:serving'`)
	b.shot("dataapis-fleet-rolled-back")
	b.close()
	b.checkConsole()
}
