// The run page: one response of a run as a timeline of supersteps with
// their events and items, live while it runs; the workflow graph with the
// executors of the chosen superstep lit; the lease and its takeovers; and
// the actions (cancel, fork, replay from a sequence number).
//
// Live: the response's events come from its SSE stream (resumed after the
// last sequence number seen if the connection drops), and the run — its
// supersteps and lease — is read again shortly after events arrive and
// every second while the run is active (a superstep can commit without an
// event: demo.silent's do).

import { get, post, stream, enc } from './api.js';
import { h, replace, time, relative, badge } from './dom.js';
import { href, inform, showError } from './nav.js';
import { buildTimeline, compactEvents, itemsOf, itemLine, stepsOf, takeovers, isRunning, observeLease } from './timeline.js';
import { graphSVG } from './graph.js';
import { openForkDialog } from './fork.js';

const pollMs = 1000;
const refreshAfterEventMs = 150;
const maxRowsPerStep = 300;

export function runPage(main, runId, q) {
  const ctrl = new AbortController();
  const st = {
    run: null,
    responseId: q.get('response') || null,
    events: [], // of the selected response, by sequence number
    lastSeq: -1,
    stream: 'connecting', // connecting | live | ended | unstreamable | failed
    snapshot: null, // the Response object, when it cannot be streamed
    selected: q.has('step') ? Number(q.get('step')) : null, // null: follow the latest superstep
    expanded: new Set(),
    lastStatus: null, // of the last response.* event streamed
    lease: { lease: null, changes: [] }, // epoch changes seen while the page is open
  };
  const el = skeleton(main, runId);
  let renderQueued = false;
  const render = () => {
    if (renderQueued) return;
    renderQueued = true;
    requestAnimationFrame(() => {
      renderQueued = false;
      if (!ctrl.signal.aborted) draw(el, st, runId, actions);
    });
  };

  let pollTimer = null;
  let refreshTimer = null;
  let loading = null;
  const loadRun = async () => {
    if (loading) return loading;
    loading = (async () => {
      try {
        st.run = await get(`/v1/runs/${enc(runId)}`, ctrl.signal);
        observeLease(st.lease, st.run.lease, st.run.last_step, Date.now() / 1000);
        st.responseId ||= st.run.head_response_id;
        if (st.stream === 'unstreamable' && (!st.snapshot || isRunning(st.snapshot.status))) {
          st.snapshot = await get(`/v1/responses/${enc(st.responseId)}`, ctrl.signal);
        }
        render();
      } catch (err) {
        showError(err);
      } finally {
        loading = null;
      }
    })();
    return loading;
  };
  const poll = async () => {
    pollTimer = null;
    await loadRun();
    if (ctrl.signal.aborted) return;
    if (st.run?.active || isRunning(responseStatus(st)) || st.stream === 'live' || st.stream === 'connecting') {
      pollTimer = setTimeout(poll, pollMs);
    }
  };
  const refreshSoon = () => {
    if (!refreshTimer) {
      refreshTimer = setTimeout(() => {
        refreshTimer = null;
        loadRun();
      }, refreshAfterEventMs);
    }
  };

  const follow = async () => {
    try {
      await stream(st.responseId, {
        signal: ctrl.signal,
        onEvent: (ev) => {
          if (ev.sequence_number <= st.lastSeq) return;
          st.lastSeq = ev.sequence_number;
          st.events.push(ev);
          if (ev.response?.status) st.lastStatus = ev.response.status;
          st.stream = 'live';
          if (ev.type.startsWith('response.') && !ev.type.includes('delta')) refreshSoon();
          render();
        },
      });
      st.stream = 'ended';
    } catch (err) {
      if (err.name === 'AbortError') return;
      if (err.status === 400 && err.param === 'stream') {
        // Created without stream:true: no event log to read, so the page
        // shows the Response object and polls it while it runs.
        st.stream = 'unstreamable';
        st.snapshot = await get(`/v1/responses/${enc(st.responseId)}`, ctrl.signal).catch(() => null);
      } else {
        st.stream = 'failed';
        showError(err);
      }
    }
    await loadRun();
    render();
    if (!pollTimer && (st.run?.active || isRunning(responseStatus(st)))) pollTimer = setTimeout(poll, pollMs);
  };

  const actions = {
    select(step) {
      st.selected = step;
      if (st.expanded.has(step)) st.expanded.delete(step);
      else st.expanded.add(step);
      draw(el, st, runId, actions); // at once, not at the next frame: the user is waiting for it
    },
    async cancel() {
      try {
        el.cancel.disabled = true;
        const r = await post(`/v1/responses/${enc(st.responseId)}/cancel`, {}, ctrl.signal);
        inform(`Cancel sent: ${r.id} is ${r.status}.`);
        await loadRun();
      } catch (err) {
        showError(err);
      }
    },
    async fork() {
      const steps = stepsOf(st.run, st.responseId).map((s) => s.step);
      const want = st.selected ?? steps[steps.length - 1] ?? st.run?.last_step ?? 0;
      // Offer the kept checkpoints; if they cannot be read, any step.
      const kept = await get(`/v1/runs/${enc(runId)}/checkpoints`, ctrl.signal).then((l) => l.data.map((c) => c.step), () => null);
      openForkDialog(runId, kept && !kept.includes(want) ? kept[kept.length - 1] : want, kept);
    },
    replay: (after) => replay(el, st.responseId, after, ctrl.signal),
  };
  wire(el, actions);

  (async () => {
    await loadRun();
    if (ctrl.signal.aborted || !st.run) return;
    follow();
    poll();
  })();
  return () => {
    ctrl.abort();
    clearTimeout(pollTimer);
    clearTimeout(refreshTimer);
  };
}

