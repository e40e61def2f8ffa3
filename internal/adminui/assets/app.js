// levee admin UI: plain JavaScript, no framework, no build step.
//
// Every figure comes from the admin API (/api/v1/...) on this origin. When
// the API has tokens, the page asks for one once, keeps it in this tab's
// sessionStorage and sends it as "Authorization: Bearer"; a 401 asks again.
// A read token sees everything; its write actions are refused by the API
// (403 insufficient_scope), and the page shows that refusal as a message.
//
// Rendering never parses data as HTML: every value goes through
// textContent (el() below), and every path segment through
// encodeURIComponent.
'use strict';

(function () {
  const TOKEN_KEY = 'levee-admin-token';
  const OVERVIEW_EVERY_MS = 3000; // the overview's refresh period
  const APPS_PAGE = 100; // apps listed per request (the API's page)
  // Endpoints listed per upstream on opening the page, and per "More"
  // (the API pages them: an upstream may have 100,000).
  const ENDPOINTS_PAGE = 200;

  let current = 'overview';
  let overviewTimer = 0;
  let lastSummary = null; // the previous summary and when it came, for rates
  let appsAfter = '';

  // ---- DOM helpers ----

  const $ = (id) => document.getElementById(id);

  // el builds an element; string and number children become text nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'onclick') e.addEventListener('click', v);
      else if (k === 'dataset') Object.assign(e.dataset, v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function clear(node) { node.replaceChildren(); return node; }
  function tbody(id) { return clear($(id).tBodies[0]); }
  function num(v) { return typeof v === 'number' ? v.toLocaleString('en-US', { maximumFractionDigits: 2 }) : '–'; }
  function when(s) {
    if (!s) return '–';
    const d = new Date(s);
    return isNaN(d) ? String(s) : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
  }
  function pct(f) { return typeof f === 'number' ? (f * 100).toFixed(0) + ' %' : '–'; }

  function show(text, isError) {
    const m = $('msg');
    m.textContent = text;
    m.className = isError ? 'error' : '';
    m.hidden = false;
  }
  function hideMsg() { $('msg').hidden = true; }

  // ---- the API ----

  // ApiError is a refusal of the admin API, with its status and reason.
  class ApiError extends Error {
    constructor(status, reason, message) { super(message); this.status = status; this.reason = reason; }
  }

  // api calls the admin API and returns the decoded JSON body (null for
  // 204). A 401 opens the token prompt; every refusal throws an ApiError
  // whose message is the API's own.
  async function api(method, path, body, raw) {
    const headers = {};
    const tok = sessionStorage.getItem(TOKEN_KEY);
    if (tok) headers.Authorization = 'Bearer ' + tok;
    const init = { method, headers, cache: 'no-store' };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, 'unreachable', 'levee did not answer: ' + e.message);
    }
    if (resp.status === 401) {
      const why = tok ? 'The token was refused; enter another.' : '';
      askToken(why);
      throw new ApiError(401, 'unauthorized', 'a token is needed');
    }
    if (raw && resp.ok) return resp;
    if (resp.status === 204) return null;
    let doc = null;
    try { doc = await resp.json(); } catch (e) { doc = null; }
    if (!resp.ok) {
      const reason = doc && doc.reason ? doc.reason : 'http_' + resp.status;
      const text = doc && doc.error ? doc.error : 'HTTP ' + resp.status;
      throw new ApiError(resp.status, reason, text);
    }
    return doc;
  }

  // report shows an action's failure (a 401 has opened the prompt instead).
  function report(what, e) {
    if (e instanceof ApiError && e.status === 401) return;
    const status = e instanceof ApiError && e.status ? ' (' + e.status + ' ' + e.reason + ')' : '';
    show(what + ' refused' + status + ': ' + e.message, true);
  }

  // ---- token prompt ----

  function askToken(why) {
    stopOverview();
    $('login').hidden = false;
    document.querySelector('main').hidden = true;
    $('login-why').textContent = why || '';
    $('login-why').hidden = !why;
    $('token').value = '';
    $('token').focus();
  }

  function saveToken() {
    const v = $('token').value.trim();
    if (!v) return;
    sessionStorage.setItem(TOKEN_KEY, v);
    $('login').hidden = true;
    document.querySelector('main').hidden = false;
    $('signout').hidden = false;
    hideMsg();
    open(current);
  }

  // ---- pages ----

  const pages = {
    overview: loadOverview,
    upstreams: loadUpstreams,
    routes: loadRoutes,
    apps: () => loadApps(false),
    reloads: loadReloads,
    profiles: loadProfiles,
  };

  function open(name) {
    if (!pages[name]) name = 'overview';
    current = name;
    for (const b of document.querySelectorAll('.tab')) b.setAttribute('aria-selected', String(b.dataset.tab === name));
    for (const p of document.querySelectorAll('.page')) p.hidden = p.id !== 'page-' + name;
    if (location.hash !== '#' + name) history.replaceState(null, '', '#' + name);
    stopOverview();
    load(name);
    if (name === 'overview') overviewTimer = setInterval(() => load('overview'), OVERVIEW_EVERY_MS);
  }

  function stopOverview() {
    if (overviewTimer) clearInterval(overviewTimer);
    overviewTimer = 0;
  }

  // load runs a page's loader; its failure is shown, never thrown.
  async function load(name) {
    try {
      await pages[name]();
      document.body.dataset.loaded = name; // tests wait on this
    } catch (e) {
      report('Loading ' + name, e);
    }
  }

  // Overview: /api/v1/summary every few seconds; rates from the previous.
  async function loadOverview() {
    let s;
    try {
      s = await api('GET', '/api/v1/summary');
    } catch (e) {
      $('live').textContent = 'not updating';
      $('live').className = 'live stale';
      throw e;
    }
    const now = Date.now();
    const prev = lastSummary;
    lastSummary = { s, at: now };
    const secs = prev ? (now - prev.at) / 1000 : 0;
    const rate = (v, p) => (prev && secs > 0 && typeof p === 'number' ? Math.max(0, (v - p) / secs) : null);
    const card = (label, value, sub, id) => el('div', { class: 'card', id }, el('div', { class: 'label' }, label),
      el('div', { class: 'value' }, value), el('div', { class: 'sub' }, sub));
    const reqRate = rate(s.requests, prev && prev.s.requests);
    const errRate = rate(s.errors, prev && prev.s.errors);
    const refTotal = s.refusals.reduce((a, r) => a + r.total, 0);
    const last = s.last_reload || {};
    clear($('ov-cards')).append(
      card('requests', num(s.requests), reqRate === null ? 'per second: next refresh' : num(reqRate) + ' per second', 'ov-requests'),
      card('errors (5xx)', num(s.errors), errRate === null ? '' : num(errRate) + ' per second', 'ov-errors'),
      card('refusals', num(refTotal), 'answered by levee itself', 'ov-refused'),
      card('in flight', num(s.inflight), 'requests being served', 'ov-inflight'),
      card('last reload', last.success === false ? 'refused' : 'ok', when(last.time), 'ov-reload'),
    );
    const prevRef = new Map(((prev && prev.s.refusals) || []).map((r) => [r.reason, r.total]));
    const rb = tbody('ov-refusals');
    if (s.refusals.length === 0) rb.append(el('tr', {}, el('td', { colspan: 3 }, 'none')));
    for (const r of s.refusals) {
      const rr = rate(r.total, prevRef.get(r.reason));
      rb.append(el('tr', {}, el('td', {}, r.reason), el('td', { class: 'num' }, num(r.total)), el('td', { class: 'num' }, rr === null ? '–' : num(rr))));
    }
    const eb = tbody('ov-endpoints');
    const states = Object.entries(s.endpoints || {});
    if (states.length === 0) eb.append(el('tr', {}, el('td', { colspan: 2 }, 'none')));
    for (const [state, n] of states) eb.append(el('tr', {}, el('td', { class: 'state-' + state }, state), el('td', { class: 'num' }, num(n))));
    $('live').textContent = 'live, every ' + OVERVIEW_EVERY_MS / 1000 + ' s, updated ' + new Date(now).toLocaleTimeString();
    $('live').className = 'live';
  }

  // Upstreams: endpoints (a page each, more on demand), discovery,
  // quarantine and the held update.
  async function loadUpstreams() {
    const doc = await api('GET', '/api/v1/upstreams?limit=' + ENDPOINTS_PAGE);
    const box = clear($('upstreams'));
    if (doc.upstreams.length === 0) box.append(el('p', {}, 'No upstreams.'));
    for (const u of doc.upstreams) box.append(renderUpstream(u));
  }

  function renderUpstream(u) {
    const d = u.discovery;
    const card = el('div', { class: 'upstream', id: 'upstream-' + u.name, dataset: { upstream: u.name } },
      el('h3', {}, u.name),
      el('p', { class: 'meta' }, 'balancer ' + u.balancer + (u.panic ? ' · PANIC MODE' : '') + ' · panic entries ' + u.panic_total));
    if (d) {
      card.append(el('p', { class: 'meta' }, 'discovery ' + d.source + ' · serving from ' + (d.serving_from || 'nothing yet') +
        ' · updated ' + when(d.updated) + (d.last_error ? ' · last error: ' + d.last_error : '')));
      if (d.held) {
        card.append(el('div', { class: 'held' },
          'Held update: it would drop ' + pct(d.held.drop_fraction) + ' of the endpoints (' + d.held.instances + ' instances), held since ' + when(d.held.since) + '. ',
          el('button', { type: 'button', class: 'confirm', dataset: { upstream: u.name }, onclick: () => confirmHeld(u.name) }, 'Confirm')));
      }
    }
    const rows = u.endpoints.map(endpointRow);
    const body = el('tbody', {}, rows.length ? rows : el('tr', {}, el('td', { colspan: 10 }, 'no endpoints')));
    card.append(el('table', { class: 'endpoints' },
      el('thead', {}, el('tr', {}, ['address', 'zone', 'state', 'weight', 'effective weight', 'in flight', 'requests', 'failures', 'ejections', 'last change']
        .map((h, i) => el('th', { class: i >= 3 && i <= 8 ? 'num' : '' }, h)))),
      body));
    // The first page is shown; "More" follows the API's next link.
    const shown = el('span', { class: 'meta shown' });
    const more = el('button', { type: 'button', class: 'more-endpoints', dataset: { upstream: u.name } }, 'More endpoints');
    let next = u.endpoints_next || '';
    let count = u.endpoints.length;
    const total = typeof u.endpoints_total === 'number' ? u.endpoints_total : count;
    const update = () => {
      shown.textContent = 'showing ' + num(count) + ' of ' + num(total) + ' endpoints' + (next ? ' · ' : '');
      more.hidden = !next;
    };
    more.addEventListener('click', async () => {
      // Only a path of this API is followed.
      if (!next.startsWith('/api/v1/upstreams/')) return;
      more.disabled = true;
      try {
        const page = await api('GET', next);
        for (const e of page.endpoints) body.append(endpointRow(e));
        count += page.endpoints.length;
        next = page.next || '';
        document.body.dataset.loaded = 'upstreams-more'; // tests wait on this
      } catch (e) {
        report('Loading more endpoints of ' + u.name, e);
      } finally {
        more.disabled = false;
        update();
      }
    });
    update();
    card.append(el('p', { class: 'paging' }, shown, more));
    if (d && d.quarantined && d.quarantined.length) {
      const qt = typeof d.quarantined_total === 'number' ? d.quarantined_total : d.quarantined.length;
      card.append(el('h4', {}, 'Quarantined records of the latest update' + (qt > d.quarantined.length ? ' (the first ' + num(d.quarantined.length) + ' of ' + num(qt) + ')' : '')), el('table', { class: 'quarantine' },
        el('thead', {}, el('tr', {}, ['key', 'reason', 'field', 'raw', 'message'].map((h) => el('th', {}, h)))),
        el('tbody', {}, d.quarantined.map((q) => el('tr', {}, el('td', {}, q.key), el('td', {}, q.reason), el('td', {}, q.field || ''),
          el('td', {}, el('code', {}, q.raw)), el('td', {}, q.message))))));
    }
    return card;
  }

  function endpointRow(e) {
    return el('tr', { class: 'endpoint' },
      el('td', {}, el('code', {}, e.address)), el('td', {}, e.zone || ''),
      el('td', { class: 'state-' + e.state }, e.state),
      el('td', { class: 'num' }, num(e.weight)), el('td', { class: 'num' }, num(e.effective_weight)),
      el('td', { class: 'num' }, num(e.inflight)), el('td', { class: 'num' }, num(e.requests)), el('td', { class: 'num' }, num(e.failures)),
      el('td', { class: 'num' }, num(e.ejections)), el('td', {}, [e.last_reason, e.since ? 'since ' + when(e.since) : ''].filter(Boolean).join(', ')));
  }

  async function confirmHeld(name) {
    try {
      const r = await api('POST', '/api/v1/upstreams/' + encodeURIComponent(name) + '/confirm');
      show('Applied the held update of ' + name + ' (drop ' + pct(r.drop_fraction) + ', held for ' + r.held_for + ').', false);
    } catch (e) {
      report('Confirm for ' + name, e);
      return;
    }
    await load('upstreams');
  }

  // Routes.
  async function loadRoutes() {
    const doc = await api('GET', '/api/v1/routes');
    const b = tbody('routes');
    if (doc.routes.length === 0) b.append(el('tr', {}, el('td', { colspan: 7 }, 'no routes')));
    for (const r of doc.routes) {
      const match = routeDetails(r);
      const l = r.limits;
      const limits = ['priority ' + l.priority, 'concurrency ' + l.concurrency, l.timeout ? 'timeout ' + l.timeout : '',
        l.retry_attempts > 1 ? l.retry_attempts + ' attempts' : '', l.anonymous_rate ? 'anonymous ' + l.anonymous_rate + '/s' : '',
        l.max_rows ? 'max rows ' + l.max_rows : ''].filter(Boolean).join(' · ');
      b.append(el('tr', { class: 'route' }, el('td', {}, r.name), el('td', {}, match), el('td', {}, r.kind),
        el('td', {}, r.upstream || r.data_source || (r.split ? r.split.sides.map((s) => s.upstream).join(' / ') : '')), el('td', {}, r.auth),
        el('td', { class: 'num' }, num(r.granted_apps)), el('td', { class: 'meta' }, limits)));
    }
  }

  // routeDetails renders a route's match and what it changes as a small
  // table of key/values: one row per set field, so a new block adds rows.
  function routeDetails(r) {
    const m = r.match;
    const cond = (c) => c.name + ' ' + c.test + (c.value !== undefined ? ' ' + c.value : '');
    const rows = [
      ['host', m.host || '*'],
      ['path', m.path], ['path_prefix', m.path_prefix], ['path_template', m.path_template], ['path_regex', m.path_regex],
      ['methods', m.methods && m.methods.join(', ')],
      ['headers', m.headers && m.headers.map(cond).join('; ')],
      ['query', m.query && m.query.map(cond).join('; ')],
      ['raw_path', m.raw_path ? 'true' : ''],
    ];
    const rw = r.rewrite;
    if (rw) {
      rows.push(['rewrite.strip_prefix', rw.strip_prefix], ['rewrite.replace_prefix', rw.replace_prefix],
        ['rewrite.path_regex', rw.path_regex ? rw.path_regex + ' → ' + rw.substitution : ''], ['rewrite.host', rw.host]);
    }
    const sp = r.split;
    if (sp) {
      rows.push(['split', sp.sides.map((s) => s.upstream + ' ' + s.weight).join(', ')],
        ['split.sticky', sp.sticky_header ? 'header ' + sp.sticky_header : sp.sticky_cookie ? 'cookie ' + sp.sticky_cookie : '']);
    }
    const mi = r.mirror;
    if (mi) {
      rows.push(['mirror.upstream', mi.upstream], ['mirror.percent', mi.percent + ' %'],
        ['mirror.max_in_flight', String(mi.max_in_flight)], ['mirror.timeout', mi.timeout]);
    }
    return el('table', { class: 'kv' }, ...rows.filter((kv) => kv[1]).map((kv) =>
      el('tr', {}, el('th', {}, kv[0]), el('td', {}, el('code', {}, kv[1])))));
  }

  // Apps: list, suspend or activate, create and revoke keys.
  async function loadApps(more) {
    if (!more) appsAfter = '';
    const q = '?limit=' + APPS_PAGE + (appsAfter ? '&after=' + encodeURIComponent(appsAfter) : '');
    const page = await api('GET', '/api/v1/apps' + q);
    const b = more ? $('apps').tBodies[0] : tbody('apps');
    if (!more && page.apps.length === 0) b.append(el('tr', {}, el('td', { colspan: 6 }, 'no apps')));
    for (const a of page.apps) b.append(renderApp(a));
    appsAfter = page.next || '';
    $('apps-more').hidden = !appsAfter;
  }

  function renderApp(a) {
    const keys = a.keys.map((k) => el('div', { class: 'key' },
      el('code', {}, k.id), k.prefix ? ' ' + k.prefix + '…' : '', ' ', el('span', { class: 'meta' }, k.source + ', ' + when(k.created)),
      k.revoked ? el('span', { class: 'error' }, ' revoked ' + when(k.revoked))
        : el('button', { type: 'button', class: 'revoke', dataset: { app: a.id, key: k.id }, onclick: () => revokeKey(a.id, k.id) }, 'Revoke')));
    const next = a.status === 'suspended' ? 'active' : 'suspended';
    return el('tr', { class: 'app', id: 'app-' + a.id, dataset: { app: a.id } },
      el('td', {}, el('code', {}, a.id)), el('td', {}, a.name), el('td', { class: 'status' }, a.status),
      el('td', {}, a.grants.join(', ')), el('td', {}, keys.length ? keys : 'none'),
      el('td', {},
        el('button', { type: 'button', class: 'set-status', dataset: { app: a.id }, onclick: () => setStatus(a.id, next) }, next === 'suspended' ? 'Suspend' : 'Activate'),
        ' ',
        el('button', { type: 'button', class: 'new-key', dataset: { app: a.id }, onclick: () => newKey(a.id, a.name) }, 'New key')));
  }

  async function setStatus(id, status) {
    try {
      await api('PATCH', '/api/v1/apps/' + encodeURIComponent(id), { status });
      show('App ' + id + ' is now ' + status + '.', false);
    } catch (e) {
      report('Setting app ' + id + ' ' + status, e);
      return;
    }
    await load('apps');
  }

  async function revokeKey(id, keyID) {
    try {
      await api('DELETE', '/api/v1/apps/' + encodeURIComponent(id) + '/keys/' + encodeURIComponent(keyID));
      show('Key ' + keyID + ' of app ' + id + ' is revoked.', false);
    } catch (e) {
      report('Revoking key ' + keyID, e);
      return;
    }
    await load('apps');
  }

  async function newKey(id, name) {
    let k;
    try {
      k = await api('POST', '/api/v1/apps/' + encodeURIComponent(id) + '/keys');
    } catch (e) {
      report('Creating a key for ' + id, e);
      return;
    }
    $('newkey-app').textContent = name || id;
    $('newkey-id').textContent = k.id;
    $('newkey-plain').textContent = k.key;
    $('newkey').hidden = false;
    hideMsg();
    await load('apps');
  }

  function forgetNewKey() {
    $('newkey-plain').textContent = '';
    $('newkey').hidden = true;
  }

  // Reloads: the recent history, newest first.
  async function loadReloads() {
    const doc = await api('GET', '/api/v1/reloads');
    const b = tbody('reloads');
    const first = doc.reloads[0];
    $('reloads-last').textContent = first ? 'Last: ' + first.result + ' at ' + when(first.time) + '.' : '';
    for (const r of doc.reloads) {
      b.append(el('tr', { class: 'reload' }, el('td', {}, when(r.time)),
        el('td', { class: r.result === 'error' ? 'error' : '' }, r.result),
        el('td', {}, (r.problems || []).map((p) => el('div', {}, p)))));
    }
    if (doc.reloads.length === 0) b.append(el('tr', {}, el('td', { colspan: 3 }, 'none yet')));
    await loadRollbacks();
  }

  // Rollbacks: the versions newest first, with an unpin button on pinned ones.
  async function loadRollbacks() {
    const doc = await api('GET', '/api/v1/rollbacks');
    const b = tbody('rollbacks');
    $('rollbacks-state').textContent = !doc.enabled ? 'Automatic rollback is off.'
      : doc.serving_good ? 'Serving the last good configuration, not the file: ' + (doc.why || '') : '';
    const pinned = new Set((doc.pins || []).map((p) => p.version));
    for (const v of doc.versions || []) {
      const pin = pinned.has(v.version)
        ? el('button', { type: 'button', class: 'unpin', onclick: () => unpin(v.version) }, 'Unpin') : '';
      b.append(el('tr', { class: 'rollback' }, el('td', {}, String(v.version)), el('td', {}, when(v.at)),
        el('td', {}, v.kind), el('td', {}, v.subject),
        el('td', { class: v.state === 'rolled_back' ? 'error' : '' }, v.state), el('td', {}, v.reason || ''), el('td', {}, pin)));
    }
    if (!doc.versions || doc.versions.length === 0) b.append(el('tr', {}, el('td', { colspan: 7 }, 'none yet')));
  }

  async function unpin(version) {
    await api('DELETE', '/api/v1/rollbacks/pins/' + version);
    await loadRollbacks();
  }

  // Profiles: captures with their files, downloaded with the token.
  async function loadProfiles() {
    const doc = await api('GET', '/api/v1/profiles');
    const b = tbody('profiles');
    if (doc.profiles.length === 0) b.append(el('tr', {}, el('td', { colspan: 3 }, 'none captured')));
    for (const c of doc.profiles) {
      b.append(el('tr', { class: 'profile' }, el('td', {}, when(c.time)), el('td', {}, c.trigger),
        el('td', {}, c.files.map((f) => el('div', {},
          el('button', { type: 'button', class: 'download', dataset: { file: f.name }, onclick: () => download(f.name) }, f.name),
          ' ', el('span', { class: 'meta' }, num(f.bytes) + ' bytes'))))));
    }
  }

  // download fetches a profile with the token and saves it: a plain link
  // could not send the Authorization header.
  async function download(name) {
    try {
      const resp = await api('GET', '/api/v1/profiles/' + encodeURIComponent(name), undefined, true);
      const url = URL.createObjectURL(await resp.blob());
      const a = el('a', { href: url, download: name });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) {
      report('Downloading ' + name, e);
    }
  }

  // ---- other pages ----

  // Pages in their own files (dataapis.js) register here; they use the
  // helpers below, the same the pages above use.
  window.leveeUI = {
    el, clear, api, report, show, hideMsg, when, num, ApiError,
    page(name, loader) { pages[name] = loader; },
    loaded(name) { document.body.dataset.loaded = name; }, // tests wait on this
  };

  // ---- wiring ----

  document.addEventListener('DOMContentLoaded', () => {
    for (const b of document.querySelectorAll('.tab')) b.addEventListener('click', () => { hideMsg(); open(b.dataset.tab); });
    for (const b of document.querySelectorAll('.refresh')) b.addEventListener('click', () => load(b.dataset.refresh));
    $('token-save').addEventListener('click', saveToken);
    $('token').addEventListener('keydown', (ev) => { if (ev.key === 'Enter') saveToken(); });
    $('signout').addEventListener('click', () => { sessionStorage.removeItem(TOKEN_KEY); askToken(''); });
    $('signout').hidden = !sessionStorage.getItem(TOKEN_KEY);
    $('apps-more').addEventListener('click', () => loadApps(true).catch((e) => report('Loading apps', e)));
    $('newkey-done').addEventListener('click', forgetNewKey);
    open(location.hash.slice(1));
  });
})();
