package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/levee-gw/levee/internal/testsvc"
)

// attackJS is what a hostile page runs against the admin API at ADMIN
// (with TOKEN, "" for none): every write a browser can send without the
// page's origin being allowed by CORS, and the preflighted ones too. It
// resolves with one line per attempt (what the page could see: "opaque"
// for a no-cors answer, the status, or the error), after every request
// and every form submission has finished.
const attackJS = `(async () => {
  const admin = ADMIN, token = TOKEN;
  const app = JSON.stringify({id: 'evil', grants: ['video']});
  const def = JSON.stringify({name: 'evil-data', match: {path_prefix: '/evil'},
    data: {source: 'sales', sql: 'SELECT * FROM orders'}});
  const auth = token ? {Authorization: 'Bearer ' + token} : {};
  const out = [];
  const attempt = async (what, path, init) => {
    try {
      const r = await fetch(admin + path, Object.assign({credentials: 'include'}, init));
      out.push(what + ': ' + (r.type === 'opaque' ? 'opaque' : r.status));
    } catch (e) { out.push(what + ': ' + e.name); }
  };
  // Simple requests: no preflight, the browser sends them.
  await attempt('no-cors text/plain app', '/api/v1/apps', {method: 'POST', mode: 'no-cors', headers: Object.assign({'Content-Type': 'text/plain'}, auth), body: app});
  await attempt('no-cors data api', '/api/v1/data-apis', {method: 'POST', mode: 'no-cors', body: def});
  await attempt('no-cors publish', '/api/v1/data-apis/evil-data/publish', {method: 'POST', mode: 'no-cors'});
  await attempt('no-cors reload', '/api/v1/reload', {method: 'POST', mode: 'no-cors', headers: auth});
  await attempt('no-cors key', '/api/v1/apps/victim/keys', {method: 'POST', mode: 'no-cors'});
  await attempt('no-cors confirm', '/api/v1/upstreams/pushed/confirm', {method: 'POST', mode: 'no-cors'});
  const fd = new FormData(); fd.append('id', 'evil-multipart');
  await attempt('no-cors multipart', '/api/v1/apps', {method: 'POST', mode: 'no-cors', body: fd});
  await attempt('no-cors form-urlencoded', '/api/v1/apps', {method: 'POST', mode: 'no-cors', body: new URLSearchParams({id: 'evil-urlencoded'})});
  await attempt('cors text/plain app', '/api/v1/apps', {method: 'POST', headers: {'Content-Type': 'text/plain'}, body: app});
  // Preflighted: JSON, a token, other methods.
  await attempt('cors json app', '/api/v1/apps', {method: 'POST', headers: Object.assign({'Content-Type': 'application/json'}, auth), body: app});
  await attempt('cors json data api', '/api/v1/data-apis', {method: 'POST', headers: Object.assign({'Content-Type': 'application/json'}, auth), body: def});
  await attempt('PATCH', '/api/v1/apps/victim', {method: 'PATCH', headers: Object.assign({'Content-Type': 'application/json'}, auth), body: '{"status":"suspended"}'});
  await attempt('PATCH text/plain', '/api/v1/apps/victim', {method: 'PATCH', headers: {'Content-Type': 'text/plain'}, body: '{"status":"suspended"}'});
  await attempt('PUT', '/api/v1/upstreams/pushed/endpoints', {method: 'PUT', headers: auth, body: '[]'});
  await attempt('DELETE', '/api/v1/apps/victim', {method: 'DELETE', headers: auth});
  await attempt('no-cors PUT', '/api/v1/upstreams/pushed/endpoints', {method: 'PUT', mode: 'no-cors', body: '[]'});
  await attempt('no-cors DELETE', '/api/v1/apps/victim', {method: 'DELETE', mode: 'no-cors'});
  // Reads a page would like to steal.
  await attempt('read config', '/api/v1/config', {headers: auth});
  await attempt('no-cors read pprof', '/debug/pprof/cmdline', {mode: 'no-cors'});
  // Submitted forms: the text/plain JSON trick and a plain form, each
  // into its own frame.
  const submit = (action, enctype, fields) => new Promise((resolve) => {
    const name = 'f' + Math.random().toString(36).slice(2);
    const frame = document.createElement('iframe');
    frame.name = name;
    frame.onload = () => resolve();
    document.body.appendChild(frame);
    const form = document.createElement('form');
    form.method = 'POST'; form.action = admin + action; form.enctype = enctype; form.target = name;
    for (const [k, v] of fields) {
      const i = document.createElement('input'); i.type = 'hidden'; i.name = k; i.value = v; form.appendChild(i);
    }
    document.body.appendChild(form);
    form.submit();
  });
  await submit('/api/v1/apps', 'text/plain', [['{"id":"evil-form","grants":["video"],"x":"', '"}']]);
  await submit('/api/v1/apps', 'application/x-www-form-urlencoded', [['id', 'evil-form2']]);
  await submit('/api/v1/reload', 'multipart/form-data', [['x', '1']]);
  await submit('/api/v1/data-apis', 'text/plain', [['{"name":"evil-form-data","match":{"path_prefix":"/evil2"},"data":{"source":"sales","sql":"SELECT * FROM orders"},"x":"', '"}']]);
  out.push('forms: submitted 4');
  return out.join('\n');
})()`

