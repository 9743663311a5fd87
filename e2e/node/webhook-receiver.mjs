// A webhook endpoint for TestNodeWebhook (e2e/webhook_node_test.go): it
// receives one webhook from superstep's sender, verifies it with the
// node:crypto check docs/observability.md shows (verifyWebhook, copied
// there) and with the openai package's webhooks.unwrap, checks that both
// refuse a tampered body, prints the event as JSON and exits (1 on a
// failed check). Its port is the first line it prints.
import http from 'node:http';
import crypto from 'node:crypto';
import OpenAI from 'openai';

// verifyWebhook returns the event of a request whose headers and raw
// body carry a valid Standard Webhooks signature made with secret
// ("whsec_" + base64) less than toleranceSeconds ago, and throws otherwise.
export function verifyWebhook(secret, headers, body, toleranceSeconds = 300) {
  const id = headers['webhook-id'];
  const timestamp = headers['webhook-timestamp'];
  const signatures = headers['webhook-signature'];
  if (!id || !timestamp || !signatures) throw new Error('missing webhook headers');
  if (Math.abs(Date.now() / 1000 - Number(timestamp)) > toleranceSeconds) throw new Error('webhook timestamp out of tolerance');
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = crypto.createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest();
  for (const signature of signatures.split(' ')) {
    const [version, value] = signature.split(',');
    const got = Buffer.from(value ?? '', 'base64');
    if (version === 'v1' && got.length === expected.length && crypto.timingSafeEqual(got, expected)) {
      return JSON.parse(body);
    }
  }
  throw new Error('no valid webhook signature');
}

const secret = process.env.SUPERSTEP_WEBHOOK_SECRET;
const client = new OpenAI({ apiKey: 'unused', webhookSecret: secret });

async function check(headers, body) {
  const event = verifyWebhook(secret, headers, body);
  const sdk = await client.webhooks.unwrap(body, headers);
  if (sdk.id !== event.id || sdk.type !== event.type || sdk.data.id !== event.data.id || event.id !== headers['webhook-id']) {
    throw new Error(`openai's unwrap read ${JSON.stringify(sdk)}, the check ${JSON.stringify(event)}`);
  }
  let refused = 0;
  try { verifyWebhook(secret, headers, body + ' '); } catch { refused++; }
  try { await client.webhooks.unwrap(body + ' ', headers); } catch { refused++; }
  if (refused !== 2) throw new Error(`a tampered body was accepted by ${2 - refused} of the checks`);
  return event;
}

const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = Buffer.concat(chunks).toString('utf8');
  try {
    const event = await check(req.headers, body);
    res.writeHead(204).end();
    console.log(JSON.stringify(event));
  } catch (err) {
    res.writeHead(400).end();
    console.error(err.stack);
    process.exitCode = 1;
  }
  server.close();
});
server.listen(0, '127.0.0.1', () => console.log(`listening ${server.address().port}`));
