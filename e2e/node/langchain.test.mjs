// End-to-end test of superstep with LangChain JS (`@langchain/openai`
// ChatOpenAI on the Responses API, useResponsesApi: true).
// SUPERSTEP_BASE_URL names the server's API base and SUPERSTEP_CHAT_MODEL a
// plain conversation agent on the local model server (it answers
// "Echo: <last user message>", calls its add tool when the message names
// it, and its usage counts one token per word of every message it was
// sent); TestNodeClient starts the server and runs this file.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ChatOpenAI } from '@langchain/openai';
import { HumanMessage, ToolMessage } from '@langchain/core/messages';
import { tool } from '@langchain/core/tools';
import { z } from 'zod';

const baseURL = process.env.SUPERSTEP_BASE_URL;
const chatModel = process.env.SUPERSTEP_CHAT_MODEL;
if (!baseURL || !chatModel) {
  throw new Error('SUPERSTEP_BASE_URL and SUPERSTEP_CHAT_MODEL must be set');
}

// requests records the body of every request LangChain sends.
const requests = [];
async function recordingFetch(url, init) {
  if (init?.body) requests.push(JSON.parse(init.body));
  return fetch(url, init);
}

const chat = (model) => new ChatOpenAI({
  model, apiKey: process.env.SUPERSTEP_API_KEY ?? 'test', useResponsesApi: true, maxRetries: 0,
  configuration: { baseURL, fetch: recordingFetch },
});

// words counts the local model's tokens of a text (it splits at spaces).
const words = (s) => s.split(/ +/).filter(Boolean).length;

// textOf joins the text blocks of a message's content.
const textOf = (m) => (typeof m.content === 'string' ? m.content
  : m.content.filter((b) => b.type === 'text').map((b) => b.text).join(''));

// noToolCalls checks that LangChain saw no tool call it should run.
function noToolCalls(m) {
  assert.deepEqual(m.tool_calls ?? [], []);
  assert.deepEqual(m.invalid_tool_calls ?? [], []);
  assert.deepEqual(m.tool_call_chunks ?? [], []);
}

test('invoke returns a workflow\'s outputs as text blocks', async () => {
  const m = await chat('demo.two-outputs').invoke('x');
  assert.deepEqual(m.content.map((b) => b.text), ['first-2', 'second-2', 'done']);
  assert.equal(m.response_metadata.status, 'completed');
  assert.match(m.id, /^resp_/);
  noToolCalls(m);
});

test('stream yields an LLM workflow token by token', async () => {
  const topic = 'a haiku about durable logs';
  const chunks = [];
  for await (const c of await chat('demo.writer-reviewer').stream(topic)) chunks.push(c);
  const draft = `Echo: ${topic}`;
  const final = `Echo: Draft to review:\n\n${draft}`;
  const texts = chunks.map(textOf).filter((t) => t !== '');
  assert.ok(texts.length >= words(draft) + words(final), `${texts.length} text chunks`);
  const whole = chunks.reduce((a, c) => a.concat(c));
  assert.equal(textOf(whole), draft + final);
  noToolCalls(whole);
  assert.ok(whole.usage_metadata.output_tokens >= words(draft) + words(final), JSON.stringify(whole.usage_metadata));
});

test('demo.tools: the server-run tool call is no tool call for LangChain', async () => {
  const prompt = 'What is 6 times 7? calculate {"a":6,"op":"*","b":7}';
  const m = await chat('demo.tools').invoke(prompt);
  noToolCalls(m);
  assert.equal(textOf(m), 'Tool calculate returned: 42');
  // LangChain keeps the item among the response's tool outputs.
  const outs = m.additional_kwargs.tool_outputs ?? [];
  assert.deepEqual(outs.map((o) => [o.type, o.name, o.arguments, o.output]),
    [['mcp_call', 'calculate', '{"a":6,"op":"*","b":7}', '42']]);

  const chunks = [];
  for await (const c of await chat('demo.tools').stream(prompt)) chunks.push(c);
  const whole = chunks.reduce((a, c) => a.concat(c));
  noToolCalls(whole);
  assert.equal(textOf(whole), 'Tool calculate returned: 42');
});

test('a conversation continues by previous_response_id and an earlier response branches', async () => {
  const model = chat(chatModel);
  const first = await model.invoke('hello there');
  assert.equal(textOf(first), 'Echo: hello there');
  const system = first.usage_metadata.input_tokens - words('hello there');
  assert.ok(system > 0, `input tokens ${first.usage_metadata.input_tokens}`);

  const second = await model.invoke('second turn', { previous_response_id: first.id });
  assert.equal(requests.at(-1).previous_response_id, first.id);
  assert.equal(textOf(second), 'Echo: second turn');
  assert.equal(second.usage_metadata.input_tokens, system + words('hello there Echo: hello there second turn'));

  const branch = await model.invoke('another way', { previous_response_id: first.id });
  assert.equal(textOf(branch), 'Echo: another way');
  assert.equal(branch.usage_metadata.input_tokens, system + words('hello there Echo: hello there another way'));
});

