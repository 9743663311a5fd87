// End-to-end test of the Conversations API with the official `openai` npm
// package: create a conversation, two turns naming it, list its items,
// delete one, and a third turn sees the history without it. The model
// "history" answers with the history it was given ("role:text|...").
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const client = new OpenAI({
  baseURL: process.env.SUPERSTEP_BASE_URL,
  apiKey: process.env.SUPERSTEP_API_KEY ?? 'test',
  maxRetries: 0,
});

function text(item) {
  if (item.type !== 'message') return item.type;
  return `${item.role}:${item.content.map((c) => c.text).join('')}`;
}

test('a conversation through client.conversations and responses.create({conversation})', async () => {
  const conv = await client.conversations.create({ metadata: { topic: 'node' } });
  assert.match(conv.id, /^conv_/);
  assert.equal(conv.metadata.topic, 'node');
  const turn = async (input) => {
    const r = await client.responses.create({ model: 'history', input, conversation: conv.id });
    assert.equal(r.status, 'completed');
    assert.equal(r.conversation.id, conv.id);
    return r.output_text;
  };
  assert.equal(await turn('hi'), 'user:hi');
  assert.equal(await turn('again'), 'user:hi|assistant:user:hi|user:again');

  const items = [];
  for await (const item of client.conversations.items.list(conv.id, { order: 'asc', limit: 3 })) items.push(item);
  assert.deepEqual(items.map(text), ['user:hi', 'assistant:user:hi', 'user:again', 'assistant:user:hi|assistant:user:hi|user:again']);

  const after = await client.conversations.items.delete(items[1].id, { conversation_id: conv.id });
  assert.equal(after.id, conv.id);
  assert.equal(await turn('third'), 'user:hi|user:again|assistant:user:hi|assistant:user:hi|user:again|user:third');

  // An unknown conversation is a 404 naming the parameter.
  await assert.rejects(client.responses.create({ model: 'history', input: 'x', conversation: 'conv_unknown' }),
    (err) => err.status === 404 && err.param === 'conversation');
  const deleted = await client.conversations.delete(conv.id);
  assert.deepEqual(deleted, { id: conv.id, object: 'conversation.deleted', deleted: true });
});