function responseStatus(st) {
  const r = st.run?.responses?.find((x) => x.id === st.responseId);
  return r?.status || st.lastStatus || st.snapshot?.status || null;
}

// skeleton builds the page's fixed parts once; draw fills them, so focus
// and open sections survive updates.
function skeleton(main, runId) {
  const el = {
    badge: h('span', { class: 'title-badge' }),
    summary: h('dl', { class: 'facts', id: 'run-summary' }),
    lease: h('div', { id: 'run-lease' }),
    responses: h('ul', { class: 'responses', id: 'run-responses' }),
    timelineTitle: h('h2', { id: 'timeline-title' }, 'Supersteps'),
    // The state is a live region (it changes a few times); the count of
    // events, which changes with each one, is not, or a screen reader
    // would read every event out.
    streamState: h('span', { id: 'stream-state', role: 'status' }),
    eventCount: h('span', { id: 'event-count' }),
    steps: h('ol', { class: 'steps', id: 'steps', 'aria-labelledby': 'timeline-title' }),
    pending: h('div', { id: 'pending-events' }),
    output: h('div', { id: 'snapshot-output' }),
    graph: h('div', { class: 'graph-wrap', id: 'graph' }),
    graphCaption: h('p', { class: 'muted', id: 'graph-caption' }),
    requests: h('div', { id: 'pending-requests' }),
    cancel: h('button', { type: 'button', id: 'cancel-response', class: 'danger', disabled: true }, 'Cancel response'),
    fork: h('button', { type: 'button', id: 'fork-run' }, 'Fork from a checkpoint…'),
    replayAfter: h('input', { id: 'replay-after', type: 'number', min: -1, value: -1, required: true }),
    replayForm: null,
    replayStop: h('button', { type: 'button', id: 'replay-stop', disabled: true }, 'Stop'),
    replay: h('section', { class: 'card', id: 'replay', 'aria-labelledby': 'replay-title', hidden: true }),
    graphKey: '',
  };
  el.replayForm = h('form', { class: 'inline', id: 'replay-form' },
    h('label', { for: 'replay-after' }, 'Replay the stream after sequence number'), el.replayAfter,
    h('button', { type: 'submit' }, 'Replay'), el.replayStop);
  replace(main,
    h('h1', {}, `Run ${runId} `, el.badge),
    h('nav', { class: 'tabs', 'aria-label': 'Run views' },
      h('a', { href: href(`/runs/${enc(runId)}`), 'aria-current': 'page' }, 'Timeline'),
      h('a', { href: href(`/runs/${enc(runId)}/checkpoints`), id: 'tab-checkpoints' }, 'Checkpoints')),
    h('div', { class: 'cols' },
      h('div', { class: 'col-main' },
        h('section', { class: 'card', 'aria-labelledby': 'resp-title' },
          h('h2', { id: 'resp-title' }, 'Responses'), el.responses),
        h('section', { class: 'card', 'aria-labelledby': 'actions-title' },
          h('h2', { id: 'actions-title' }, 'Actions'),
          h('div', { class: 'inline' }, el.cancel, el.fork), el.replayForm),
        el.replay,
        h('section', { class: 'card', 'aria-labelledby': 'timeline-title' },
          el.timelineTitle, h('p', { class: 'muted' }, el.streamState, ' ', el.eventCount), el.steps, el.pending, el.output)),
      h('div', { class: 'col-side' },
        h('section', { class: 'card', 'aria-labelledby': 'graph-title' },
          h('h2', { id: 'graph-title' }, 'Workflow graph'), el.graphCaption, el.graph,
          h('p', { class: 'muted legend' }, 'Highlighted: ran in the chosen superstep. Thick border: the start. ' +
            'Dashed border: yields output. Dashed edge: closes a cycle.')),
        h('section', { class: 'card', 'aria-labelledby': 'summary-title' },
          h('h2', { id: 'summary-title' }, 'Run'), el.summary),
        h('section', { class: 'card', 'aria-labelledby': 'lease-title' },
          h('h2', { id: 'lease-title' }, 'Lease and takeovers'), el.lease),
        el.requests)));
  return el;
}