// TestAdminRefusesCrossOriginPagesInBrowser (issue 22): pages served from
// other origins in a real headless Chromium try every admin write a
// browser can send (no-cors fetches with text/plain, multipart and
// urlencoded bodies, submitted forms including the text/plain JSON trick,
// and the preflighted JSON, PATCH, PUT and DELETE), with and without the
// admin token, against two levees: one with admin.token none (no
// credential: the browser checks alone must hold) and one with its
// generated token. Origins: a page on 127.0.0.1 at another port (same
// site) calling the admin at 127.0.0.1, the same page calling the admin
// at localhost (cross-site), and a DNS-rebinding page whose name the
// browser resolves to the admin listener (its same-origin requests carry
// its Host: 421). Afterwards, through the admin API: no app created,
// changed or deleted, no data API, no key, no reload, the pushed
// upstream unchanged. A name listed in admin.hosts opens the UI, and the
// UI works with the generated token (reads open, the first action asks
// for the token, then goes through).
func TestAdminRefusesCrossOriginPagesInBrowser(t *testing.T) {
	chromium := testsvc.ChromiumPath(t)
	dbPath, _ := sqliteOrders(t)
	back, _ := backend(t, "b")
	cfg := func(admin string) string {
		return fmt.Sprintf(`
listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0, hosts: [levee-admin.test]%s}
log: {access: false}
upstreams:
  video: {endpoints: [{address: %s}]}
  pushed: {discovery: {push: true}}
data_sources:
  sales: {driver: sqlite, path: %s, max_conns: 2}
routes:
  - {name: video, match: {path_prefix: /}, upstream: video, auth: api_key}
apps:
  - {id: victim, grants: [video]}
`, admin, hostPort(back), dataQuote(dbPath))
	}
	open := start(t, cfg(", token: none"))
	guarded := start(t, cfg(""))
	tok := generatedToken(guarded.g)
	if tok == "" {
		t.Fatal("the guarded levee has no generated token")
	}
	for _, h := range []*harness{open, guarded} {
		if status, doc := pushEndpoints(t, h, "pushed", fmt.Sprintf(`[{"address": %q}]`, hostPort(back))); status != 200 {
			t.Fatalf("push: %d %v", status, doc)
		}
	}
	reloads := func(h *harness) int {
		t.Helper()
		var doc struct{ Reloads []json.RawMessage }
		getJSON(t, h.admin+"/api/v1/reloads", &doc)
		return len(doc.Reloads)
	}
	before := map[*harness]int{open: reloads(open), guarded: reloads(guarded)}

	// The hostile page: any content, served by another server (another
	// port, so another origin).
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><title>cat pictures</title><p>nothing to see</p>`)
	}))
	defer attacker.Close()
	attackerPort := attacker.Listener.Addr().String()
	attackerPort = attackerPort[strings.LastIndexByte(attackerPort, ':')+1:]

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("disable-quic", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1000, 700),
		// The rebinding attacker's name, and the operator's admin.hosts
		// name, resolve to loopback (as DNS would make them).
		chromedp.Flag("host-resolver-rules", "MAP evil.test 127.0.0.1, MAP levee-admin.test 127.0.0.1"))
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	run := func(what string, js string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return s
	}
	navigate := func(url string) {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
			t.Fatalf("navigating to %s: %v", url, err)
		}
	}

	for _, h := range []*harness{open, guarded} {
		adminPort := h.admin[strings.LastIndexByte(h.admin, ':')+1:]
		name := "token none"
		tokens := []string{""}
		if h == guarded {
			name, tokens = "generated token", []string{"", tok}
		}
		for _, from := range []string{"http://127.0.0.1:" + attackerPort + "/", "http://evil.test:" + attackerPort + "/"} {
			navigate(from)
			for _, target := range []string{"http://127.0.0.1:" + adminPort, "http://localhost:" + adminPort} {
				for _, tk := range tokens {
					js := strings.NewReplacer("ADMIN", fmt.Sprintf("%q", target), "TOKEN", fmt.Sprintf("%q", tk)).Replace(attackJS)
					got := run("the attack", js)
					t.Logf("%s, page %s → admin %s, token %v:\n%s", name, from, target, tk != "", got)
					for _, line := range strings.Split(got, "\n") {
						// A status the page can read is a refusal or a read
						// of nothing secret; 2xx on a write is a breach.
						if strings.Contains(line, ": 2") && !strings.HasPrefix(line, "read") {
							t.Errorf("%s: the page saw a write succeed: %s", name, line)
						}
						if strings.HasPrefix(line, "read config: 200") {
							t.Errorf("%s: the page read the configuration", name)
						}
					}
				}
			}
		}

		// DNS rebinding: the browser believes evil.test:ADMINPORT is the
		// attacker's origin; its requests reach levee with that Host.
		navigate("http://evil.test:" + adminPort + "/ui/")
		got := run("the rebound page", `(async () => {
  const out = [];
  for (const [m, p, b] of [['GET', '/api/v1/config'], ['GET', '/debug/pprof/cmdline'], ['GET', '/metrics'],
      ['POST', '/api/v1/apps', '{"id":"evil-rebound","grants":["video"]}'], ['POST', '/api/v1/reload'],
      ['PATCH', '/api/v1/apps/victim', '{"status":"suspended"}'], ['DELETE', '/api/v1/apps/victim']]) {
    const r = await fetch(p, {method: m, headers: b ? {'Content-Type': 'application/json'} : {}, body: b});
    out.push(m + ' ' + p + ': ' + r.status + ' ' + (await r.text()).includes('host_not_allowed'));
  }
  return out.join('\n');
})()`)
		t.Logf("%s, rebound page:\n%s", name, got)
		for _, line := range strings.Split(got, "\n") {
			if !strings.HasSuffix(line, ": 421 true") {
				t.Errorf("%s: a request of the rebound page was not refused 421 host_not_allowed: %s", name, line)
			}
		}
		// The name the operator listed works, UI and API.
		navigate("http://levee-admin.test:" + adminPort + "/ui/")
		if got := run("the listed name", `fetch('/api/v1/upstreams').then(r => String(r.status))`); got != "200" {
			t.Errorf("%s: a same-origin read at an admin.hosts name: %s, want 200", name, got)
		}
	}

	// Nothing changed, as the admin API tells.
	for _, h := range []*harness{open, guarded} {
		var list struct{ Apps []struct{ ID, Status string } }
		getJSON(t, h.admin+"/api/v1/apps", &list)
		if len(list.Apps) != 1 || list.Apps[0].ID != "victim" || list.Apps[0].Status != "active" {
			t.Errorf("apps after the attacks: %+v, want only victim, active", list.Apps)
		}

		var keys struct{ Keys []json.RawMessage }
		getJSON(t, h.admin+"/api/v1/apps/victim", &keys)
		if len(keys.Keys) != 0 {
			t.Errorf("victim has %d keys after the attacks, want 0", len(keys.Keys))
		}
		var apis struct {
			DataAPIs []json.RawMessage `json:"data_apis"`
		}
		getJSON(t, h.admin+"/api/v1/data-apis", &apis)
		if len(apis.DataAPIs) != 0 {
			t.Errorf("data APIs after the attacks: %d, want 0", len(apis.DataAPIs))
		}
		if n := reloads(h); n != before[h] {
			t.Errorf("reloads after the attacks: %d, want %d", n, before[h])
		}
		var up struct{ Endpoints []json.RawMessage }
		getJSON(t, h.admin+"/api/v1/upstreams/pushed", &up)
		if len(up.Endpoints) != 1 {
			t.Errorf("pushed upstream after the attacks: %d endpoints, want 1", len(up.Endpoints))
		}
		resp := h.get("/evil")
		resp.Body.Close()
		if resp.StatusCode != 401 { // the video route (auth), not a data API
			t.Errorf("GET /evil: %d, want 401 from the video route", resp.StatusCode)
		}
	}

	// The operator's own UI works with the generated token: it reads
	// without one, its first action is answered 401 and it asks for the
	// token; with it, the action goes through its same-origin JSON write.
	until := func(what, js string) {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
			page, _ := chromedp.Run(bctx, chromedp.Evaluate[string](`document.body.innerText`))
			t.Fatalf("waiting for %s: %v\npage text:\n%s", what, err, page)
		}
	}
	// click clicks the element sel finds, in one evaluation in the page:
	// the UI re-renders its lists, so a node chromedp found may be gone by
	// the time it clicks it ("Could not find node with given id").
	click := func(what, sel string) {
		t.Helper()
		until(what, fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (e === null) return false; e.click(); return true; })()`, sel))
	}
	navigate(guarded.admin + "/ui/")
	until("the overview without a token", `document.body.dataset.loaded === 'overview' && document.getElementById('login').hidden`)
	click("the apps tab", `button[data-tab="apps"]`)
	until("the victim app", `document.querySelector('#app-victim .status') !== null && document.querySelector('#app-victim .status').textContent === 'active'`)
	click("suspending without a token", `#app-victim button.set-status`)
	until("the token prompt", `!document.getElementById('login').hidden`)
	if err := chromedp.Do(bctx, chromedp.SendKeys(chromedp.ID("token"), tok), chromedp.Click(chromedp.ID("token-save"))); err != nil {
		t.Fatalf("entering the generated token: %v", err)
	}
	until("the apps page again", `document.getElementById('login').hidden && document.querySelector('#app-victim button.set-status') !== null`)
	click("suspending with the token", `#app-victim button.set-status`)
	until("the suspended app", `document.querySelector('#app-victim .status') !== null && document.querySelector('#app-victim .status').textContent === 'suspended'`)
	var victim struct{ Status string }
	getJSON(t, guarded.admin+"/api/v1/apps/victim", &victim)
	if victim.Status != "suspended" {
		t.Errorf("after Suspend in the UI with the generated token: status %q, want suspended", victim.Status)
	}
}
