// End-to-end test of superstep with the Vercel AI SDK (`ai` and the
// `@ai-sdk/openai` provider's Responses API model, openai.responses(id)).
// SUPERSTEP_BASE_URL names the server's API base and SUPERSTEP_CHAT_MODEL a
// plain conversation agent on the local model server (it answers
// "Echo: <last user message>", and its usage counts one token per word of
// every message it was sent); TestNodeClient starts the server and runs
// this file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createOpenAI } from '@ai-sdk/openai';
import { generateText, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';

const baseURL = process.env.SUPERSTEP_BASE_URL;
const chatModel = process.env.SUPERSTEP_CHAT_MODEL;
if (!baseURL || !chatModel) {
  throw new Error('SUPERSTEP_BASE_URL and SUPERSTEP_CHAT_MODEL must be set');
}
const openai = createOpenAI({ baseURL, apiKey: process.env.SUPERSTEP_API_KEY ?? 'test' });
const model = (id) => openai.responses(id);

// words counts the local model's tokens of a text (it splits at spaces).
const words = (s) => s.split(/ +/).filter(Boolean).length;

// bodyOf returns the body of the request a step sent.
const bodyOf = (req) => (typeof req.body === 'string' ? JSON.parse(req.body) : req.body);

const responseId = (r) => r.providerMetadata?.openai?.responseId;

// streamParts reads a streamText result's full stream.
async function streamParts(result) {
  const parts = [];
  for await (const p of result.fullStream) parts.push(p);
  return parts;
}

test('generateText returns each output of a workflow as a text part', async () => {
  const r = await generateText({ model: model('demo.two-outputs'), prompt: 'x', maxRetries: 0 });
  assert.deepEqual(r.content.map((c) => [c.type, c.text]), [['text', 'first-2'], ['text', 'second-2'], ['text', 'done']]);
  assert.equal(r.text, 'first-2second-2done');
  assert.equal(r.finishReason, 'stop');
  assert.deepEqual(r.toolCalls, []);
  assert.match(responseId(r), /^resp_/);
  const echo = await generateText({ model: model('demo.echo'), prompt: 'hello there', maxRetries: 0 });
  assert.equal(echo.text, 'hello there');
});

test('streamText streams an LLM workflow token by token', async () => {
  const topic = 'a haiku about durable logs';
  const result = streamText({ model: model('demo.writer-reviewer'), prompt: topic, maxRetries: 0 });
  const parts = await streamParts(result);
  const draft = `Echo: ${topic}`;
  const final = `Echo: Draft to review:\n\n${draft}`;
  assert.deepEqual(parts.filter((p) => p.type === 'error'), []);
  assert.equal(await result.text, draft + final);
  // Live publication: each reply arrives in many deltas, one per token.
  const deltas = parts.filter((p) => p.type === 'text-delta');
  assert.ok(deltas.length >= words(draft) + words(final), `${deltas.length} text deltas`);
  assert.equal(parts.filter((p) => p.type === 'text-start').length, 2);
  assert.equal(await result.finishReason, 'stop');
  const usage = await result.usage;
  assert.ok(usage.outputTokens >= words(draft) + words(final), JSON.stringify(usage));
  assert.match((await result.providerMetadata).openai.responseId, /^resp_/);
});

test('streamText on demo.tools shows the server-run call as provider-executed and ends with the tool\'s answer', async () => {
  // The agent runs calculate on the server: its mcp_call item is a call
  // the provider made (providerExecuted), never one the SDK must run.
  const result = streamText({
    model: model('demo.tools'), prompt: 'What is 6 times 7? calculate {"a":6,"op":"*","b":7}', maxRetries: 0,
  });
  const parts = await streamParts(result);
  assert.ok(!parts.some((p) => p.type === 'error' || p.type === 'tool-error'), JSON.stringify(parts.map((p) => p.type)));
  for (const p of parts.filter((p) => p.type === 'tool-call' || p.type === 'tool-result')) {
    assert.equal(p.providerExecuted, true, JSON.stringify(p));
  }
  assert.equal(await result.text, 'Tool calculate returned: 42');
  assert.equal(await result.finishReason, 'stop');
  assert.equal((await result.steps).length, 1);
});

test('generateText on demo.tools does not throw: the server-run call is provider-executed', async () => {
  const result = await generateText({
    model: model('demo.tools'), prompt: 'What is 6 times 7? calculate {"a":6,"op":"*","b":7}', maxRetries: 0,
  });
  assert.equal(result.text, 'Tool calculate returned: 42');
  assert.equal(result.finishReason, 'stop');
  assert.equal(result.steps.length, 1);
  const calls = result.content.filter((p) => p.type === 'tool-call');
  assert.equal(calls.length, 1, JSON.stringify(result.content));
  assert.equal(calls[0].providerExecuted, true);
  assert.equal(calls[0].toolName, 'mcp.calculate');
  const results = result.content.filter((p) => p.type === 'tool-result');
  assert.equal(results.length, 1);
  assert.equal(results[0].output.output ?? results[0].output.value?.output ?? results[0].result?.output, '42', JSON.stringify(results[0]));
});

test('a conversation continues by previousResponseId and an earlier response branches', async () => {
  const first = await generateText({ model: model(chatModel), prompt: 'hello there', maxRetries: 0 });
  assert.equal(first.text, 'Echo: hello there');
  const system = first.usage.inputTokens - words('hello there'); // the agent's instructions
  assert.ok(system > 0, `input tokens ${first.usage.inputTokens}`);
  const after = (id, prompt) => generateText({
    model: model(chatModel), prompt, maxRetries: 0, providerOptions: { openai: { previousResponseId: id } },
  });

  const second = await after(responseId(first), 'second turn');
  assert.equal(second.text, 'Echo: second turn');
  assert.equal(second.response.body.previous_response_id, responseId(first));
  // The agent was sent turn 1 (question and answer) and the new message.
  assert.equal(second.usage.inputTokens, system + words('hello there Echo: hello there second turn'));

  const third = await after(responseId(second), 'third');
  assert.equal(third.text, 'Echo: third');
  assert.equal(third.usage.inputTokens, system + words('hello there Echo: hello there second turn Echo: second turn third'));

  // Continuing the first response again branches: the second turn is not
  // in the branch's history.
  const branch = await after(responseId(first), 'another way');
  assert.equal(branch.text, 'Echo: another way');
  assert.equal(branch.usage.inputTokens, system + words('hello there Echo: hello there another way'));
  assert.notEqual(responseId(branch), responseId(second));
});

test('streamText continues a conversation by previousResponseId', async () => {
  const first = await generateText({ model: model(chatModel), prompt: 'one two', maxRetries: 0 });
  const result = streamText({
    model: model(chatModel), prompt: 'three', maxRetries: 0,
    providerOptions: { openai: { previousResponseId: responseId(first) } },
  });
  const parts = await streamParts(result);
  assert.deepEqual(parts.filter((p) => p.type === 'error'), []);
  assert.equal(await result.text, 'Echo: three');
  const system = first.usage.inputTokens - words('one two');
  assert.equal((await result.usage).inputTokens, system + words('one two Echo: one two three'));
});

test('a stateless conversation resends the whole messages array', async () => {
  const system = (await generateText({ model: model(chatModel), prompt: 'a', maxRetries: 0 })).usage.inputTokens - 1;
  const history = [
    { role: 'user', content: 'hello there' },
    { role: 'assistant', content: 'Echo: hello there' },
    { role: 'user', content: 'second turn' },
  ];
  const r = await generateText({ model: model(chatModel), messages: history, maxRetries: 0 });
  assert.equal(r.text, 'Echo: second turn');
  assert.equal(r.usage.inputTokens, system + words('hello there Echo: hello there second turn'));
  assert.equal(r.response.body.previous_response_id, null);

  // The SDK's own response messages resent: with the default store the
  // SDK sends the earlier output items as item_reference ids, which the
  // server resolves to its stored items; with store: false it sends the
  // items themselves. The model is sent the same either way.
  for (const store of [undefined, false]) {
    const opts = { providerOptions: { openai: store === undefined ? {} : { store } }, maxRetries: 0 };
    const first = await generateText({ model: model(chatModel), prompt: 'hello there', ...opts });
    const messages = [{ role: 'user', content: 'hello there' }, ...first.response.messages, { role: 'user', content: 'again' }];
    const again = await generateText({ model: model(chatModel), messages, ...opts });
    const sent = bodyOf(again.request).input;
    assert.deepEqual(sent.map((it) => it.type ?? it.role),
      store === false ? ['user', 'assistant', 'user'] : ['user', 'item_reference', 'user'], JSON.stringify(sent));
    if (store !== false) assert.equal(sent[1].id, first.response.body.output[0].id);
    assert.equal(again.text, 'Echo: again');
    assert.equal(again.usage.inputTokens, system + words('hello there Echo: hello there again'), `store ${store}`);
  }

  // A turn in which the agent ran its own tool: the SDK references the
  // mcp_call item (by its tool result) and the answer; the server resolves
  // the call with its output, so the model is sent turn 1 whole.
  const prompt = 'add {"a":2,"b":3}';
  const withTool = await generateText({ model: model(chatModel), prompt, maxRetries: 0 });
  assert.equal(withTool.text, 'Tool add returned: 5');
  const next = await generateText({
    model: model(chatModel), maxRetries: 0,
    messages: [{ role: 'user', content: prompt }, ...withTool.response.messages, { role: 'user', content: 'thanks' }],
  });
  const sent = bodyOf(next.request).input;
  assert.deepEqual(sent.map((it) => it.type ?? it.role), ['user', 'item_reference', 'item_reference', 'user'], JSON.stringify(sent));
  assert.deepEqual(sent.slice(1, 3).map((it) => it.id), withTool.response.body.output.map((it) => it.id));
  assert.equal(next.text, 'Echo: thanks');
  const turn1 = words(prompt) + words('{"a":2,"b":3}') + words('5') + words('Tool add returned: 5');
  assert.equal(next.usage.inputTokens, system + turn1 + words('thanks'));
});

// A client tool run by the SDK: the model (made to call lookup_order on
// the first step by toolChoice) calls it, the response ends with its
// function_call, the SDK runs execute and resends the call (whole, with
// either store setting: this SDK sends item_reference only for assistant
// text and provider-executed calls) with its output, and the model's
// answer uses the output. The next turn resends the whole exchange: with
// the default store the answer goes as an item_reference, and the model is
// sent the same as with store: false.
test('generateText runs a client tool and the model answers with its output', async () => {
  const followUpTokens = [];
  for (const store of [undefined, false]) {
    const ran = [];
    const lookup_order = tool({
      description: "Looks an order's status up.",
      inputSchema: z.object({ id: z.string() }),
      execute: async ({ id }) => { ran.push(id); return `order ${id} shipped`; },
    });
    const opts = { tools: { lookup_order }, providerOptions: { openai: store === undefined ? {} : { store } }, maxRetries: 0 };
    const r = await generateText({
      model: model(chatModel), prompt: 'where is my order?', stopWhen: stepCountIs(3),
      prepareStep: ({ stepNumber }) => (stepNumber === 0 ? { toolChoice: { type: 'tool', toolName: 'lookup_order' } } : {}),
      ...opts,
    });
    assert.deepEqual(ran, ['x'], `store ${store}`); // the local model's argument for a required string
    assert.equal(r.steps.length, 2);
    assert.equal(r.steps[0].finishReason, 'tool-calls');
    assert.deepEqual(r.steps[0].toolCalls.map((c) => [c.toolName, c.input, c.providerExecuted ?? false]),
      [['lookup_order', { id: 'x' }, false]]);
    assert.equal(r.text, 'Tool lookup_order returned: order x shipped', `store ${store}`);
    assert.equal(r.finishReason, 'stop');
    const sent = bodyOf(r.steps[1].request);
    assert.deepEqual(sent.input.map((it) => it.type ?? it.role), ['user', 'function_call', 'function_call_output'],
      JSON.stringify(sent.input));
    assert.equal(sent.input[2].output, 'order x shipped');
    assert.equal(sent.previous_response_id, undefined);

    const messages = [{ role: 'user', content: 'where is my order?' }, ...r.response.messages, { role: 'user', content: 'thanks' }];
    const next = await generateText({ model: model(chatModel), messages, ...opts });
    assert.equal(next.text, 'Echo: thanks');
    assert.deepEqual(ran, ['x']);
    const types = bodyOf(next.request).input.map((it) => it.type ?? it.role);
    assert.deepEqual(types, ['user', 'function_call', 'function_call_output', store === false ? 'assistant' : 'item_reference', 'user']);
    followUpTokens.push(next.usage.inputTokens);
  }
  assert.equal(followUpTokens[0], followUpTokens[1], 'the model is sent the same context by reference and by value');
});

// providerOptions.openai.maxToolCalls is the request's max_tool_calls: it
// caps the agent's own (server-run) tool calls. With 0 the agent's add
// tool is not called and the model answers at once; with 1 the call is
// made as without the option. The Response echoes the cap.
test('maxToolCalls caps the server-run tool calls of a response', async () => {
  const prompt = 'add {"a":2,"b":3}';
  const none = await generateText({ model: model(chatModel), prompt, maxRetries: 0,
    providerOptions: { openai: { maxToolCalls: 0 } } });
  assert.equal(bodyOf(none.request).max_tool_calls, 0);
  assert.equal(none.response.body.max_tool_calls, 0);
  assert.deepEqual(none.response.body.output.map((it) => it.type), ['message']);
  assert.equal(none.text, `Echo: ${prompt}`);
  const one = await generateText({ model: model(chatModel), prompt, maxRetries: 0,
    providerOptions: { openai: { maxToolCalls: 1 } } });
  assert.deepEqual(one.response.body.output.map((it) => it.type), ['mcp_call', 'message']);
  assert.equal(one.text, 'Tool add returned: 5');
});
