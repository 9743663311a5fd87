// Browser tests of the console (/ui) in headless Chromium, driven by
// playwright-core, against the real `superstep serve` hosts that e2e's
// TestConsoleBrowser starts on one PostgreSQL database (with an API key,
// every checkpoint kept, a 1.5 s lease). Environment: SUPERSTEP_URL (host-a,
// which the page talks to), SUPERSTEP_VICTIM_URL and SUPERSTEP_VICTIM_PID
// (host-b, which the takeover test kills), SUPERSTEP_API_KEY,
// CHROMIUM_PATH, SCREENSHOT_DIR (where each page's screenshot is written).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const base = process.env.SUPERSTEP_URL;
const apiKey = process.env.SUPERSTEP_API_KEY;
const shots = process.env.SCREENSHOT_DIR;
const victimURL = process.env.SUPERSTEP_VICTIM_URL;
const victimPid = Number(process.env.SUPERSTEP_VICTIM_PID);
if (!base || !apiKey || !process.env.CHROMIUM_PATH || !shots || !victimURL || !victimPid) {
  throw new Error('set SUPERSTEP_URL, SUPERSTEP_VICTIM_URL, SUPERSTEP_VICTIM_PID, SUPERSTEP_API_KEY, CHROMIUM_PATH and SCREENSHOT_DIR (TestConsoleBrowser does)');
}
mkdirSync(shots, { recursive: true });

let browser;
let page;
const pageErrors = [];
let expect400 = false;

before(async () => {
  browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH, args: ['--no-sandbox'] });
  // A laptop screen.
  const context = await browser.newContext({ viewport: { width: 1366, height: 800 } });
  page = await context.newPage();
  page.setDefaultTimeout(15_000);
  page.on('pageerror', (err) => pageErrors.push(`pageerror: ${err.message}`));
  page.on('console', (msg) => {
    // A 401 before the key is entered is the test's own doing, and so is
    // the 400 refusing to stream a response created without stream.
    const expected = msg.text().includes('status of 401') || (expect400 && msg.text().includes('status of 400'));
    if (msg.type() === 'error' && !expected) pageErrors.push(`console: ${msg.text()}`);
  });
});

after(async () => {
  await browser?.close();
});

const shot = (name) => page.screenshot({ path: join(shots, `${name}.png`), fullPage: true });

async function api(method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json();
  assert.ok(res.ok, `${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

// start creates a background response with stream:true (so it can be
// streamed again later) and returns its id from its first event; the
// response runs on after this connection is dropped.
async function start(model, metadata, host = base) {
  const ctrl = new AbortController();
  const res = await fetch(host + '/v1/responses', {
    method: 'POST', signal: ctrl.signal,
    headers: { Authorization: `Bearer ${apiKey}`, 'Content-Type': 'application/json' },
    body: JSON.stringify({ model, input: 'hello', background: true, stream: true, metadata }),
  });
  assert.equal(res.status, 200);
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    assert.ok(!done, 'stream ended before response.created');
    buf += value;
    const m = buf.match(/"type":"response\.created".*?"id":"(resp_[^"]+)"/);
    if (m) {
      ctrl.abort();
      return m[1];
    }
  }
}

const status = async (id) => (await api('GET', `/v1/responses/${id}`)).status;
const stepCount = () => page.locator('#steps > li.step').count();

let slowId; // demo.silent, 6 supersteps, completed by the timeline test

test('runs list: a key is asked for, then the runs show', async () => {
  const echo = await start('demo.echo', {});
  await page.goto(base + '/ui/');
  await page.getByRole('alert').filter({ hasText: 'API key' }).waitFor();
  await page.getByLabel('API key').fill(apiKey);
  await page.getByRole('button', { name: 'Use key' }).click();
  const runs = await api('GET', `/v1/runs?response_id=${echo}`);
  const row = page.locator(`#runs-table tr[data-run="${runs.data[0].id}"]`);
  await row.waitFor();
  assert.match(await row.textContent(), /demo\.echo/);
  // Live status: a run started now shows up running, then completed,
  // without a reload (the page polls its one page of runs).
  const slow = await start('demo.silent', { steps: '4', step_delay_ms: '400' });
  const slowRun = (await api('GET', `/v1/runs?response_id=${slow}`)).data[0].id;
  await page.locator(`#runs-table tr[data-run="${slowRun}"] .badge`, { hasText: 'in_progress' }).waitFor();
  await page.locator(`#runs-table tr[data-run="${slowRun}"] .badge`, { hasText: 'completed' }).waitFor();
  // Filters: runs held by host-a now (the running one), then by a host with none.
  const slow2 = await start('demo.silent', { steps: '15', step_delay_ms: '400' }); // 6 s: held while the filter is applied
  const slow2Run = (await api('GET', `/v1/runs?response_id=${slow2}`)).data[0].id;
  await page.getByLabel('Held by host').fill('host-a');
  await page.getByRole('button', { name: 'Apply' }).click();
  await page.locator(`#runs-table tr[data-run="${slow2Run}"]`).waitFor();
  assert.match(await page.locator(`#runs-table tr[data-run="${slow2Run}"]`).textContent(), /host-a · epoch 1/);
  await page.getByLabel('Held by host').fill('no-such-host');
  await page.getByRole('button', { name: 'Apply' }).click();
  await page.locator('#runs-table tbody', { hasText: 'No runs.' }).waitFor();
  assert.match(page.url(), /host=no-such-host/);
  // Every form control is labelled.
  const unlabelled = await page.evaluate(() => [...document.querySelectorAll('input, select, textarea')]
    .filter((el) => !el.labels?.length && !el.getAttribute('aria-label')).map((el) => el.id || el.name));
  assert.deepEqual(unlabelled, []);
  await shot('runs');
});

