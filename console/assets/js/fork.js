// Fork a run from a checkpoint: a modal dialog that sends
// POST /v1/runs/{id}/fork in the background with stream:true (so the fork's
// response can be followed live), reads the fork's id from its first event
// and goes to the fork's run.

import { ApiError, get, query, enc, key } from './api.js';
import { h } from './dom.js';
import { go } from './nav.js';
import { SSEParser, decodeFrame } from './sse.js';

// openForkDialog asks for the step (prefilled) and an optional new input,
// then forks. steps, when given, are the steps with a kept checkpoint.
export function openForkDialog(runId, step, steps) {
  const error = h('p', { class: 'error', role: 'alert', id: 'fork-error' });
  const stepField = steps?.length
    ? h('select', { id: 'fork-step', name: 'step' }, steps.map((n) => h('option', { value: n, selected: n === step }, `step ${n}`)))
    : h('input', { id: 'fork-step', name: 'step', type: 'number', min: 0, value: step ?? 0, required: true });
  const input = h('textarea', { id: 'fork-input', name: 'input', rows: 3, placeholder: 'none: continue from the checkpoint as it is' });
  const submit = h('button', { type: 'submit', id: 'fork-submit', class: 'primary' }, 'Fork');
  const close = h('button', { type: 'button', value: 'cancel' }, 'Close');
  const dialog = h('dialog', { class: 'fork-dialog', 'aria-labelledby': 'fork-title' },
    h('form', { method: 'dialog' },
      h('h2', { id: 'fork-title' }, `Fork ${runId}`),
      h('p', { class: 'muted' }, 'A new run starts from the checkpoint; this run is left as it is.'),
      h('label', { for: 'fork-step' }, 'From the checkpoint of'), stepField,
      h('label', { for: 'fork-input' }, 'New input (optional)'), input,
      error,
      h('div', { class: 'buttons' }, submit, close)));
  close.addEventListener('click', () => dialog.close());
  dialog.addEventListener('close', () => dialog.remove());
  dialog.querySelector('form').addEventListener('submit', async (e) => {
    e.preventDefault();
    submit.disabled = true;
    error.textContent = 'Forking…';
    try {
      const body = { step: Number(stepField.value), background: true, stream: true };
      if (input.value.trim()) body.input = input.value;
      const id = await fork(runId, body);
      const page = await get('/v1/runs' + query({ response_id: id, limit: 1 }));
      dialog.close();
      go(page.data?.[0] ? `/runs/${enc(page.data[0].id)}?response=${enc(id)}` : `/responses/${enc(id)}`);
    } catch (err) {
      error.textContent = err.param ? `${err.message} (${err.param})` : err.message;
      submit.disabled = false;
    }
  });
  document.body.append(dialog);
  dialog.showModal();
  stepField.focus();
}

// fork sends the request and returns the fork's response id: from the
// JSON reply, or from the first event of a streamed one (the stream is then
// dropped; a background response runs on without it).
async function fork(runId, body) {
  const ctrl = new AbortController();
  const headers = { 'Content-Type': 'application/json', Accept: 'text/event-stream, application/json' };
  if (key.get()) headers.Authorization = `Bearer ${key.get()}`;
  const res = await fetch(`/v1/runs/${enc(runId)}/fork`, { method: 'POST', headers, body: JSON.stringify(body), signal: ctrl.signal });
  try {
    if (!(res.headers.get('Content-Type') || '').startsWith('text/event-stream')) {
      const json = await res.json().catch(() => null);
      if (!res.ok) throw new ApiError(res.status, json);
      return json.id;
    }
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    const parser = new SSEParser();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) throw new ApiError(0, { error: { message: 'the fork stream ended before its first event' } });
      for (const frame of parser.feed(value)) {
        const d = decodeFrame(frame);
        if (d.error) throw new ApiError(res.status, { error: d.error });
        if (d.event?.response?.id) return d.event.response.id;
      }
    }
  } finally {
    ctrl.abort();
  }
}
