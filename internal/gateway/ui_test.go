package gateway

import (
	"context"
	"encoding/json"
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

// TestAdminUIInBrowser drives the admin web UI (/ui/) in a real headless
// Chromium (Debian's, through chromedp) against a real levee with admin
// tokens and a push-fed upstream whose delta guard holds an update. One
// browser, one tab, every page: the token prompt appears and takes a token;
// the overview shows the traffic and a refusal by reason; the upstreams
// page shows the endpoints and the held update; a read token's Confirm is
// refused with a visible message and releases nothing; a write token's
// Confirm releases it (checked through GET /api/v1/upstreams); an
// upstream of 450 endpoints shows its first page of 200 and the rest,
// each once, through "More endpoints" (the API's next links); the apps
// page creates a key (shown once, and it works on the data plane),
// revokes it (then refused) and suspends the app (checked through the API); the routes, reloads (with a
// refused reload) and profiles pages load. No page writes a console error
// or throws. A screenshot of each page is kept in the directory the log
// names.
func TestAdminUIInBrowser(t *testing.T) {
	chromium := testsvc.ChromiumPath(t)
	backs := make([]string, 4)
	for i := range backs {
		srv, _ := backend(t, fmt.Sprintf("b%d", i))
		backs[i] = hostPort(srv)
	}
	dir := t.TempDir()
	const writeSecret, readSecret = "ui-write-token-0123456789", "ui-read-token-0123456789"
	wf, rf := filepath.Join(dir, "write"), filepath.Join(dir, "read")
	for p, s := range map[string]string{wf: writeSecret, rf: readSecret} {
		if err := os.WriteFile(p, []byte(s+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, token_file: %s, tokens: [{file: %s, scope: read}]}
upstreams:
  pushed: {discovery: {push: true, confirm_after: 1h}}
  wide: {discovery: {push: true}}
routes:
  - {name: video, match: {path_prefix: /}, upstream: pushed, auth: api_key}
`, wf, rf)
	// confirm_after 1h: the held update must still be held when the
	// browser confirms it, however slow the machine (the default 30 s
	// released it once, in a run that took 36.7 s).
	h := start(t, cfg)
	adminCall := func(method, path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, h.admin+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+writeSecret)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	instances := func(addrs ...string) string {
		var parts []string
		for _, a := range addrs {
			parts = append(parts, fmt.Sprintf(`{"address": %q}`, a))
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
	if st, b := adminCall("PUT", "/api/v1/upstreams/pushed/endpoints", instances(backs...)); st != 200 {
		t.Fatalf("first push: %d %s", st, b)
	}
	// More endpoints than the page's 200 per upstream: three pages.
	const wideN = 450
	wide := make([]string, wideN)
	for i := range wide {
		wide[i] = fmt.Sprintf("10.9.%d.%d:80", i/200, i%200)
	}
	if st, b := adminCall("PUT", "/api/v1/upstreams/wide/endpoints", instances(wide...)); st != 200 {
		t.Fatalf("pushing %d endpoints: %d %s", wideN, st, b)
	}
	// Three of four endpoints dropped: the delta guard (max_drop_fraction
	// 0.5) holds it, for the whole test (confirm_after 1h: with the
	// default 30 s the hold released itself once the browser half ran
	// longer than that on a busy machine, and the read token's refused
	// Confirm seemed to have applied it).
	if st, b := adminCall("PUT", "/api/v1/upstreams/pushed/endpoints", instances(backs[0])); st != 202 {
		t.Fatalf("dropping push: %d %s, want 202 held", st, b)
	}
	if st, b := adminCall("POST", "/api/v1/apps", `{"id": "acme", "name": "Acme & <Co>", "grants": ["video"]}`); st != 201 {
		t.Fatalf("creating the app: %d %s", st, b)
	}
	// Traffic for the overview: one refusal (no key).
	resp := h.get("/")
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("a request without a key: %d, want 401", resp.StatusCode)
	}
	upstream := func() (held bool, endpoints int) {
		t.Helper()
		st, b := adminCall("GET", "/api/v1/upstreams", "")
		var doc struct {
			Upstreams []struct {
				Name      string
				Endpoints []json.RawMessage
				Discovery *struct{ Held *struct{} }
			}
		}
		if st != 200 || json.Unmarshal(b, &doc) != nil || len(doc.Upstreams) != 2 || doc.Upstreams[0].Name != "pushed" || doc.Upstreams[0].Discovery == nil {
			t.Fatalf("GET /api/v1/upstreams: %d %.500s", st, b)
		}
		u := doc.Upstreams[0]
		return u.Discovery.Held != nil, len(u.Endpoints)
	}
	if held, n := upstream(); !held || n != 4 {
		t.Fatalf("before the browser: held %v, %d endpoints; want held, 4", held, n)
	}

	shots := screenshotDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1200, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()

	// Console API calls of level warning or error, uncaught exceptions, and
	// browser log entries other than the network's (a 401 or 403 answer is
	// logged by the network and expected here; a CSP violation is not).
	var mu sync.Mutex
	var problems []string
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
			mu.Lock()
			problems = append(problems, p)
			mu.Unlock()
		}
	}); err != nil {
		t.Fatalf("starting the browser: %v", err)
	}

	const wait = 15 * time.Second // each state's deadline, generous for 2 busy cores
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(bctx, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	until := func(what, js string) {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(wait))); err != nil {
			page, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("waiting for %s (%s): %v\npage text:\n%s", what, js, err, page)
		}
	}
	text := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("evaluating %s: %v", js, err)
		}
		return s
	}
	shot := func(name string) {
		t.Helper()
		img, err := chromedp.Run(bctx, chromedp.FullScreenshot(100)) // 100: PNG
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		p := filepath.Join(shots, name+".png")
		if err := os.WriteFile(p, img, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot %s (%d bytes)", p, len(img))
	}
	login := func(secret string) {
		t.Helper()
		until("the token prompt", `!document.getElementById('login').hidden`)
		do("entering the token",
			chromedp.Evaluate[chromedp.Void](`document.body.dataset.loaded = ''`),
			chromedp.SendKeys(chromedp.ID("token"), secret),
			chromedp.Click(chromedp.ID("token-save")))
	}
	tab := func(name string) {
		t.Helper()
		do("opening "+name,
			chromedp.Evaluate[chromedp.Void](`document.body.dataset.loaded = ''`),
			chromedp.Click(chromedp.CSS(`button[data-tab="`+name+`"]`)))
		until(name+" loaded", `document.body.dataset.loaded === '`+name+`'`)
	}

	// The page loads without a token, its first API call is refused 401,
	// and it asks for one.
	t0 := time.Now()
	do("loading /ui/", chromedp.Navigate(h.admin+"/ui/"))
	login(readSecret)
	until("the overview", `document.body.dataset.loaded === 'overview'`)
	until("the refusal by reason", `document.getElementById('ov-refusals').textContent.includes('unauthenticated')`)
	until("a rate after the second refresh", `document.getElementById('ov-requests').textContent.includes('per second') && !document.getElementById('ov-requests').textContent.includes('next refresh')`)
	shot("overview")

	tab("upstreams")
	until("the four serving endpoints", `document.querySelectorAll('#upstream-pushed tr.endpoint').length === 4`)
	for _, a := range backs {
		if !strings.Contains(text(`document.getElementById('upstream-pushed').textContent`), a) {
			t.Errorf("the upstreams page does not show endpoint %s", a)
		}
	}
	until("the held update", `document.querySelector('#upstream-pushed .held button.confirm') !== null`)
	shot("upstreams-held")

	// The wide upstream: a page, then the rest through "More endpoints".
	const wideRows = `document.querySelectorAll('#upstream-wide tr.endpoint').length`
	until("the first page of the wide upstream", wideRows+` === 200 && document.querySelector('#upstream-wide .shown').textContent.includes('showing 200 of 450')`)
	for _, want := range []int{400, wideN} {
		do("loading more endpoints", chromedp.Click(chromedp.CSS(`#upstream-wide button.more-endpoints`)))
		until(fmt.Sprintf("%d endpoints of the wide upstream", want), fmt.Sprintf(`%s === %d && document.querySelector('#upstream-wide .shown').textContent.includes('showing %d of 450')`, wideRows, want, want))
	}
	until("no more to load", `document.querySelector('#upstream-wide button.more-endpoints').hidden`)
	if n := text(`String(new Set([...document.querySelectorAll('#upstream-wide tr.endpoint code')].map((c) => c.textContent)).size)`); n != fmt.Sprint(wideN) {
		t.Errorf("the wide upstream's pages show %s distinct endpoints, want %d", n, wideN)
	}
	if got := text(`document.querySelector('#upstream-wide tr.endpoint:last-child code').textContent`); got != "10.9.2.9:80" {
		t.Errorf("the last endpoint shown: %s, want 10.9.2.9:80 (the last by address)", got)
	}
	shot("upstreams-more")

	// A read token's Confirm: refused, shown, nothing released.
	do("confirming with the read token", chromedp.Click(chromedp.CSS(`#upstream-pushed button.confirm`)))
	until("the refusal message", `!document.getElementById('msg').hidden && document.getElementById('msg').className === 'error' && document.getElementById('msg').textContent.includes('insufficient_scope')`)
	shot("upstreams-read-token-refused")
	if held, n := upstream(); !held || n != 4 {
		t.Fatalf("after the read token's Confirm: held %v, %d endpoints; want still held, 4", held, n)
	}

	// The write token's Confirm releases the held update.
	do("forgetting the read token", chromedp.Click(chromedp.ID("signout")))
	login(writeSecret)
	until("the upstreams again", `document.body.dataset.loaded === 'upstreams' && document.querySelector('#upstream-pushed .held button.confirm') !== null`)
	do("confirming with the write token",
		chromedp.Evaluate[chromedp.Void](`document.body.dataset.loaded = ''`),
		chromedp.Click(chromedp.CSS(`#upstream-pushed button.confirm`)))
	until("the applied message", `document.getElementById('msg').className === '' && document.getElementById('msg').textContent.includes('Applied the held update of pushed')`)
	until("the released update shown", `document.body.dataset.loaded === 'upstreams' && document.querySelectorAll('#upstream-pushed tr.endpoint').length === 1 && document.querySelector('#upstream-pushed .held') === null`)
	if held, n := upstream(); held || n != 1 {
		t.Fatalf("after the write token's Confirm: held %v, %d endpoints; want released, 1", held, n)
	}
	shot("upstreams-confirmed")

	tab("routes")
	until("the route", `document.querySelector('#routes tr.route') !== null && document.getElementById('routes').textContent.includes('api_key')`)
	shot("routes")

	// Apps: a new key, shown once, works; then the app is suspended.
	tab("apps")
	until("the app", `document.querySelector('#app-acme .status') !== null && document.querySelector('#app-acme .status').textContent === 'active'`)
	if name := text(`document.querySelector('#app-acme td:nth-child(2)').textContent`); name != "Acme & <Co>" {
		t.Errorf("app name rendered as %q, want the text itself", name)
	}
	do("creating a key", chromedp.Click(chromedp.CSS(`#app-acme button.new-key`)))
	until("the new key", `!document.getElementById('newkey').hidden && document.getElementById('newkey-plain').textContent.length > 10`)
	key := text(`document.getElementById('newkey-plain').textContent`)
	resp = h.get("/", "X-Api-Key", key)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("the key shown on the apps page: data plane answered %d, want 200", resp.StatusCode)
	}
	until("the key listed", `document.querySelectorAll('#app-acme .key').length === 1`)
	shot("apps-new-key")
	do("revoking the key", chromedp.Click(chromedp.CSS(`#app-acme button.revoke`)))
	until("the revoked key", `document.querySelector('#app-acme .key') !== null && document.querySelector('#app-acme .key').textContent.includes('revoked') && document.querySelector('#app-acme button.revoke') === null`)
	resp = h.get("/", "X-Api-Key", key)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("the key revoked on the apps page: data plane answered %d, want 401", resp.StatusCode)
	}
	do("suspending the app", chromedp.Click(chromedp.CSS(`#app-acme button.set-status`)))
	until("the suspended app", `document.querySelector('#app-acme .status') !== null && document.querySelector('#app-acme .status').textContent === 'suspended'`)
	if st, b := adminCall("GET", "/api/v1/apps/acme", ""); st != 200 || !strings.Contains(string(b), `"status": "suspended"`) {
		t.Errorf("after Suspend: GET /api/v1/apps/acme %d %s", st, b)
	}
	shot("apps-suspended")

	// Reloads: a refused reload is listed with its problem.
	good, err := os.ReadFile(h.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	h.writeConfig(cfg + "bogus_field: 1\n")
	if st, _ := adminCall("POST", "/api/v1/reload", ""); st != 422 {
		t.Fatalf("a bad reload: %d, want 422", st)
	}
	if err := os.WriteFile(h.cfgPath, good, 0o644); err != nil {
		t.Fatal(err)
	}
	tab("reloads")
	until("the refused reload", `document.querySelectorAll('#reloads tr.reload').length === 2 && document.getElementById('reloads').textContent.includes('bogus_field')`)
	until("the rollback versions", `document.querySelectorAll('#rollbacks tr.rollback').length >= 1 && document.getElementById('rollbacks').textContent.includes('config')`)
	shot("reloads")

	tab("profiles")
	until("the profiles list", `document.getElementById('profiles').textContent.includes('none captured')`)
	shot("profiles")
	t.Logf("browser session: %v for every page", time.Since(t0).Round(time.Millisecond))

	cancelBrowser()
	cancelAlloc()
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems {
		t.Errorf("browser console: %s", p)
	}
}

// screenshotDir returns where TestAdminUIInBrowser keeps its screenshots:
// $LEVEE_ARTIFACTS/ui-screenshots, else levee-ui-screenshots in the
// system's temporary directory (kept after the test, unlike t.TempDir).
func screenshotDir(t *testing.T) string {
	t.Helper()
	base := os.Getenv("LEVEE_ARTIFACTS")
	if base == "" {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "levee-ui-screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}