test('timeline: a streaming response\'s supersteps appear live, the graph lights its executors', async () => {
  slowId = await start('demo.silent', { steps: '6', step_delay_ms: '500' });
  await page.goto(`${base}/ui/#/responses/${slowId}`);
  await page.locator('#steps > li.step').first().waitFor();
  // Seen while it still runs: the page did not wait for the end.
  const early = await stepCount();
  assert.equal(await status(slowId), 'in_progress', `the response ended before the page showed ${early} steps`);
  await page.waitForFunction((n) => document.querySelectorAll('#steps > li.step').length > n, early);
  assert.ok(early < 7, `${early} supersteps shown at first, want fewer than all 7`);
  await page.locator('h1 .badge', { hasText: 'completed' }).waitFor();
  assert.equal(await stepCount(), 7);
  await page.locator('#stream-state', { hasText: 'The stream has ended.' }).waitFor();
  // The last superstep yielded the output: its events hold the item.
  await page.locator('#step-7-head').click();
  await page.locator('#step-7-body .item-text', { hasText: 'done after 6' }).waitFor();
  assert.ok(await page.locator('svg.graph .node.lit').count() >= 1, 'no executor lit in the graph');
  // Keyboard: arrows move between supersteps, Enter opens one.
  await page.locator('#step-1-head').focus();
  await page.keyboard.press('ArrowDown');
  assert.equal(await page.evaluate(() => document.activeElement.id), 'step-2-head');
  await page.keyboard.press('Enter');
  await page.locator('#step-2-head[aria-expanded="true"]').waitFor();
  await page.locator('#graph-caption', { hasText: /^Step 2:/ }).waitFor();
  await shot('timeline');
});

test('replay: the stream after sequence N, as a resuming client gets it', async () => {
  await page.getByLabel('Replay the stream after sequence number').fill('1');
  await page.getByRole('button', { name: 'Replay' }).click();
  await page.locator('#replay-state', { hasText: 'through the terminal event' }).waitFor();
  const seqs = await page.locator('#replay-list li').evaluateAll((lis) => lis.map((li) => li.value));
  assert.equal(seqs[0], 2);
  assert.deepEqual(seqs, seqs.map((_, i) => 2 + i), 'contiguous sequence numbers');
  await shot('replay');
});

test('checkpoints: history with the diff of changed parts', async () => {
  await page.getByRole('link', { name: 'Checkpoints' }).click();
  await page.locator('#checkpoints tbody tr').first().waitFor();
  const steps = await page.locator('#checkpoints tbody tr').evaluateAll((trs) => trs.map((tr) => Number(tr.dataset.step)));
  for (const s of [1, 2, 3, 7]) assert.ok(steps.includes(s), `checkpoint of step ${s} listed (${steps})`);
  await page.getByRole('button', { name: 'Diff of step 2' }).click();
  await page.locator('#diff-title', { hasText: 'Step 2 against step 1' }).waitFor();
  assert.ok(await page.locator('#checkpoint-diff .change-changed').count() >= 1, 'no part shown as changed');
  // The parts' contents (include=data) give a line diff: a removed and an added line.
  await page.locator('#checkpoint-diff .content-diff').first().waitFor();
  assert.ok(await page.locator('#checkpoint-diff .content-diff .line-del').count() >= 1, 'no line removed in the content diff');
  assert.ok(await page.locator('#checkpoint-diff .content-diff .line-add').count() >= 1, 'no line added in the content diff');
  await shot('checkpoints');
});

