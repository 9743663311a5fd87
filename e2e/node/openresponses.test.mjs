// The scenarios of the OpenResponses compliance suite (openresponses/openresponses,
// bin/compliance-test.ts: basic-response, streaming-response, system-prompt,
// tool-calling, tool-calling-streaming, image-input, multi-turn, and the
// previous-response-id, function-call-roundtrip and file-input variants), sent
// with plain fetch as that suite sends them, against a proxied model (a
// ChatAgent with no tools of its own on a local model that follows the tools
// a request offers, as `superstep serve --model-server local
// --local-follow-tools --proxy-models ...` hosts it) and against demo.tools.
// The suite itself needs bun and its generated zod schemas; these checks are
// ours, written from the spec: every field the spec's ResponseResource
// requires, the item shapes, and the streaming events a scenario needs.
import { test } from 'node:test';
import assert from 'node:assert/strict';

const baseURL = process.env.SUPERSTEP_BASE_URL;
if (!baseURL) {
  throw new Error('SUPERSTEP_BASE_URL is not set (e.g. http://127.0.0.1:8080/v1)');
}
const apiKey = process.env.SUPERSTEP_API_KEY ?? 'test';
const proxied = process.env.SUPERSTEP_SPEC_MODEL ?? 'spec.local';

// The fields the spec's ResponseResource lists as required.
const required = ['id', 'object', 'created_at', 'completed_at', 'status', 'incomplete_details', 'model',
  'previous_response_id', 'instructions', 'output', 'error', 'tools', 'tool_choice', 'truncation',
  'parallel_tool_calls', 'text', 'top_p', 'presence_penalty', 'frequency_penalty', 'top_logprobs',
  'temperature', 'reasoning', 'user', 'usage', 'max_output_tokens', 'max_tool_calls', 'store',
  'background', 'service_tier', 'metadata', 'safety_identifier', 'prompt_cache_key'];

function checkResource(r) {
  for (const f of required) assert.ok(f in r, `ResponseResource lacks required field ${f}`);
  assert.equal(r.object, 'response');
  assert.equal(typeof r.id, 'string');
  assert.equal(typeof r.created_at, 'number');
  assert.ok(Array.isArray(r.output) && Array.isArray(r.tools));
  for (const t of r.tools) {
    if (t.type !== 'function') continue;
    for (const f of ['name', 'description', 'parameters', 'strict']) assert.ok(f in t, `function tool lacks ${f}`);
  }
  for (const item of r.output) {
    assert.equal(typeof item.type, 'string');
    assert.equal(typeof item.id, 'string', `${item.type} item id`);
    switch (item.type) {
      case 'message':
        assert.equal(item.role, 'assistant');
        for (const c of item.content) {
          assert.equal(c.type, 'output_text');
          assert.equal(typeof c.text, 'string');
          assert.ok(Array.isArray(c.annotations), 'output_text.annotations');
        }
        break;
      case 'function_call':
        for (const f of ['call_id', 'name', 'arguments', 'status']) assert.equal(typeof item[f], 'string', `function_call.${f}`);
        JSON.parse(item.arguments);
        break;
      case 'mcp_call':
        for (const f of ['server_label', 'name', 'arguments']) assert.equal(typeof item[f], 'string', `mcp_call.${f}`);
        break;
      default:
        assert.fail(`unexpected output item type ${item.type}`);
    }
  }
}

async function create(body, stream = false) {
  const res = await fetch(`${baseURL}/responses`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ ...body, stream }),
  });
  if (!res.ok) assert.fail(`HTTP ${res.status}: ${await res.text()}`);
  if (!stream) return { response: await res.json() };
  // SSE: "event: <type>" and "data: <json>" lines, a blank line between events.
  const text = await res.text();
  const events = [];
  let done = false;
  for (const block of text.split('\n\n')) {
    const data = block.split('\n').filter((l) => l.startsWith('data: ')).map((l) => l.slice(6)).join('\n');
    const name = block.split('\n').find((l) => l.startsWith('event: '))?.slice(7);
    if (!data) continue;
    assert.ok(!done, 'an event after data: [DONE]');
    if (data === '[DONE]') { // the end of the stream, as OpenAI's streams end
      done = true;
      continue;
    }
    const ev = JSON.parse(data);
    if (name) assert.equal(name, ev.type, 'the SSE event name is the event type');
    events.push(ev);
  }
  events.forEach((ev, i) => {
    assert.equal(ev.sequence_number, i, `event ${i} (${ev.type}) sequence_number`);
    if ('response' in ev) checkResource(ev.response);
  });
  assert.equal(events[0].type, 'response.created');
  const last = events.at(-1);
  assert.ok(['response.completed', 'response.failed', 'response.incomplete'].includes(last.type), last.type);
  return { response: last.response, events };
}

