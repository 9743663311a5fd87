// The runs page: one page of GET /v1/runs at a time (the server pages, so
// 10,000 runs cost the page shown), filtered by status and model, kept
// live by polling that one page every 2 s while the tab is visible.

import { get, query, enc } from './api.js';
import { h, replace, time, relative, badge } from './dom.js';
import { go, href, notify, showError } from './nav.js';

const pollMs = 2000;
const statuses = ['', 'active', 'idle', 'in_progress', 'queued', 'completed', 'failed', 'cancelled', 'incomplete'];
const limits = ['20', '50', '100'];

// cursors remembers the `after` of the pages before the one shown, for
// "Previous page" (the API pages forward only); it is reset when the
// filters change.
const cursors = { key: '', stack: [] };

export function runsPage(main, q) {
  const p = {
    status: q.get('status') || '', model: q.get('model') || '', host: q.get('host') || '', order: q.get('order') || 'desc',
    limit: limits.includes(q.get('limit')) ? q.get('limit') : '20', after: q.get('after') || '',
  };
  const filterKey = [p.status, p.model, p.host, p.order, p.limit].join('\u0000');
  if (cursors.key !== filterKey) Object.assign(cursors, { key: filterKey, stack: [] });
  const link = (over) => '/runs' + query({ ...p, ...over });

  const tbody = h('tbody');
  const updated = h('span', { class: 'muted', id: 'runs-updated' });
  const live = h('input', { type: 'checkbox', id: 'runs-live', checked: true });
  const prev = h('button', { type: 'button', id: 'runs-prev' }, 'Previous page');
  const next = h('button', { type: 'button', id: 'runs-next' }, 'Next page');
  const first = h('button', { type: 'button', id: 'runs-first' }, 'First page');
  let page = null;

  replace(main,
    h('h1', {}, 'Runs'),
    filterForm(p, (over) => go(link({ ...over, after: '' }))),
    findForm(),
    h('div', { class: 'table-wrap' },
      h('table', { class: 'runs', id: 'runs-table' },
        h('caption', {}, p.order === 'asc' ? 'Runs, oldest first' : 'Runs, newest first'),
        h('thead', {}, h('tr', {}, ['Run', 'Model', 'Status', 'Last step', 'Lease', 'Updated', 'Forked from']
          .map((c) => h('th', { scope: 'col' }, c)))),
        tbody)),
    h('nav', { class: 'pager', 'aria-label': 'Pages of runs' }, first, prev, next,
      h('label', { class: 'live' }, live, ' Live updates (every 2 s)'), updated),
  );

  first.addEventListener('click', () => {
    cursors.stack = [];
    go(link({ after: '' }));
  });
  prev.addEventListener('click', () => go(link({ after: cursors.stack.pop() ?? '' })));
  next.addEventListener('click', () => {
    if (!page?.last_id) return;
    cursors.stack.push(p.after);
    go(link({ after: page.last_id }));
  });

  const ctrl = new AbortController();
  let timer = null;
  let inFlight = false;
  const load = async () => {
    if (inFlight) return;
    inFlight = true;
    try {
      page = await get('/v1/runs' + query(p), ctrl.signal);
      renderRows(tbody, page.data || []);
      first.disabled = !p.after;
      prev.disabled = !p.after;
      next.disabled = !page.has_more;
      updated.textContent = `Updated ${time(Date.now() / 1000).slice(11)}`;
      notify('');
    } catch (err) {
      showError(err);
    } finally {
      inFlight = false;
    }
  };
  const tick = () => {
    if (live.checked && document.visibilityState === 'visible') load();
  };
  load();
  timer = setInterval(tick, pollMs);
  document.addEventListener('visibilitychange', tick);
  return () => {
    clearInterval(timer);
    document.removeEventListener('visibilitychange', tick);
    ctrl.abort();
  };
}

