// Unit tests of the console's modules that touch no DOM (they run in node
// as they are served: plain ES modules, no build step).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { SSEParser, decodeFrame } from '../../console/assets/js/sse.js';
import { buildTimeline, compactEvents, takeovers, itemLine, stepsOf, observeLease } from '../../console/assets/js/timeline.js';
import { layoutGraph, label } from '../../console/assets/js/layout.js';
import { partsDiff, lineDiff, pretty } from '../../console/assets/js/diff.js';

test('SSEParser: frames across chunk boundaries, CRLF, comments', () => {
  const p = new SSEParser();
  const text = ': keep-alive\r\nevent: response.created\r\ndata: {"a":1}\r\n\r\nevent: x\ndata: l1\ndata: l2\n\ndata: [DONE]\n\n';
  const frames = [];
  for (let i = 0; i < text.length; i += 3) frames.push(...p.feed(text.slice(i, i + 3)));
  assert.deepEqual(frames, [
    { event: 'response.created', data: '{"a":1}' },
    { event: 'x', data: 'l1\nl2' },
    { event: 'message', data: '[DONE]' },
  ]);
  assert.deepEqual(p.feed('data: partial'), []);
});

test('decodeFrame: done, events, error frames', () => {
  assert.deepEqual(decodeFrame({ event: 'message', data: '[DONE]' }), { done: true });
  const failed = { type: 'response.failed', sequence_number: 3, response: { status: 'failed', error: { message: 'x' } } };
  assert.deepEqual(decodeFrame({ event: 'response.failed', data: JSON.stringify(failed) }), { event: failed });
  assert.equal(decodeFrame({ event: 'error', data: '{"type":"error","code":"c","message":"boom"}' }).error.message, 'boom');
  assert.equal(decodeFrame({ event: 'message', data: '{"error":{"message":"nested"}}' }).error.message, 'nested');
  assert.ok(decodeFrame({ event: 'message', data: '{nope' }).error);
});

const ev = (seq, type = 'response.output_text.delta', extra = {}) => ({ sequence_number: seq, type, ...extra });

test('buildTimeline: events go to the commit whose range holds them; later ones are pending', () => {
  const steps = [
    { step: 1, response_id: 'r', first_seq: null, last_seq: null },
    { step: 2, response_id: 'r', first_seq: 2, last_seq: 4 },
    { step: 3, response_id: 'r', first_seq: 5, last_seq: 5 },
  ];
  const events = [0, 1, 2, 3, 4, 5, 6, 7].map((s) => ev(s));
  const tl = buildTimeline(steps, events);
  assert.deepEqual(tl.steps.map((s) => s.events.map((e) => e.sequence_number)), [[], [0, 1, 2, 3, 4], [5]]);
  assert.deepEqual(tl.pending.map((e) => e.sequence_number), [6, 7]);
  assert.deepEqual(stepsOf({ supersteps: [{ step: 2, response_id: 'a' }, { step: 1, response_id: 'a' }, { step: 3, response_id: 'b' }] }, 'a').map((s) => s.step), [1, 2]);
});

test('compactEvents folds consecutive deltas of one item', () => {
  const rows = compactEvents([
    ev(0, 'response.created', { response: { status: 'in_progress' } }),
    ev(1, 'response.output_text.delta', { item_id: 'm', delta: 'Hel' }),
    ev(2, 'response.output_text.delta', { item_id: 'm', delta: 'lo' }),
    ev(3, 'response.output_text.delta', { item_id: 'n', delta: '!' }),
    ev(4, 'response.output_item.done', { item: { type: 'message', content: [{ type: 'output_text', text: 'Hello' }] } }),
  ]);
  assert.deepEqual(rows.map((r) => [r.first, r.last, r.count, r.text]), [
    [0, 0, 1, 'status in_progress'], [1, 2, 2, 'Hello'], [3, 3, 1, '!'], [4, 4, 1, 'Hello']]);
});

test('itemLine and takeovers', () => {
  assert.equal(itemLine({ type: 'function_call', name: 'approve', arguments: '{"q":1}' }), 'approve({"q":1})');
  assert.equal(itemLine({ type: 'mcp_call', name: 'calc', arguments: '1+1', output: '2' }), 'calc(1+1) → 2');
  const t = takeovers([
    { step: 3, epoch: 2, host: 'b', response_id: 'r1' }, { step: 1, epoch: 1, host: 'a', response_id: 'r1' },
    { step: 2, epoch: 1, host: 'a', response_id: 'r1' }, { step: 4, epoch: null, response_id: 'r1' },
    { step: 5, epoch: 3, host: 'a', response_id: 'r2' },
  ]);
  assert.deepEqual(t, [
    { step: 3, fromEpoch: 1, toEpoch: 2, fromHost: 'a', toHost: 'b', sameResponse: true },
    { step: 5, fromEpoch: 2, toEpoch: 3, fromHost: 'b', toHost: 'a', sameResponse: false },
  ]);
});