function wire(el, actions) {
  el.cancel.addEventListener('click', () => actions.cancel());
  el.fork.addEventListener('click', () => actions.fork());
  el.replayForm.addEventListener('submit', (e) => {
    e.preventDefault();
    actions.replay(Number(el.replayAfter.value));
  });
  // Arrow keys move between superstep headers, Home and End to the ends.
  el.steps.addEventListener('keydown', (e) => {
    const heads = [...el.steps.querySelectorAll('.step-head')];
    const i = heads.indexOf(document.activeElement);
    if (i < 0) return;
    const to = { ArrowDown: i + 1, ArrowUp: i - 1, Home: 0, End: heads.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    heads[Math.max(0, Math.min(heads.length - 1, to))].focus();
  });
  el.steps.addEventListener('click', (e) => {
    const head = e.target.closest('.step-head');
    if (head) actions.select(Number(head.dataset.step));
  });
}

function draw(el, st, runId, actions) {
  const run = st.run;
  if (!run) return;
  const status = responseStatus(st);
  replace(el.badge, badge(run.status), run.active ? h('span', { class: 'active-dot' }, ' active') : null);
  drawSummary(el, run);
  drawResponses(el, run, st, runId);
  el.cancel.disabled = !isRunning(status);
  el.timelineTitle.textContent = `Supersteps of ${st.responseId}`;
  const stateText = {
    connecting: 'Connecting to the stream…',
    live: isRunning(status) ? 'Live.' : 'Stream open.',
    ended: 'The stream has ended.',
    unstreamable: 'This response was not created with stream=true, so it has no event stream; its output is below.',
    failed: 'The stream failed; the supersteps below are from the run.',
  }[st.stream];
  if (el.streamState.textContent !== stateText) el.streamState.textContent = stateText;
  el.eventCount.textContent = st.stream === 'unstreamable' ? '' : `${st.events.length} event${st.events.length === 1 ? '' : 's'}.`;
  const steps = stepsOf(run, st.responseId);
  const tl = buildTimeline(steps, st.events);
  const latest = steps[steps.length - 1]?.step ?? null;
  const shown = st.selected ?? latest;
  // A takeover shows on the first commit under the new owner: from the
  // supersteps' epochs when the server has them, else as this page saw it.
  const moves = new Map(takeovers(run.supersteps).filter((t) => t.sameResponse).map((t) => [t.step, t]));
  const epochsKnown = (run.supersteps || []).some((s) => s.epoch !== null && s.epoch !== undefined);
  if (!epochsKnown) {
    for (const c of st.lease.changes) if (c.toOwner && c.toOwner !== c.fromOwner && !moves.has(c.step + 1)) moves.set(c.step + 1, c);
  }
  drawLease(el, run, st.lease.changes, moves);
  drawSteps(el, tl.steps, st, shown, moves);
  drawPending(el, tl.pending, isRunning(status));
  drawOutput(el, st);
  drawGraph(el, run, steps.find((s) => s.step === shown));
  drawRequests(el, run);
}

function drawSummary(el, run) {
  const rows = [
    ['Model', h('span', { class: 'mono' }, run.model)],
    ['Status', badge(run.status)],
    ['Last step', String(run.last_step ?? '—')],
    ['Created', time(run.created_at)],
    ['Updated', `${time(run.updated_at)} (${relative(run.updated_at)})`],
    ['Head response', h('span', { class: 'mono' }, run.head_response_id || '—')],
    ['Forked from', run.forked_from
      ? h('a', { href: href(`/runs/${enc(run.forked_from.run_id)}`), class: 'mono' }, `${run.forked_from.run_id}, step ${run.forked_from.step}`)
      : '—'],
  ];
  if (run.resume_error) rows.push(['Resume error', h('span', { class: 'error' }, run.resume_error)]);
  const sig = JSON.stringify([run.model, run.status, run.last_step, run.updated_at, run.head_response_id, run.forked_from, run.resume_error]);
  if (el.summary.dataset.sig === sig) return;
  el.summary.dataset.sig = sig;
  replace(el.summary, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

function drawLease(el, run, seen, moves) {
  const l = run.lease || {};
  const history = run.lease_history || [];
  const sig = JSON.stringify([l, history, seen, [...moves.keys()]]);
  if (el.lease.dataset.sig === sig) return;
  el.lease.dataset.sig = sig;
  replace(el.lease,
    h('dl', { class: 'facts' },
      h('dt', {}, 'Owner'), h('dd', { class: 'mono', id: 'lease-owner' }, l.owner || 'none'),
      h('dt', {}, 'Epoch'), h('dd', { id: 'lease-epoch' }, l.epoch === undefined ? '—' : String(l.epoch)),
      h('dt', {}, 'Expires'), h('dd', {}, l.owner ? `${time(l.expires_at)} (${relative(l.expires_at)})` : '—')),
    h('p', { class: 'muted' }, 'Each claim of the run raises the epoch: a takeover (its host died or lost the lease), ' +
      'or a later response on the idle run. A host with an older epoch can no longer commit.'),
    history.length ? claimsTable(history, run) : null,
    moves.size ? h('p', { id: 'takeover-steps' }, `Takeovers within a response: ${[...moves.values()].map((m) =>
      `step ${m.step} (${m.fromHost || m.fromOwner || '?'} → ${m.toHost || m.toOwner || '?'})`).join(', ')}.`) : null,
    seen.length && !history.length
      ? h('ul', { class: 'takeovers', id: 'lease-changes', 'aria-label': 'Lease changes seen on this page' }, seen.map((c) => h('li', {},
        `${time(c.at).slice(11)}, after step ${c.step}: epoch ${c.fromEpoch} → ${c.toEpoch}`,
        c.toOwner && c.toOwner !== c.fromOwner ? `, ${c.fromOwner || 'none'} → ${c.toOwner} (takeover)` : c.toOwner ? `, ${c.toOwner} again` : '')))
      : null);
}

// claimsTable lists the run's lease claims (lease_history), oldest first.
function claimsTable(history, run) {
  return h('table', { class: 'claims', id: 'lease-history' },
    h('caption', {}, 'Claims of the lease'),
    h('thead', {}, h('tr', {}, ['Epoch', 'Owner', 'Claimed', 'After step'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, history.map((c, i) => h('tr', {},
      h('td', { class: 'num' }, String(c.epoch)),
      h('td', { class: 'mono' }, c.owner, i > 0 && history[i - 1].owner !== c.owner ? h('span', { class: 'takeover-tag' }, ' new host') : null),
      h('td', {}, time(c.claimed_at).slice(11)),
      h('td', { class: 'num' }, String(c.last_step))))));
}

function drawResponses(el, run, st, runId) {
  const list = run.responses || [];
  const sig = JSON.stringify([st.responseId, list.map((r) => [r.id, r.status, r.commit_step])]);
  if (el.responses.dataset.sig === sig) return;
  el.responses.dataset.sig = sig;
  replace(el.responses, list.map((r) => h('li', {},
    h('a', { href: href(`/runs/${enc(runId)}?response=${enc(r.id)}`), class: 'mono',
      'aria-current': r.id === st.responseId ? 'true' : null }, r.id),
    ' ', badge(r.status),
    h('span', { class: 'muted' }, ` steps ${r.start_step + 1}–${r.commit_step ?? '…'} · ${time(r.created_at)}`))));
}

function drawSteps(el, steps, st, shown, moves) {
  if (steps.length === 0) {
    if (el.steps.dataset.order !== '') {
      el.steps.dataset.order = '';
      replace(el.steps, h('li', { class: 'muted' }, 'No superstep committed yet.'));
    }
    return;
  }
  const have = new Map([...el.steps.querySelectorAll(':scope > li.step')].map((li) => [Number(li.dataset.step), li]));
  const order = steps.map((s) => s.step).join(' ');
  if (el.steps.dataset.order !== order) {
    el.steps.dataset.order = order;
    const want = new Set(steps.map((s) => s.step));
    for (const li of [...el.steps.children]) if (!want.has(Number(li.dataset.step))) li.remove();
    for (const s of steps) if (!have.has(s.step)) have.set(s.step, stepItem(s.step));
    // Nodes already in place are not moved (moving one would drop its
    // focus); new steps come after the ones shown.
    for (const s of steps) if (have.get(s.step).parentNode !== el.steps) el.steps.append(have.get(s.step));
  }
  for (const s of steps) fillStep(have.get(s.step), s, st.expanded.has(s.step), s.step === shown, moves.get(s.step));
}

function stepItem(step) {
  const body = h('div', { class: 'step-body', id: `step-${step}-body`, hidden: true });
  const head = h('button', { type: 'button', class: 'step-head', 'data-step': step, 'aria-expanded': 'false',
    'aria-controls': `step-${step}-body`, id: `step-${step}-head` });
  return h('li', { class: 'step', 'data-step': step }, h('h3', {}, head), body);
}

function fillStep(li, s, open, selected, move) {
  const head = li.querySelector('.step-head');
  const body = li.querySelector('.step-body');
  li.classList.toggle('selected', selected);
  head.setAttribute('aria-expanded', String(open));
  if (selected) head.setAttribute('aria-current', 'step');
  else head.removeAttribute('aria-current');
  body.hidden = !open;
  const sig = JSON.stringify([s.events.length, s.last_seq, s.committed_at, s.epoch, s.host, !!move]);
  if (li.dataset.sig === sig) return;
  li.dataset.sig = sig;
  const events = s.events.length === 0 ? 'no events'
    : s.events.length === 1 ? `1 event · seq ${s.events[0].sequence_number}`
      : `${s.events.length} events · seq ${s.events[0].sequence_number}–${s.events[s.events.length - 1].sequence_number}`;
  replace(head,
    h('span', { class: 'step-no' }, `Step ${s.step}`),
    h('span', { class: 'step-exec mono' }, (s.executors || []).join(', ') || '—'),
    h('span', { class: 'step-meta' }, `${events} · ${time(s.committed_at).slice(11)}`,
      s.epoch !== null && s.epoch !== undefined ? ` · epoch ${s.epoch}${s.host ? ' on ' + s.host : ''}` : ''),
    move ? h('span', { class: 'takeover-tag' }, 'takeover') : null);
  replace(body, eventsTable(s.events), itemsList(itemsOf(s.events)));
}

function eventsTable(events) {
  if (events.length === 0) return h('p', { class: 'muted' }, 'This commit wrote no events.');
  const rows = compactEvents(events);
  const shown = rows.slice(0, maxRowsPerStep);
  return h('table', { class: 'events' },
    h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Seq'), h('th', { scope: 'col' }, 'Event'), h('th', { scope: 'col' }, 'Detail'))),
    h('tbody', {}, shown.map((r) => h('tr', {},
      h('td', { class: 'num' }, r.first === r.last ? String(r.first) : `${r.first}–${r.last}`),
      h('td', { class: 'mono' }, r.count > 1 ? `${r.type} ×${r.count}` : r.type),
      h('td', { class: 'detail' }, r.text))),
    rows.length > shown.length ? h('tr', {}, h('td', { colspan: 3, class: 'muted' }, `… ${rows.length - shown.length} more rows`)) : null));
}

function itemsList(items) {
  if (items.length === 0) return null;
  return h('div', { class: 'items' }, h('h4', {}, 'Items'),
    h('ul', {}, items.map((it) => h('li', {}, h('span', { class: 'item-type' }, it.type), ' ', h('span', { class: 'item-text' }, itemLine(it))))));
}

function drawPending(el, pending, running) {
  if (pending.length === 0) {
    replace(el.pending);
    return;
  }
  replace(el.pending, h('div', { class: 'pending' },
    h('h3', {}, running ? 'Arriving (its superstep is being read)' : 'Events after the last superstep'),
    eventsTable(pending), itemsList(itemsOf(pending))));
}

function drawOutput(el, st) {
  if (st.stream !== 'unstreamable' || !st.snapshot) {
    replace(el.output);
    return;
  }
  replace(el.output, h('h3', {}, 'Output'), itemsList(st.snapshot.output || []) || h('p', { class: 'muted' }, 'No output yet.'));
}

function drawGraph(el, run, step) {
  const lit = new Set(step?.executors || []);
  const key = JSON.stringify([run.graph, step?.step, [...lit]]);
  if (el.graphKey === key) return;
  el.graphKey = key;
  if (!run.graph) {
    el.graphCaption.textContent = `The workflow of ${run.model} is not registered on this server, so its graph is unknown.`;
    replace(el.graph);
    return;
  }
  const caption = step
    ? `Step ${step.step}: ${lit.size ? [...lit].join(', ') + ' ran' : 'no executor recorded'}.`
    : 'No superstep yet.';
  el.graphCaption.textContent = caption + ' Choose a superstep to see its executors.';
  const ids = (run.graph.executors || []).map((e) => e.id).join(', ');
  replace(el.graph, graphSVG(run.graph, lit, `Workflow graph of ${run.model}: executors ${ids}. ${caption}`));
}

function drawRequests(el, run) {
  const reqs = run.pending_requests || [];
  replace(el.requests, reqs.length
    ? h('section', { class: 'card', 'aria-labelledby': 'requests-title' },
      h('h2', { id: 'requests-title' }, 'Pending requests'),
      h('ul', {}, reqs.map((r) => h('li', { class: 'mono' }, `${r.name}(${r.arguments}) · ${r.call_id}`))))
    : null);
}

// replay reads the stream after sequence number `after` into the replay
// panel: what a client resuming from that cursor gets.
let replayCtrl = null;
async function replay(el, responseId, after, signal) {
  replayCtrl?.abort();
  const ctrl = new AbortController();
  replayCtrl = ctrl;
  signal.addEventListener('abort', () => ctrl.abort(), { once: true });
  const list = h('ol', { class: 'replay-list', id: 'replay-list' });
  const state = h('p', { role: 'status', id: 'replay-state' }, `Replaying ${responseId} after ${after}…`);
  el.replay.hidden = false;
  replace(el.replay, h('h2', { id: 'replay-title' }, `Replay after sequence ${after}`), state, list);
  el.replayStop.disabled = false;
  const stop = () => ctrl.abort();
  el.replayStop.addEventListener('click', stop, { once: true });
  let n = 0;
  let first = null;
  let last = null;
  try {
    const r = await stream(responseId, {
      after, signal: ctrl.signal, retries: 0,
      onEvent: (ev) => {
        n++;
        first ??= ev.sequence_number;
        last = ev.sequence_number;
        list.append(h('li', { value: ev.sequence_number }, h('span', { class: 'mono' }, ev.type), ' ', h('span', { class: 'detail' }, compactEvents([ev])[0].text)));
      },
    });
    state.textContent = n === 0 ? `No events after ${after}.`
      : `Replayed ${n} events, ${first}–${last}${r.terminal ? ', through the terminal event' : ''}.`;
  } catch (err) {
    state.textContent = err.name === 'AbortError' ? `Stopped after ${n} events.` : `Replay failed: ${err.message}`;
  } finally {
    el.replayStop.disabled = true;
    el.replayStop.removeEventListener('click', stop);
  }
}
