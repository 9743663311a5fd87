// End-to-end test of superstep with the official `openai` npm package.
// SUPERSTEP_BASE_URL names the server's API base (http://host:port/v1);
// the Go test TestNodeClient starts a server and runs this file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.env.SUPERSTEP_BASE_URL;
if (!baseURL) {
  throw new Error('SUPERSTEP_BASE_URL is not set (e.g. http://127.0.0.1:8080/v1)');
}
const client = new OpenAI({ baseURL, apiKey: process.env.SUPERSTEP_API_KEY ?? 'test', maxRetries: 0 });

function assertContiguous(events, from) {
  events.forEach((ev, i) => assert.equal(ev.sequence_number, from + i, `event ${i} (${ev.type})`));
}

test('streams a response from sequence 0 to response.completed', async () => {
  const stream = await client.responses.create({ model: 'demo.two-outputs', input: 'x', stream: true });
  const events = [];
  for await (const ev of stream) events.push(ev);
  assertContiguous(events, 0);
  assert.equal(events[0].type, 'response.created');
  assert.equal(events.at(-1).type, 'response.completed');
  const texts = events.filter((e) => e.type === 'response.output_text.done').map((e) => e.text);
  assert.deepEqual(texts, ['first-2', 'second-2', 'done']);
});

test('resumes a dropped background stream with responses.stream and retrieve', async () => {
  const controller = new AbortController();
  const stream = await client.responses.create(
    { model: 'demo.silent', input: 'go', stream: true, background: true, metadata: { steps: '3', step_delay_ms: '100' } },
    { signal: controller.signal },
  );
  const head = [];
  for await (const ev of stream) {
    head.push(ev);
    if (ev.type === 'response.in_progress') break; // leaving the loop drops the connection
  }
  controller.abort();
  const id = head[0].response.id;
  const cursor = head.at(-1).sequence_number;
  assert.notEqual(head.at(-1).type, 'response.completed');

  // The helper replays from 0 and filters on the client (responses-api.md §0.7).
  const resumed = client.responses.stream({ response_id: id, starting_after: cursor });
  const rest = [];
  for await (const ev of resumed) rest.push(ev);
  const final = await resumed.finalResponse();
  assertContiguous(rest, cursor + 1);
  assert.equal(rest.at(-1).type, 'response.completed');
  assert.equal(final.output_text, 'done after 3');
  assertContiguous([...head, ...rest], 0);

  // retrieve with stream + starting_after asks the server to skip.
  const tail = await client.responses.retrieve(id, { stream: true, starting_after: cursor });
  const again = [];
  for await (const ev of tail) again.push(ev);
  assert.deepEqual(again, rest);
});

test('polls, cancels idempotently and reports unknown ids as 404', async () => {
  const created = await client.responses.create({
    model: 'demo.silent', input: 'go', background: true, metadata: { steps: '200', step_delay_ms: '20' },
  });
  assert.ok(['queued', 'in_progress'].includes(created.status));
  const first = await client.responses.cancel(created.id);
  const second = await client.responses.cancel(created.id);
  assert.equal(first.status, 'cancelled');
  assert.equal(second.status, 'cancelled');
  const polled = await client.responses.retrieve(created.id);
  assert.equal(polled.status, 'cancelled');
  await client.responses.delete(created.id);
  await assert.rejects(client.responses.retrieve(created.id), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError, String(err));
    assert.match(err.message, /not found/);
    return true;
  });
});