test('a stateless conversation resends the whole history, server-run tool calls included', async () => {
  const model = chat(chatModel);
  // Turn 1: the agent runs its own add tool.
  const first = await model.invoke('add {"a":2,"b":3}');
  noToolCalls(first);
  assert.equal(textOf(first), 'Tool add returned: 5');
  // Turn 2 by history: LangChain resends turn 1's output items as they
  // came, the mcp_call item among them.
  const history = [new HumanMessage('add {"a":2,"b":3}'), first, new HumanMessage('thanks')];
  const byHistory = await model.invoke(history);
  const sent = requests.at(-1);
  assert.equal(textOf(byHistory), 'Echo: thanks');
  assert.equal(sent.previous_response_id, undefined);
  assert.deepEqual(sent.input.map((it) => it.type), ['message', 'mcp_call', 'message', 'message']);
  noToolCalls(byHistory);

  // The agent was sent turn 1 whole (message, call, result, answer) and
  // the new message.
  const alone = await model.invoke('thanks');
  const turn1 = words('add {"a":2,"b":3}') + words('{"a":2,"b":3}') + words('5') + words('Tool add returned: 5');
  assert.equal(byHistory.usage_metadata.input_tokens, alone.usage_metadata.input_tokens + turn1);

  // The same turn by previous_response_id sends the model the same
  // context: the conversation's memory keeps the agent's own tool calls
  // with their results, as the replayed history has them.
  const byId = await model.invoke('thanks', { previous_response_id: first.id });
  assert.equal(textOf(byId), 'Echo: thanks');
  assert.equal(byId.usage_metadata.input_tokens, byHistory.usage_metadata.input_tokens, JSON.stringify(byId.usage_metadata));
});

// lookupOrder is a client tool: LangChain runs it, the server never does.
function lookupOrder(ran) {
  return tool(async ({ id }) => { ran.push(id); return `order ${id} shipped`; }, {
    name: 'lookup_order', description: "Looks an order's status up.", schema: z.object({ id: z.string() }),
  });
}

// The local model calls a tool the last user message names, with the JSON
// object in it as arguments, until its result is in.
const orderPrompt = 'where is my order? lookup_order {"id":"A1"}';

test('a client tool loop: bindTools, run the tool calls, send the history with a ToolMessage', async () => {
  const ran = [];
  const lookup = lookupOrder(ran);
  const model = chat(chatModel).bindTools([lookup]);
  const history = [new HumanMessage(orderPrompt)];
  const ai = await model.invoke(history);
  assert.deepEqual(ai.tool_calls.map((c) => [c.name, c.args]), [['lookup_order', { id: 'A1' }]]);
  assert.deepEqual(requests.at(-1).tools.map((t) => t.name), ['lookup_order']);
  assert.deepEqual(ran, []);
  history.push(ai);
  for (const call of ai.tool_calls) history.push(await lookup.invoke(call));
  assert.ok(history.at(-1) instanceof ToolMessage);
  assert.deepEqual(ran, ['A1']);

  const answer = await model.invoke(history);
  const sent = requests.at(-1);
  assert.equal(sent.previous_response_id, undefined);
  assert.deepEqual(sent.input.map((it) => it.type ?? it.role), ['message', 'function_call', 'function_call_output'],
    JSON.stringify(sent.input));
  assert.equal(textOf(answer), 'Tool lookup_order returned: order A1 shipped');
  noToolCalls(answer);
  assert.equal(answer.response_metadata.status, 'completed');
});

test('a client tool loop by previous_response_id: only the ToolMessage is sent', async () => {
  const ran = [];
  const lookup = lookupOrder(ran);
  const model = chat(chatModel).bindTools([lookup]);
  const ai = await model.invoke(orderPrompt);
  assert.equal(ai.tool_calls.length, 1);
  const result = await lookup.invoke(ai.tool_calls[0]);
  const answer = await model.invoke([result], { previous_response_id: ai.id });
  const sent = requests.at(-1);
  assert.equal(sent.previous_response_id, ai.id);
  assert.deepEqual(sent.input.map((it) => [it.type, it.call_id]), [['function_call_output', ai.tool_calls[0].id]]);
  assert.equal(textOf(answer), 'Tool lookup_order returned: order A1 shipped');
  noToolCalls(answer);
  assert.deepEqual(ran, ['A1']);
  // The model was sent what the same turn sent as history gives it.
  const byHistory = await model.invoke([new HumanMessage(orderPrompt), ai, result]);
  assert.equal(textOf(byHistory), textOf(answer));
  assert.equal(answer.usage_metadata.input_tokens, byHistory.usage_metadata.input_tokens);

  // The conversation goes on from the answer: the model was sent the turn
  // with the call and its output.
  const next = await model.invoke('thanks', { previous_response_id: answer.id });
  assert.equal(textOf(next), 'Echo: thanks');
  noToolCalls(next);
});
