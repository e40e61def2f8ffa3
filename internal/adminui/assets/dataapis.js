// levee admin UI: the Data APIs page (docs/ui.md). Plain JavaScript, no
// framework; it uses app.js's helpers (window.leveeUI), so every value is
// set as text and every path segment is encodeURIComponent-ed.
//
// What it shows comes from the data-API lifecycle API: the list
// (GET /api/v1/data-apis, a page at a time), then each API with its
// versions and, with cluster.etcd, what each node serves
// (GET /api/v1/data-apis/{name}). Publish and Roll back call
// POST /api/v1/data-apis/{name}/publish and /rollback with the version;
// they are enabled only when GET /api/v1/token says the token may write.
// Each API's traffic and query failures come from
// GET /api/v1/summary?route=NAME (totals since levee started, this node).
'use strict';

(function () {
  const ui = window.leveeUI;
  const { el, clear, api, report, show, when, num } = ui;
  const $ = (id) => document.getElementById(id);
  const PAGE = 50; // data APIs per list call and per "More" (each is then read once)
  const AT_ONCE = 4; // API reads in flight at once (with cluster.etcd each reads etcd)
  const KEEP_ERRORS = 5; // action failures kept per API, newest first
  // The refusals of a data route that are the database's failures
  // (docs/data-apis.md), shown among an API's last errors.
  const QUERY_FAILURES = new Set(['query_failed', 'statement_timeout', 'data_source_unavailable']);

  let after = ''; // the list's next page
  let scope = 'write'; // what the token may do: write, read or none (reads open)
  const actionErrors = new Map(); // API name -> [{time, text}], at most KEEP_ERRORS

  // canWrite: a read token's buttons are disabled; with open reads and no
  // token ('none') they stay enabled, and the first click asks for one.
  const canWrite = () => scope !== 'read';

  async function loadScope() {
    const t = await api('GET', '/api/v1/token');
    scope = t.scope;
    $('da-scope').textContent = scope === 'read'
      ? 'This token has scope read: Publish and Roll back are disabled (a write token acts).'
      : scope === 'none' ? 'No token given: the first Publish or Roll back asks for a write token.' : '';
  }

  async function loadDataAPIs(more) {
    if (!more) {
      after = '';
      await loadScope();
    }
    const q = '?limit=' + PAGE + (after ? '&after=' + encodeURIComponent(after) : '');
    const page = await api('GET', '/api/v1/data-apis' + q);
    // Each API once more for its versions and nodes (the list leaves
    // them out): at most PAGE calls, AT_ONCE at a time. One deleted
    // meanwhile (404) is left out.
    const full = [];
    for (let i = 0; i < page.data_apis.length; i += AT_ONCE) {
      full.push(...await Promise.all(page.data_apis.slice(i, i + AT_ONCE).map((a) => api('GET', '/api/v1/data-apis/' + encodeURIComponent(a.name))
        .catch((e) => { if (e instanceof ui.ApiError && e.status === 404) return null; throw e; }))));
    }
    const shown = full.filter(Boolean);
    // Their traffic since levee started (each API is its route), from
    // the metrics: requests, 5xx, and refusals by reason.
    let traffic = {};
    if (shown.length) {
      const sum = await api('GET', '/api/v1/summary?' + shown.map((a) => 'route=' + encodeURIComponent(a.name)).join('&'));
      traffic = sum.routes || {};
    }
    const box = more ? $('dataapis') : clear($('dataapis'));
    if (!more && shown.length === 0) box.append(el('p', { id: 'dataapis-none' }, 'No data APIs. Create one with POST /api/v1/data-apis (docs/data-apis.md).'));
    for (const a of shown) box.append(renderAPI(a, traffic[a.name]));
    after = page.next || '';
    $('dataapis-more').hidden = !after;
  }

  // matchOf is a version's match in a few words (its path and host).
  function matchOf(def) {
    const m = (def && def.match) || {};
    const path = m.path || m.path_prefix || m.path_template || m.path_regex || '';
    return [m.host, path, m.methods && m.methods.join(',')].filter(Boolean).join(' ');
  }

  function renderAPI(a, tr) {
    const card = el('div', { class: 'dataapi', id: 'dataapi-' + a.name, dataset: { api: a.name } },
      el('h3', {}, a.name, ' ', el('span', { class: 'da-state da-' + a.state }, a.state)),
      el('p', { class: 'meta' }, [
        a.published_version ? (a.state === 'published' ? 'publishes version ' : 'last published version ') + a.published_version : 'never published',
        'latest version ' + a.latest_version, 'defined by ' + a.source,
        a.overridden ? 'changed through the API since the file seeded it' : '',
        a.pending_file_change ? 'the file\u2019s definition differs and is not applied' : '',
        'updated ' + when(a.updated)].filter(Boolean).join(' · ')));

    // Versions, newest first, each with what it is and its action.
    const versions = (a.versions || []).slice().reverse();
    const rows = versions.map((v) => versionRow(a, v));
    card.append(el('h4', {}, 'Versions'), el('table', { class: 'versions' },
      el('thead', {}, el('tr', {}, ['version', 'role', 'match', 'source', 'created', 'definition', 'action'].map((h) => el('th', {}, h)))),
      el('tbody', {}, rows.length ? rows : el('tr', {}, el('td', { colspan: 7 }, 'no versions kept')))));

    // Which node serves which version.
    const nodes = a.nodes && a.nodes.length ? a.nodes : [{
      node: 'this node', version: a.state === 'published' ? a.published_version : 0,
      state: a.state === 'published' ? 'serving' : 'not_serving', published_version: a.state === 'published' ? a.published_version : 0,
    }];
    card.append(el('h4', {}, 'Served by'), el('table', { class: 'nodes' },
      el('thead', {}, el('tr', {}, ['node', 'serves', 'state', 'published', 'error'].map((h) => el('th', {}, h)))),
      el('tbody', {}, nodes.map((n) => el('tr', { class: 'node', dataset: { node: n.node } },
        el('td', {}, el('code', {}, n.node)), el('td', { class: 'serves' }, n.version ? 'version ' + n.version : 'nothing'),
        el('td', { class: 'da-node-' + n.state }, n.state), el('td', {}, n.published_version ? 'version ' + n.published_version : '–'),
        el('td', { class: n.error ? 'error' : '' }, n.error || ''))))));

    if (tr) {
      card.append(el('p', { class: 'meta da-traffic' }, 'on this node since start: ' + num(tr.requests) + ' requests, ' + num(tr.errors) + ' answered 5xx' +
        (tr.refusals.length ? ', refused: ' + tr.refusals.map((r) => r.reason + ' ' + num(r.total)).join(', ') : '')));
    }

    // The last errors: each node's compile error, the query failures
    // counted on this node, and this page's refused actions on this API.
    const errs = nodes.filter((n) => n.error).map((n) => el('li', {}, 'node ', el('code', {}, n.node), ': ' + n.error));
    for (const r of (tr && tr.refusals) || []) {
      if (QUERY_FAILURES.has(r.reason)) errs.push(el('li', { class: 'da-query-failure' }, 'queries answered ' + r.reason + ' on this node since start: ' + num(r.total)));
    }
    for (const e of actionErrors.get(a.name) || []) errs.push(el('li', {}, when(e.time) + ': ' + e.text));
    if (errs.length) card.append(el('h4', {}, 'Last errors'), el('ul', { class: 'da-errors error' }, errs));
    return card;
  }

  function versionRow(a, v) {
    const serving = a.state === 'published' && v.version === a.published_version;
    let role = 'earlier';
    if (serving) role = 'published';
    else if (v.version === a.published_version) role = 'last published';
    else if (v.version > a.published_version) role = 'draft';
    let action = '';
    if (!serving) {
      // A version before the published one is a rollback to it; any
      // other (later, or the last published of an offline API) a publish.
      const back = a.published_version > 0 && v.version < a.published_version;
      const label = back ? 'Roll back to ' + v.version : 'Publish ' + v.version;
      action = el('button', {
        type: 'button', class: back ? 'rollback' : 'publish', dataset: { api: a.name, version: String(v.version) },
        disabled: !canWrite(), title: canWrite() ? undefined : 'needs a token of scope write',
        onclick: () => transition(a.name, back ? 'rollback' : 'publish', v.version),
      }, label);
    }
    let def = '';
    try { def = JSON.stringify(v.definition, null, 2); } catch (e) { def = String(v.definition); }
    return el('tr', { class: 'version' + (serving ? ' serving' : ''), dataset: { version: String(v.version) } },
      el('td', { class: 'num' }, String(v.version)), el('td', { class: 'role' }, role),
      el('td', {}, el('code', {}, matchOf(v.definition))), el('td', {}, v.source), el('td', {}, when(v.created)),
      el('td', {}, el('details', {}, el('summary', {}, 'show'), el('pre', {}, def))),
      el('td', {}, action));
  }

  async function transition(name, op, version) {
    let a;
    try {
      a = await api('POST', '/api/v1/data-apis/' + encodeURIComponent(name) + '/' + op, { version });
    } catch (e) {
      if (!(e instanceof ui.ApiError && e.status === 401)) {
        const list = actionErrors.get(name) || [];
        list.unshift({ time: new Date().toISOString(), text: (op === 'rollback' ? 'Roll back to ' : 'Publish ') + version + ' refused (' + e.status + ' ' + e.reason + '): ' + e.message });
        actionErrors.set(name, list.slice(0, KEEP_ERRORS));
      }
      report((op === 'rollback' ? 'Rolling back ' : 'Publishing ') + name + ' to version ' + version, e);
      await reload('dataapis-refused');
      return;
    }
    show((op === 'rollback' ? 'Rolled back ' : 'Published ') + name + ': version ' + a.published_version + ' serves.', false);
    await reload('dataapis');
  }

  // reload shows the page again; mark is what the tests wait on.
  async function reload(mark) {
    try {
      await loadDataAPIs(false);
      ui.loaded(mark);
    } catch (e) {
      report('Loading data APIs', e);
    }
  }

  ui.page('dataapis', () => loadDataAPIs(false));
  document.addEventListener('DOMContentLoaded', () => {
    $('dataapis-more').addEventListener('click', () => loadDataAPIs(true).catch((e) => report('Loading data APIs', e)));
  });
})();