test('fork from step 2: the fork runs to completion as a new run', async () => {
  const original = (await api('GET', `/v1/runs?response_id=${slowId}`)).data[0];
  await page.getByRole('button', { name: 'Fork from step 2' }).click();
  const dialog = page.getByRole('dialog');
  await dialog.waitFor();
  assert.equal(await dialog.getByLabel('From the checkpoint of').inputValue(), '2');
  await dialog.getByRole('button', { name: 'Fork' }).click();
  await page.waitForFunction((id) => location.hash.startsWith('#/runs/') && !location.hash.includes(id), original.id);
  await page.locator('#run-summary', { hasText: `${original.id}, step 2` }).waitFor();
  await page.locator('h1 .badge', { hasText: 'completed' }).waitFor();
  // The fork ran supersteps 3..7 from step 2's state and gave the same output.
  await page.locator('.step-head', { hasText: 'Step 7' }).click();
  await page.locator('.step-body .item-text', { hasText: 'done after 6' }).first().waitFor();
  const forkRun = decodeURIComponent(page.url().match(/#\/runs\/([^?]+)/)[1]);
  const fork = await api('GET', `/v1/runs/${forkRun}`);
  assert.deepEqual(fork.forked_from, { run_id: original.id, step: 2 });
  assert.equal(fork.status, 'completed');
  assert.equal((await api('GET', `/v1/runs/${original.id}`)).last_step, original.last_step, 'the original run is untouched');
  await shot('fork');
});

test('cancel a running response', async () => {
  const id = await start('demo.silent', { steps: '200', step_delay_ms: '200' });
  await page.goto(`${base}/ui/#/responses/${id}`);
  await page.locator('#steps > li.step').first().waitFor();
  const cancel = page.getByRole('button', { name: 'Cancel response' });
  assert.ok(await cancel.isEnabled());
  await cancel.click();
  await page.locator('h1 .badge', { hasText: 'cancelled' }).waitFor();
  await page.getByRole('status').filter({ hasText: `Cancel sent: ${id} is cancelled.` }).waitFor();
  assert.equal(await status(id), 'cancelled');
  assert.ok(await cancel.isDisabled(), 'cancel stays enabled on a cancelled response');
  await shot('cancel');
});

test('takeover: the run moves to the surviving host, and its timeline goes on', async () => {
  const id = await start('demo.silent', { steps: '10', step_delay_ms: '300' }, victimURL);
  await page.goto(`${base}/ui/#/responses/${id}`);
  await page.locator('#lease-owner', { hasText: 'host-b' }).waitFor();
  await page.locator('#steps > li.step').first().waitFor();
  assert.equal(await status(id), 'in_progress');
  process.kill(victimPid, 'SIGKILL');
  await page.locator('#lease-owner', { hasText: 'host-a' }).waitFor({ timeout: 30_000 });
  await page.locator('#lease-history tbody tr', { hasText: 'host-a' }).filter({ hasText: 'new host' }).waitFor();
  await page.locator('h1 .badge', { hasText: 'completed' }).waitFor({ timeout: 30_000 });
  assert.equal(await stepCount(), 11);
  assert.equal(await page.locator('#steps .takeover-tag').count(), 1, 'the first commit under host-a is marked');
  assert.match(await page.locator('#takeover-steps').textContent(), /host-b → host-a/);
  await page.locator('#step-11-head').click();
  await page.locator('#step-11-body .item-text', { hasText: 'done after 10' }).waitFor();
  await shot('takeover');
});

test('a response created without stream shows its output (it has no event stream to read)', async () => {
  const r = await api('POST', '/v1/responses', { model: 'demo.two-outputs', input: 'x', background: true });
  expect400 = true;
  await page.goto(`${base}/ui/#/responses/${r.id}`);
  await page.locator('#stream-state', { hasText: 'not created with stream=true' }).waitFor();
  await page.locator('#snapshot-output .item-text', { hasText: 'second-2' }).waitFor();
  await page.locator('h1 .badge', { hasText: 'completed' }).waitFor();
  expect400 = false;
});

test('no errors on the pages', () => {
  assert.deepEqual(pageErrors, []);
});
