// The timeline of one response: its supersteps (from GET /v1/runs/{id})
// with the events of its stream that each commit wrote, and what the run's
// lease history shows. No DOM: unit-tested by node:test in e2e/browser.

// stepsOf returns the run's supersteps that belong to responseId, by step.
export function stepsOf(run, responseId) {
  return (run?.supersteps || []).filter((s) => s.response_id === responseId).sort((a, b) => a.step - b.step);
}

// buildTimeline assigns each event (sorted by sequence_number) to the first
// of steps whose last_seq is at or after it: a commit wrote the events up
// to its last_seq, so events before its first_seq that no earlier step
// claimed (published live ahead of a commit, or numbered before any commit
// recorded a range) go with it too. Events past every step's last_seq are
// pending: streamed already, but the run as last read has no commit for
// them yet. It returns {steps: [{...step, events}], pending}.
export function buildTimeline(steps, events) {
  const out = steps.map((s) => ({ ...s, events: [] }));
  const ranged = out.filter((s) => s.last_seq !== null && s.last_seq !== undefined);
  const pending = [];
  let i = 0;
  for (const ev of events) {
    while (i < ranged.length && ranged[i].last_seq < ev.sequence_number) i++;
    if (i < ranged.length) ranged[i].events.push(ev);
    else pending.push(ev);
  }
  return { steps: out, pending };
}

const deltaSuffix = '.delta';

// compactEvents folds each run of consecutive delta events of one item and
// type into one row {type, count, first, last, text}, so a reply streamed
// token by token reads as one line; other events stay rows of one.
export function compactEvents(events) {
  const rows = [];
  for (const ev of events) {
    const prev = rows[rows.length - 1];
    const isDelta = ev.type.endsWith(deltaSuffix);
    if (isDelta && prev && prev.type === ev.type && prev.item === ev.item_id && prev.last === ev.sequence_number - 1) {
      prev.count++;
      prev.last = ev.sequence_number;
      prev.text += typeof ev.delta === 'string' ? ev.delta : '';
      continue;
    }
    rows.push({ type: ev.type, count: 1, first: ev.sequence_number, last: ev.sequence_number,
      item: ev.item_id, text: isDelta && typeof ev.delta === 'string' ? ev.delta : summarize(ev), event: ev });
  }
  return rows;
}

// summarize is a short line about one event for the timeline.
export function summarize(ev) {
  if (ev.response) return `status ${ev.response.status}`;
  if (ev.item) return itemLine(ev.item);
  if (typeof ev.text === 'string') return ev.text;
  if (typeof ev.arguments === 'string') return `${ev.name || ''}(${ev.arguments})`;
  return '';
}

// itemsOf returns the output items the events completed, in order.
export function itemsOf(events) {
  return events.filter((ev) => ev.type === 'response.output_item.done' && ev.item).map((ev) => ev.item);
}

// itemLine is one line about an output item.
export function itemLine(item) {
  switch (item.type) {
    case 'message':
      return (item.content || []).map((c) => c.text ?? c.refusal ?? '').join('');
    case 'function_call':
      return `${item.name}(${item.arguments || ''})`;
    case 'mcp_call':
      return `${item.name}(${item.arguments || ''}) → ${item.output ?? item.error ?? ''}`;
    default:
      return item.type || '';
  }
}

// takeovers lists the commits of a run made under a new lease epoch:
// another claim of the run came between them and the commit before. Within
// one response that is a takeover (its host died or lost the lease and a
// host claimed the run again: sameResponse); at the first commit of a later
// response it is that response's own claim. steps are the run's
// supersteps, any response; those without an epoch are skipped.
export function takeovers(allSteps) {
  const sorted = [...(allSteps || [])].sort((a, b) => a.step - b.step);
  const out = [];
  let prev = null;
  for (const s of sorted) {
    if (s.epoch === null || s.epoch === undefined) continue;
    if (prev && s.epoch !== prev.epoch) {
      out.push({ step: s.step, fromEpoch: prev.epoch, toEpoch: s.epoch, fromHost: prev.host || '', toHost: s.host || '',
        sameResponse: s.response_id === prev.response_id });
    }
    prev = s;
  }
  return out;
}

// isRunning reports whether a response status can still change.
export function isRunning(status) {
  return status === 'in_progress' || status === 'queued';
}

// observeLease records a change of the run's lease epoch seen between two
// reads of the run (seen = {lease, changes}, kept between reads; it is
// returned). A new epoch means a host claimed the run again: a takeover
// when the owner changed. The server does not store the epoch of each
// commit, so this is how a page watching a run shows a takeover as it
// happens. An owner of "" (the lease let go) keeps the last owner seen.
export function observeLease(seen, lease, step, at) {
  if (!lease) return seen;
  const prev = seen.lease;
  if (prev && lease.epoch !== prev.epoch) {
    seen.changes.push({ step, fromEpoch: prev.epoch, toEpoch: lease.epoch, fromOwner: prev.owner, toOwner: lease.owner || '', at });
  }
  seen.lease = { owner: lease.owner || prev?.owner || '', epoch: lease.epoch };
  return seen;
}