const user = (content) => ({ type: 'message', role: 'user', content });
const weather = {
  type: 'function', name: 'get_weather', description: 'Get the current weather for a location',
  parameters: { type: 'object', properties: { location: { type: 'string', description: 'The city and state, e.g. San Francisco, CA' } }, required: ['location'] },
};
// A 1x1 PNG: the suite sends a small data-URL image.
const png = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';

function completedWithOutput(r) {
  checkResource(r);
  assert.equal(r.status, 'completed');
  assert.ok(r.output.length > 0, 'no output items');
}

for (const model of [proxied, 'demo.tools']) {
  test(`${model}: basic-response`, async () => {
    const { response } = await create({ model, input: [user('Say hello in exactly 3 words.')] });
    completedWithOutput(response);
  });

  test(`${model}: streaming-response`, async () => {
    const { response, events } = await create({ model, input: [user('Count from 1 to 5.')] }, true);
    completedWithOutput(response);
    assert.ok(events.some((e) => e.type === 'response.output_text.delta'), 'no output_text.delta');
  });

  test(`${model}: system-prompt`, async () => {
    const { response } = await create({ model, input: [{ type: 'message', role: 'system', content: 'You are a pirate. Always respond in pirate speak.' }, user('Say hello.')] });
    completedWithOutput(response);
  });

  test(`${model}: multi-turn`, async () => {
    const { response } = await create({ model, input: [user('My name is Alice.'),
      { type: 'message', role: 'assistant', content: 'Hello Alice! Nice to meet you. How can I help you today?' },
      user('What is my name?')] });
    completedWithOutput(response);
  });

  test(`${model}: previous-response-id`, async () => {
    const first = (await create({ model, input: [user('My name is Alice.')] })).response;
    completedWithOutput(first);
    const { response } = await create({ model, previous_response_id: first.id, input: [user('What is my name?')] });
    completedWithOutput(response);
    assert.equal(response.previous_response_id, first.id);
  });
}

test(`${proxied}: tool-calling`, async () => {
  const { response } = await create({ model: proxied, input: [user("What's the weather like in San Francisco?")], tools: [weather] });
  checkResource(response);
  assert.ok(response.output.some((i) => i.type === 'function_call' && i.name === 'get_weather'), 'no function_call output');
});

test(`${proxied}: tool-calling-streaming`, async () => {
  const { response, events } = await create({ model: proxied, input: [user("What's the weather like in San Francisco?")], tools: [weather] }, true);
  checkResource(response);
  const types = events.map((e) => e.type);
  assert.ok(events.some((e) => e.type === 'response.output_item.added' && e.item?.type === 'function_call'), 'output_item.added of a function_call');
  assert.ok(types.includes('response.function_call_arguments.delta'), 'function_call_arguments.delta');
  assert.ok(types.includes('response.function_call_arguments.done'), 'function_call_arguments.done');
  assert.ok(events.some((e) => e.type === 'response.output_item.done' && e.item?.type === 'function_call'), 'output_item.done of a function_call');
});

test(`${proxied}: function-call-roundtrip`, async () => {
  const first = (await create({ model: proxied, input: [user("What's the weather like in San Francisco?")], tools: [weather] })).response;
  const call = first.output.find((i) => i.type === 'function_call');
  assert.ok(call, 'no function_call');
  const { response } = await create({ model: proxied, previous_response_id: first.id, tools: [weather],
    input: [{ type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ temperature: '18C' }) }] });
  completedWithOutput(response);
  assert.ok(response.output.some((i) => i.type === 'message'), 'no text answer after the tool result');
});

test(`${proxied}: image-input`, async () => {
  const { response } = await create({ model: proxied, input: [user([
    { type: 'input_text', text: 'What do you see in this image? Answer in one sentence.' },
    { type: 'input_image', image_url: png }])] });
  completedWithOutput(response);
});

test(`${proxied}: file-input`, async () => {
  const pdf = Buffer.from('%PDF-1.4\n% a tiny test file\n').toString('base64');
  const { response } = await create({ model: proxied, input: [user([
    { type: 'input_text', text: 'What is in this file?' },
    { type: 'input_file', filename: 'note.pdf', file_data: `data:application/pdf;base64,${pdf}` }])] });
  completedWithOutput(response);
});

test('demo.tools: the server-run tool call is an mcp_call, never a function_call for the client', async () => {
  const { response, events } = await create({ model: 'demo.tools', input: [user('What is 6 times 7? calculate {"a":6,"op":"*","b":7}')] }, true);
  completedWithOutput(response);
  assert.ok(response.output.some((i) => i.type === 'mcp_call'), 'no mcp_call item');
  assert.ok(!response.output.some((i) => i.type === 'function_call'), 'a function_call the client would have to run');
  assert.ok(events.some((e) => e.type === 'response.output_item.added' && e.item?.type === 'mcp_call'));
});