test('layoutGraph: layers by longest path, cycles drawn as back edges', () => {
  const g = layoutGraph({
    start: 'start',
    executors: [{ id: 'start' }, { id: 'a' }, { id: 'b' }, { id: 'join' }, { id: 'lonely' }],
    edges: [{ from: 'start', to: 'a' }, { from: 'start', to: 'b' }, { from: 'a', to: 'join' }, { from: 'b', to: 'join' },
      { from: 'start', to: 'join' }, { from: 'join', to: 'start' }, { from: 'a', to: 'a' }, { from: 'a', to: 'ghost' }],
  });
  const layer = Object.fromEntries(g.nodes.map((n) => [n.id, n.layer]));
  assert.equal(layer.start, 0);
  assert.equal(layer.a, 1);
  assert.equal(layer.b, 1);
  assert.equal(layer.join, 2);
  assert.equal(layer.lonely, 0);
  assert.deepEqual(g.edges.filter((e) => e.back).map((e) => `${e.from}>${e.to}`).sort(), ['a>a', 'join>start']);
  assert.equal(g.edges.length, 7, 'the edge to an unknown executor is dropped');
  for (const n of g.nodes) {
    assert.ok(n.x >= 0 && n.x + n.w <= g.width && n.y + n.h <= g.height, `${n.id} inside the drawing`);
  }
  const row1 = g.nodes.filter((n) => n.layer === 1).sort((x, y) => x.x - y.x);
  assert.ok(row1[0].x + row1[0].w <= row1[1].x, 'nodes of a row do not overlap');
  assert.equal(label('x'.repeat(40)).length, 28);
  assert.deepEqual(layoutGraph(null), { nodes: [], edges: [], width: 24, height: 0 });
});

test('partsDiff: added, removed, changed, same; without the parent only the changed flag', () => {
  const parent = { step: 1, parts: [{ name: 'h', size: 10 }, { name: 'gone', size: 3 }, { name: 's', size: 5 }] };
  const cp = { step: 2, parent_step: 1, parts: [{ name: 'h', size: 10, changed: false }, { name: 's', size: 5, changed: true }, { name: 'new', size: 7, changed: true }] };
  assert.deepEqual(partsDiff(cp, parent).map((r) => [r.name, r.status]), [['gone', 'removed'], ['h', 'same'], ['new', 'added'], ['s', 'changed']]);
  assert.deepEqual(partsDiff(cp, undefined).map((r) => [r.name, r.status]), [['h', 'same'], ['new', 'changed'], ['s', 'changed']]);
});

test('lineDiff: a shortest edit of lines', () => {
  const a = pretty('{"n":1,"keep":true,"list":[1,2]}');
  const b = pretty('{"n":2,"keep":true,"list":[1,2,3]}');
  const d = lineDiff(a, b);
  const back = (op) => d.filter((l) => l.op === ' ' || l.op === op).map((l) => l.text).join('\n');
  assert.equal(back('-'), a);
  assert.equal(back('+'), b);
  assert.deepEqual(d.filter((l) => l.op !== ' ').map((l) => l.op + l.text.trim()), ['-"n": 1,', '+"n": 2,', '-2', '+2,', '+3']);
  assert.deepEqual(lineDiff('', 'x'), [{ op: '+', text: 'x' }]);
  assert.equal(pretty('not json'), 'not json');
});

test('observeLease: epoch changes seen between reads, with the last owner', () => {
  const seen = { lease: null, changes: [] };
  observeLease(seen, { owner: 'a', epoch: 1 }, 1, 10);
  observeLease(seen, { owner: 'a', epoch: 1 }, 2, 11);
  observeLease(seen, { owner: '', epoch: 1 }, 3, 12); // let go: the last owner is kept
  observeLease(seen, { owner: 'b', epoch: 2 }, 3, 13);
  observeLease(seen, undefined, 3, 14);
  observeLease(seen, { owner: 'b', epoch: 3 }, 5, 15);
  assert.deepEqual(seen.changes, [
    { step: 3, fromEpoch: 1, toEpoch: 2, fromOwner: 'a', toOwner: 'b', at: 13 },
    { step: 5, fromEpoch: 2, toEpoch: 3, fromOwner: 'b', toOwner: 'b', at: 15 },
  ]);
});

test('layoutGraph: a wide fan-out wraps onto lines without overlaps', () => {
  const workers = Array.from({ length: 64 }, (_, i) => `worker-${i}`);
  const g = layoutGraph({
    start: 'split',
    executors: [{ id: 'split' }, ...workers.map((id) => ({ id })), { id: 'join' }],
    edges: [...workers.map((w) => ({ from: 'split', to: w })), ...workers.map((w) => ({ from: w, to: 'join' }))],
  });
  assert.ok(g.width <= 600, `width ${g.width}`);
  const byId = Object.fromEntries(g.nodes.map((n) => [n.id, n]));
  assert.ok(byId.join.y > Math.max(...workers.map((w) => byId[w].y)), 'join below every worker');
  assert.ok(g.edges.some((e) => e.far) && !g.edges.find((e) => e.to === 'worker-0').far, 'edges across wrapped lines are far, to the first line not');
  for (const a of g.nodes) {
    for (const b of g.nodes) {
      if (a !== b && a.y === b.y) assert.ok(a.x + a.w <= b.x || b.x + b.w <= a.x, `${a.id} and ${b.id} overlap`);
    }
  }
});