function filterForm(p, apply) {
  const status = h('select', { id: 'f-status', name: 'status' },
    statuses.map((s) => h('option', { value: s, selected: s === p.status }, s || 'any')));
  const model = h('input', { id: 'f-model', name: 'model', value: p.model, placeholder: 'demo.echo', spellcheck: 'false' });
  const host = h('input', { id: 'f-host', name: 'host', value: p.host, placeholder: 'any', spellcheck: 'false', size: 12,
    title: 'runs whose lease this host holds now' });
  const order = h('select', { id: 'f-order', name: 'order' },
    h('option', { value: 'desc', selected: p.order === 'desc' }, 'newest first'),
    h('option', { value: 'asc', selected: p.order === 'asc' }, 'oldest first'));
  const limit = h('select', { id: 'f-limit', name: 'limit' },
    limits.map((l) => h('option', { value: l, selected: l === p.limit }, l)));
  return h('form', { class: 'filters', role: 'search', 'aria-label': 'Filter runs', onsubmit: (e) => {
    e.preventDefault();
    apply({ status: status.value, model: model.value.trim(), host: host.value.trim(), order: order.value, limit: limit.value });
  } },
  h('label', { for: 'f-status' }, 'Status'), status,
  h('label', { for: 'f-model' }, 'Model'), model,
  h('label', { for: 'f-host' }, 'Held by host'), host,
  h('label', { for: 'f-order' }, 'Order'), order,
  h('label', { for: 'f-limit' }, 'Per page'), limit,
  h('button', { type: 'submit' }, 'Apply'));
}

function findForm() {
  const id = h('input', { id: 'find-id', name: 'id', placeholder: 'resp_… or run_…', spellcheck: 'false', required: true });
  return h('form', { class: 'filters', role: 'search', 'aria-label': 'Open a run or response', onsubmit: (e) => {
    e.preventDefault();
    const v = id.value.trim();
    if (v) go(v.startsWith('resp') ? `/responses/${enc(v)}` : `/runs/${enc(v)}`);
  } },
  h('label', { for: 'find-id' }, 'Open run or response'), id, h('button', { type: 'submit' }, 'Open'));
}

// renderRows updates the table for a page of runs. When the page holds the
// same runs in the same order (a poll), cells are updated in place so that
// keyboard focus on a link survives.
function renderRows(tbody, runs) {
  const ids = runs.map((r) => r.id).join(' ');
  if (tbody.dataset.ids !== ids) {
    tbody.dataset.ids = ids;
    replace(tbody, runs.length ? runs.map((r) => h('tr', { 'data-run': r.id }, cells(r)))
      : h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No runs.')));
    return;
  }
  runs.forEach((r, i) => {
    const tr = tbody.children[i];
    const fresh = cells(r);
    // The run link (first cell) never changes; the others are replaced.
    for (let c = 1; c < fresh.length; c++) tr.children[c].replaceWith(fresh[c]);
  });
}

function cells(r) {
  const lease = r.lease && r.lease.owner
    ? h('td', { title: `expires ${time(r.lease.expires_at)}` }, `${r.lease.owner} · epoch ${r.lease.epoch}`)
    : h('td', { class: 'muted' }, '—');
  return [
    h('th', { scope: 'row' }, h('a', { href: href(`/runs/${enc(r.id)}`), class: 'mono' }, r.id)),
    h('td', { class: 'mono' }, r.model),
    h('td', {}, badge(r.status), r.active ? h('span', { class: 'active-dot', title: 'active' }, ' active') : null),
    h('td', { class: 'num' }, String(r.last_step ?? '—')),
    lease,
    h('td', { title: time(r.updated_at) }, relative(r.updated_at)),
    h('td', {}, r.forked_from
      ? h('a', { href: href(`/runs/${enc(r.forked_from.run_id)}`), class: 'mono' }, `${r.forked_from.run_id} @ ${r.forked_from.step}`)
      : h('span', { class: 'muted' }, '—')),
  ];
}
