// frontdoor console: renders the admin API's JSON into the page and renders again when the
// API's event stream says a topic changed. DOM built with createElement only (no HTML from
// data), no dependencies.
'use strict';

const meta = (n) => document.querySelector(`meta[name="${n}"]`).content;
const csrf = meta('csrf');
const role = meta('role');
const page = meta('page');
const isAdmin = role === 'admin';

// el builds an element: el('td', {class: 'x'}, 'text', child, ...).
function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else e.setAttribute(k, v === true ? '' : v);
  }
  for (const k of kids.flat()) {
    if (k === undefined || k === null || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

class APIError extends Error {}

async function api(method, path, body) {
  const opts = {method, credentials: 'same-origin', headers: {'Accept': 'application/json'}};
  if (method !== 'GET') {
    opts.headers['X-CSRF-Token'] = csrf;
    opts.headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body || {});
  }
  const r = await fetch(path, opts);
  if (r.status === 401) { location.href = '/login'; throw new APIError('logged out'); }
  const text = await r.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { data = null; }
  if (!r.ok) throw new APIError((data && data.error) || text || r.statusText);
  return data;
}

// state shows a state with its word and a colour (never colour alone).
function state(s) {
  const word = String(s || 'unknown').split(' ')[0];
  const cls = {up: 'ok', connected: 'ok', on: 'ok', pass: 'ok', true: 'ok',
    draining: 'warn', drain: 'warn', disconnected: 'warn', pending: 'warn', maintenance: 'warn',
    down: 'bad', off: 'bad', miss: 'bad', false: 'bad', ended: 'muted'}[word.toLowerCase()] || 'muted';
  const mark = {ok: '●', warn: '◐', bad: '○', muted: '·'}[cls];
  return el('span', {class: `state state-${cls}`}, `${mark} ${s}`);
}

function table(cls, headers, rows, empty) {
  if (!rows.length) return el('p', {class: 'muted'}, empty || 'Nothing to show.');
  return el('div', {class: 'table-wrap'}, el('table', {class: cls},
    el('thead', {}, el('tr', {}, headers.map((h) => el('th', {scope: 'col'}, h)))),
    el('tbody', {}, rows)));
}

const when = (t) => {
  if (!t || t.startsWith('0001')) return '';
  const d = new Date(t);
  return isNaN(d) ? t : d.toLocaleString();
};
const ago = (t) => {
  if (!t || t.startsWith('0001')) return '';
  const s = Math.round((Date.now() - new Date(t)) / 1000);
  if (s < 60) return `${s} s ago`;
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
};

// confirmDo asks before an action, runs it, tells how it went and renders again.
async function confirmDo(text, action) {
  const d = document.getElementById('confirm');
  document.getElementById('confirm-text').textContent = text;
  d.returnValue = '';
  d.showModal();
  await new Promise((res) => d.addEventListener('close', res, {once: true}));
  if (d.returnValue !== 'ok') return;
  try {
    await action();
    flash(`Done: ${text}`, 'ok');
  } catch (e) {
    flash(`Refused: ${e.message}`, 'bad');
  }
  render();
}

function flash(text, cls) {
  const f = el('p', {class: `flash flash-${cls}`, role: 'status'}, text);
  document.getElementById('main').insertBefore(f, document.getElementById('content'));
  setTimeout(() => f.remove(), 8000);
}

const button = (label, attrs) => isAdmin ? el('button', Object.assign({type: 'button'}, attrs), label) : null;

// ---- pages ----

async function sitePage() {
  const st = await api('GET', '/v1/admin/site');
  const store = st.store || {};
  const leaders = Object.fromEntries((store.leaders || []).map((l) => [l.zone, l]));
  const nodes = store.nodes || [];
  const outage = store.outage || {};
  const zones = table('zones', ['Zone', 'Kind', 'Client ranges', 'Leader', 'Front doors'],
    (st.zones || []).map((z) => el('tr', {'data-zone': z.name},
      el('td', {}, z.name), el('td', {}, z.primary ? 'primary' : 'satellite'),
      el('td', {}, (z.ranges || []).join(', ') || '—'),
      el('td', {}, leaders[z.name] ? [leaders[z.name].node, el('span', {class: 'muted small'}, ` since ${ago(leaders[z.name].since)}`)] : state('none')),
      el('td', {}, nodes.filter((n) => n.zone === z.name).map((n) => el('span', {class: 'chip'}, `${n.name} ${n.version}`))))));
  const members = table('members', ['etcd member', 'Health', 'Leader', 'Revision', 'RTT'],
    (store.members || []).map((m) => el('tr', {},
      el('td', {}, m.name), el('td', {}, state(m.healthy ? 'up' : 'down')),
      el('td', {}, m.leader ? 'yes' : ''), el('td', {}, m.revision), el('td', {}, m.rtt || m.error || ''))),
    store.backend ? 'The site database did not list its members.' : 'A site of one node: its store is its own bolt file.');
  const sessions = Object.entries(st.sessions || {}).map(([k, v]) => el('span', {class: 'chip'}, `${v} ${k}`));
  return [
    el('section', {}, el('h2', {}, 'Store'),
      el('p', {}, store.backend ? `etcd, prefix ${store.prefix}, revision ${store.revision}` : 'bolt (one node)', ' ',
        outage.active ? state(`down — outage mode since ${when(outage.since)}`) : state('up'),
        outage.conflicts && outage.conflicts.length ? el('span', {class: 'muted'}, ` · ${outage.conflicts.length} write-back conflicts`) : ''),
      members),
    el('section', {}, el('h2', {}, 'Zones'), zones),
    el('section', {}, el('h2', {}, 'Sessions'), el('p', {}, sessions.length ? sessions : 'none')),
  ];
}

async function gatewaysPage() {
  const gws = await api('GET', '/v1/admin/gateways');
  return table('gateways', ['Gateway', 'Zone', 'Verdict', 'Ports', 'Last transitions', ''],
    gws.map((g) => el('tr', {'data-gateway': g.name},
      el('td', {}, el('strong', {}, g.name), el('div', {class: 'muted small'}, `${g.address} · node ${g.node || '—'}`)),
      el('td', {}, g.zone),
      el('td', {class: 'verdict'}, state(g.verdict), g.override && g.override !== 'none' ? el('div', {class: 'small'}, `override: ${g.override}`) : ''),
      el('td', {}, el('ul', {class: 'ports'}, (g.ports || []).map((p) => el('li', {},
        state(p.state), ` ${p.port}${p.optional ? ' (optional)' : ''}`,
        p.error ? el('span', {class: 'muted small'}, ` — ${p.error}`) : '')))),
      el('td', {}, el('ol', {class: 'timeline'}, (g.transitions || []).slice(0, 5).map((t) => el('li', {},
        el('span', {class: 'muted small'}, `${ago(t.time)} `), `${t.port || 'verdict'}: `, state(t.from), ' → ', state(t.to),
        el('span', {class: 'muted small'}, ` (${t.reason}${t.error ? ': ' + t.error : ''})`))))),
      el('td', {class: 'actions'}, ['drain', 'down', 'up', 'auto'].map((o) => button(o, {
        'data-action': o,
        onclick: () => confirmDo(`${o === 'auto' ? 'Let the probes decide' : 'Set ' + o} for gateway ${g.name} at every front door`,
          () => api('POST', '/v1/admin/health', {gateway: g.name, override: o})),
      }))))));
}

async function machinesPage() {
  const ms = await api('GET', '/v1/admin/machines');
  return table('machines', ['Machine', 'Zone / group', 'Health', 'Sessions', 'Load index', 'Evaluators', 'Registered with', ''],
    ms.map((m) => el('tr', {'data-machine': m.name},
      el('td', {}, el('strong', {}, m.name), el('div', {class: 'muted small'}, m.address)),
      el('td', {}, `${m.zone} / ${m.group}`),
      el('td', {}, state(m.health), m.maintenance ? el('div', {}, state('maintenance')) : ''),
      el('td', {}, `${m.sessions} of ${m.max_sessions}`),
      el('td', {}, el('meter', {min: 0, max: 10000, value: m.load_index, title: `${m.load_index} of 10000`}), ` ${m.load_index}`),
      el('td', {class: 'small'}, Object.entries(m.evaluators || {}).filter(([, v]) => v !== null).map(([k, v]) => el('div', {}, `${k} ${v}`)),
        m.load_hidden ? el('div', {class: 'muted'}, 'CPU and memory stay in their zone') : ''),
      el('td', {}, m.registered && m.registered.node ? `${m.registered.node} (${m.registered.zone})` : state('not registered')),
      el('td', {class: 'actions'}, button(m.maintenance ? 'end maintenance' : 'maintenance', {
        'data-action': 'maintenance',
        onclick: () => confirmDo(`${m.maintenance ? 'Take' : 'Put'} ${m.name} ${m.maintenance ? 'out of' : 'in'} maintenance (reconnects only)`,
          () => api('POST', `/v1/admin/machines/${encodeURIComponent(m.name)}/maintenance`, {on: !m.maintenance})),
      })))));
}

// The sessions page keeps its search form across renders.
const sessionFilter = {user: '', machine: '', state: '', mode: '', gateway: ''};

async function sessionsPage() {
  const q = new URLSearchParams(Object.entries(sessionFilter).filter(([, v]) => v)).toString();
  const res = await api('GET', '/v1/admin/sessions' + (q ? '?' + q : ''));
  const list = Array.isArray(res) ? res : (res.sessions || []);
  const form = el('form', {class: 'filters', id: 'session-search', onsubmit: (e) => {
    e.preventDefault();
    for (const k of Object.keys(sessionFilter)) sessionFilter[k] = e.target.elements[k].value.trim();
    render();
  }}, Object.keys(sessionFilter).map((k) => el('label', {}, k, ' ', el('input', {name: k, value: sessionFilter[k], size: 12}))),
  el('button', {type: 'submit'}, 'Search'));
  return [form, table('sessions', ['User', 'Resource', 'Machine', 'State', 'Mode', 'Via', 'Endpoint', 'Changed', ''],
    list.map((s) => el('tr', {'data-session': s.id},
      el('td', {}, s.user), el('td', {}, s.resource), el('td', {}, `${s.machine} (${s.zone})`),
      el('td', {}, state(s.state)), el('td', {}, s.mode), el('td', {}, s.via || ''), el('td', {}, s.browser ? [el('span', {class: 'tag'}, 'browser'), ' ', s.endpoint] : (s.endpoint || '')),
      el('td', {class: 'small'}, ago(s.changed)),
      el('td', {class: 'actions'},
        s.state === 'connected' ? button('disconnect', {'data-action': 'disconnect',
          onclick: () => confirmDo(`Disconnect ${s.user}'s session on ${s.machine} (it can reconnect)`,
            () => api('POST', `/v1/admin/sessions/${encodeURIComponent(s.id)}/disconnect`))}) : '',
        button('log off', {'data-action': 'logoff',
          onclick: () => confirmDo(`Log off ${s.user}'s session on ${s.machine} (it ends)`,
            () => api('POST', `/v1/admin/sessions/${encodeURIComponent(s.id)}/logoff`))})))),
    'No session matches.')];
}

async function secureGatewayPage() {
  const st = await api('GET', '/v1/admin/status');
  const groups = Object.entries(st.secure_gateway || {}).sort();
  const all = groups.length && groups.every(([, on]) => on);
  const none = groups.every(([, on]) => !on);
  return [
    el('p', {}, 'New launches follow the switch; running sessions keep their mode. With it on, sessions go through a gateway with a ticket; off, clients go straight to the machine.'),
    el('p', {}, 'Site-wide: ', state(all ? 'on' : none ? 'off' : 'mixed'), ' ',
      button('all on', {'data-action': 'all-on', onclick: () => confirmDo('Switch the secure gateway ON for every group', () => api('POST', '/v1/admin/gateway', {on: true}))}),
      button('all off', {'data-action': 'all-off', onclick: () => confirmDo('Switch the secure gateway OFF for every group: new launches go direct', () => api('POST', '/v1/admin/gateway', {on: false}))})),
    table('modes', ['Delivery group', 'Secure gateway', ''], groups.map(([g, on]) => el('tr', {'data-group': g},
      el('td', {}, g), el('td', {}, state(on ? 'on' : 'off')),
      el('td', {class: 'actions'}, button(on ? 'switch off' : 'switch on', {'data-action': on ? 'off' : 'on',
        onclick: () => confirmDo(`Switch the secure gateway ${on ? 'OFF' : 'ON'} for group ${g}`, () => api('POST', '/v1/admin/gateway', {group: g, on: !on}))}))))),
  ];
}

// The explain page keeps its form and its last answer across renders.
const explainForm = {user: '', resource: '', client_ip: '', location_zone: '', endpoint: ''};
let explained = null;

async function explainPage() {
  const form = el('form', {class: 'explain', id: 'explain-form', onsubmit: async (e) => {
    e.preventDefault();
    for (const k of Object.keys(explainForm)) explainForm[k] = e.target.elements[k].value.trim();
    try {
      explained = await api('POST', '/v1/admin/explain', explainForm);
    } catch (err) {
      explained = {error: err.message};
    }
    render();
  }}, Object.keys(explainForm).map((k) => el('label', {}, k.replace('_', ' '), ' ', el('input', {name: k, id: `explain-${k}`, value: explainForm[k]}))),
  el('button', {type: 'submit', id: 'explain-run'}, 'Explain'));
  let out = el('p', {class: 'muted'}, 'Who would land where, and why: a dry run of the broker (no session is made).');
  if (explained && explained.error) out = el('p', {class: 'error', id: 'explain-result'}, explained.error);
  else if (explained) {
    const d = explained;
    out = el('section', {id: 'explain-result'},
      el('p', {}, el('strong', {}, d.outcome || ''), d.machine ? ` on ${d.machine} in zone ${d.zone}` : '',
        d.step_label ? ` · step ${d.step_label}` : '', d.mode ? ` · ${d.mode} mode` : '', d.reason ? ` · ${d.reason}` : ''),
      el('ol', {class: 'trace'}, (d.trace || []).map((l) => el('li', {}, l))));
  }
  return [form, out];
}

let drillShown = '';

async function drillsPage() {
  const list = await api('GET', '/v1/admin/drills');
  const reports = Array.isArray(list) ? list : (list.reports || []);
  const items = table('drills', ['Report', 'Started', 'Rows', 'Result', ''], reports.map((r) => el('tr', {'data-drill': r.id},
    el('td', {}, r.id), el('td', {}, when(r.started)), el('td', {}, r.rows),
    el('td', {}, state(r.passed ? 'pass' : 'miss')),
    el('td', {}, el('button', {type: 'button', onclick: () => { drillShown = r.id; render(); }}, 'show')))),
  'No drill report here yet: run `frontdoor drill --report DIR` and upload its report.json.');
  if (!drillShown) return items;
  const rep = await api('GET', `/v1/admin/drills/${encodeURIComponent(drillShown)}`);
  return [items, el('h2', {}, `Report ${drillShown}`), table('drill-rows', ['Criterion', 'Secure gateway', 'Expected', 'Actual', 'Timeline', 'Result'],
    (rep.results || []).map((x) => el('tr', {},
      el('td', {}, x.criterion), el('td', {}, x.mode === 'gateway' ? 'ticked' : 'unticked'),
      el('td', {class: 'small'}, x.expected), el('td', {class: 'small'}, x.actual),
      el('td', {}, timeline(x)), el('td', {}, state(x.pass ? 'pass' : 'miss')))))];
}

// timeline draws each client of a drill row: a bar from the fault to the cut and back.
function timeline(x) {
  const span = 6e9;
  const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
  svg.setAttribute('viewBox', '0 0 120 ' + (8 * (x.clients || []).length + 2));
  svg.setAttribute('class', 'timeline-svg');
  (x.clients || []).forEach((c, i) => {
    const r = document.createElementNS(svg.namespaceURI, 'rect');
    const cut = c.cut ? Math.min(c.cut_after_ns, span) : span;
    const back = c.back ? Math.min(c.back_after_ns, span) : span;
    r.setAttribute('x', 120 * cut / span);
    r.setAttribute('y', 1 + 8 * i);
    r.setAttribute('width', Math.max(1, 120 * (back - cut) / span));
    r.setAttribute('height', 6);
    r.setAttribute('class', c.cut ? (c.back ? 'gap' : 'lost') : 'fine');
    const t = document.createElementNS(svg.namespaceURI, 'title');
    t.textContent = `${c.user}: ${c.cut ? 'cut after ' + (c.cut_after_ns / 1e9).toFixed(2) + ' s' : 'no cut'}${c.back ? ', back after ' + (c.back_after_ns / 1e9).toFixed(2) + ' s' : ''}`;
    r.append(t);
    svg.append(r);
  });
  return svg;
}

async function auditPage() {
  const res = await api('GET', '/v1/admin/audit?limit=200');
  const list = Array.isArray(res) ? res : (res.entries || []);
  return table('audit', ['When', 'Who', 'From', 'Front door', 'Action', 'Target', 'What changed'], list.map((e) => el('tr', {},
    el('td', {class: 'small'}, when(e.time)), el('td', {}, e.user), el('td', {}, e.from), el('td', {}, e.node),
    el('td', {}, e.action), el('td', {}, e.target || ''), el('td', {class: 'small'}, e.detail || ''))), 'No admin action recorded yet.');
}

const pages = {
  site: [sitePage, ['site', 'health', 'sessions', 'modes']],
  gateways: [gatewaysPage, ['health']],
  machines: [machinesPage, ['machines', 'health', 'sessions']],
  sessions: [sessionsPage, ['sessions']],
  'secure-gateway': [secureGatewayPage, ['modes']],
  explain: [explainPage, []],
  drills: [drillsPage, []],
  audit: [auditPage, ['audit']],
};

let rendering = false;
let again = false;

async function render() {
  if (rendering) { again = true; return; }
  rendering = true;
  const content = document.getElementById('content');
  try {
    const out = await pages[page][0]();
    content.replaceChildren(...[out].flat());
    content.dataset.rendered = String(Date.now());
  } catch (e) {
    if (!(e instanceof APIError && e.message === 'logged out')) {
      content.replaceChildren(el('p', {class: 'error'}, `Could not read the admin API: ${e.message}`));
    }
  }
  rendering = false;
  if (again) { again = false; render(); }
}

function follow() {
  const live = document.getElementById('live');
  const es = new EventSource('/v1/admin/events');
  es.onopen = () => { live.textContent = 'Live: this page updates as the site changes.'; live.className = 'muted small live'; };
  es.onerror = () => { live.textContent = 'Reconnecting to the event stream…'; live.className = 'muted small'; };
  for (const t of pages[page][1]) es.addEventListener(t, render);
}

document.addEventListener('DOMContentLoaded', () => {
  render();
  follow();
});
