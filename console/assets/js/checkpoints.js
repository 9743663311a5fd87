// The checkpoint history of a run: every kept checkpoint (step, parent,
// size, parts), the diff of one against its parent (which parts were
// added, removed or changed, and their contents line by line when the API
// gives them), and a fork from any of them.

import { get, enc } from './api.js';
import { h, replace, time, bytes, badge } from './dom.js';
import { href, showError } from './nav.js';
import { partsDiff, pretty, lineDiff } from './diff.js';
import { openForkDialog } from './fork.js';

export function checkpointsPage(main, runId, q) {
  const ctrl = new AbortController();
  const title = h('span', { class: 'title-badge' });
  const table = h('div', { class: 'table-wrap', id: 'checkpoints' }, h('p', { class: 'muted' }, 'Loading…'));
  const diff = h('section', { class: 'card', id: 'checkpoint-diff', 'aria-labelledby': 'diff-title' });
  replace(main,
    h('h1', {}, `Checkpoints of ${runId} `, title),
    h('nav', { class: 'tabs', 'aria-label': 'Run views' },
      h('a', { href: href(`/runs/${enc(runId)}`) }, 'Timeline'),
      h('a', { href: href(`/runs/${enc(runId)}/checkpoints`), 'aria-current': 'page' }, 'Checkpoints')),
    h('p', { class: 'muted' }, 'The checkpoints the server keeps (see --keep-checkpoints), oldest first. ' +
      'A fork starts a new run from one; this run is left as it is.'),
    h('div', { class: 'cols' }, h('div', { class: 'col-main' }, table), h('div', { class: 'col-side wide' }, diff)));

  (async () => {
    try {
      const [run, list] = await Promise.all([
        get(`/v1/runs/${enc(runId)}`, ctrl.signal),
        get(`/v1/runs/${enc(runId)}/checkpoints?include=data`, ctrl.signal), // parts with their contents, for the line diff
      ]);
      replace(title, badge(run.status));
      const cps = list.data || [];
      const steps = cps.map((c) => c.step);
      const byStep = new Map(cps.map((c) => [c.step, c]));
      const want = q.has('step') ? Number(q.get('step')) : steps[steps.length - 1];
      const show = (step) => {
        for (const b of table.querySelectorAll('button.show-diff')) b.setAttribute('aria-pressed', String(Number(b.dataset.step) === step));
        drawDiff(diff, byStep.get(step), byStep.get(byStep.get(step)?.parent_step));
      };
      replace(table, cps.length ? checkpointTable(cps, byStep, show, (step) => openForkDialog(runId, step, steps))
        : h('p', {}, 'No checkpoint is kept for this run.'),
      list.has_more ? h('p', { class: 'muted' }, 'Older checkpoints are not listed.') : null);
      if (byStep.has(want)) show(want);
    } catch (err) {
      showError(err);
      if (err.status === 404) replace(table, h('p', {}, 'No such run (or it belongs to another key). '), h('a', { href: href('/runs') }, 'All runs'));
    }
  })();
  return () => ctrl.abort();
}

function checkpointTable(cps, byStep, show, fork) {
  return h('table', { class: 'checkpoints' },
    h('caption', {}, 'Checkpoints'),
    h('thead', {}, h('tr', {}, ['Step', 'Parent', 'Size', 'Parts changed', 'Created', 'Actions'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, cps.map((c) => {
      const rows = partsDiff(c, byStep.get(c.parent_step));
      const changed = rows.filter((r) => r.status !== 'same').length;
      return h('tr', { 'data-step': c.step },
        h('th', { scope: 'row', class: 'num' }, String(c.step)),
        h('td', { class: 'num' }, c.parent_step < 0 ? '—' : String(c.parent_step)),
        h('td', { class: 'num' }, bytes(c.size)),
        h('td', { class: 'num' }, `${changed} of ${(c.parts || []).length}`),
        h('td', {}, time(c.created_at)),
        h('td', { class: 'buttons' },
          h('button', { type: 'button', class: 'show-diff', 'data-step': c.step, 'aria-pressed': 'false', onclick: () => show(c.step) }, `Diff of step ${c.step}`),
          h('button', { type: 'button', class: 'fork-step', 'data-step': c.step, onclick: () => fork(c.step) }, `Fork from step ${c.step}`)));
    })));
}

function drawDiff(el, cp, parent) {
  if (!cp) return;
  const rows = partsDiff(cp, parent);
  const against = parent ? `step ${parent.step}` : cp.parent_step < 0 ? 'nothing (the run’s first checkpoint)' : `step ${cp.parent_step} (not kept)`;
  replace(el,
    h('h2', { id: 'diff-title' }, `Step ${cp.step} against ${against}`),
    h('table', { class: 'parts' },
      h('thead', {}, h('tr', {}, ['Part', 'Change', 'Size'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, rows.map((r) => h('tr', { class: `part-${r.status}` },
        h('th', { scope: 'row', class: 'mono' }, r.name),
        h('td', {}, h('span', { class: `change change-${r.status}` }, r.status)),
        h('td', { class: 'num' }, r.status === 'changed' && r.parentSize !== null ? `${bytes(r.parentSize)} → ${bytes(r.size)}`
          : bytes(r.size ?? r.parentSize)))))),
    rows.filter((r) => r.status !== 'same').map((r) => contentDiff(r)));
}

// contentDiff shows a changed part line by line when the API sent the
// parts' contents (`data`), else says only that it changed.
function contentDiff(r) {
  const a = r.parentPart?.data;
  const b = r.part?.data;
  if (typeof a !== 'string' && typeof b !== 'string') return null;
  const lines = lineDiff(typeof a === 'string' ? pretty(a) : '', typeof b === 'string' ? pretty(b) : '');
  return h('details', { class: 'content-diff', open: true },
    h('summary', {}, h('span', { class: 'mono' }, r.name), ` (${r.status})`),
    h('pre', { class: 'diff' }, lines.map((l) => h('span', { class: `line line-${l.op === '+' ? 'add' : l.op === '-' ? 'del' : 'same'}` },
      `${l.op} ${l.text}\n`))));
}

