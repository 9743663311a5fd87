// The console's client of the superstep API: JSON calls with the user's
// key, and response streams read with fetch (EventSource cannot send an
// Authorization header).

import { SSEParser, decodeFrame, terminalTypes } from './sse.js';

const keyName = 'superstep.apiKey';

// The key lives in sessionStorage: it is gone when the tab closes, and no
// other site can read it.
export const key = {
  get: () => sessionStorage.getItem(keyName) || '',
  set: (k) => (k ? sessionStorage.setItem(keyName, k) : sessionStorage.removeItem(keyName)),
};

// ApiError is an OpenAI-format error reply (or a network failure, status 0).
export class ApiError extends Error {
  constructor(status, body) {
    const e = body?.error || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || null;
    this.param = e.param || null;
    this.type = e.type || null;
  }
}

function headers(extra) {
  const h = { ...extra };
  const k = key.get();
  if (k) h.Authorization = `Bearer ${k}`;
  return h;
}

// call sends a request and returns the decoded JSON reply, or throws an
// ApiError.
export async function call(method, path, body, signal) {
  let res;
  try {
    res = await fetch(path, {
      method,
      signal,
      headers: headers(body === undefined ? {} : { 'Content-Type': 'application/json' }),
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, { error: { message: `cannot reach the server: ${err.message}` } });
  }
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) throw new ApiError(res.status, json);
  return json;
}

export const get = (path, signal) => call('GET', path, undefined, signal);
export const post = (path, body, signal) => call('POST', path, body ?? {}, signal);

// query builds "?a=1&b=2" from the set values of params.
export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v !== null && v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s ? '?' + s : '';
}

export const enc = encodeURIComponent;

// stream reads the events of response id after sequence number `after`
// (-1 or null: from the first) and calls onEvent for each, until the
// terminal event, the end of the stream or signal's abort. A connection
// that drops before the terminal event is resumed after the last event
// seen (with backoff, up to `retries` times in a row): the numbers are the
// response's own, so nothing is shown twice or skipped. It returns
// {terminal: bool, last: number}.
export async function stream(id, { after = null, signal, onEvent, retries = 5 }) {
  let last = after ?? -1;
  let failures = 0;
  for (;;) {
    try {
      const r = await streamOnce(id, last, signal, (ev) => {
        last = ev.sequence_number;
        failures = 0;
        onEvent(ev);
      });
      if (r.terminal || r.done) return { terminal: r.terminal, last };
    } catch (err) {
      const transient = err instanceof ApiError && !err.inStream && (err.status === 0 || err.status >= 500);
      if (!transient) throw err;
      if (++failures > retries) throw err;
    }
    await sleep(Math.min(250 * 2 ** failures, 4000), signal);
  }
}

async function streamOnce(id, after, signal, onEvent) {
  const path = `/v1/responses/${enc(id)}?stream=true` + (after >= 0 ? `&starting_after=${after}` : '');
  let res;
  try {
    res = await fetch(path, { signal, headers: headers({ Accept: 'text/event-stream' }) });
  } catch (err) {
    if (err.name === 'AbortError') throw err;
    throw new ApiError(0, { error: { message: `cannot reach the server: ${err.message}` } });
  }
  if (!res.ok) {
    let json = null;
    try {
      json = await res.json();
    } catch {
      json = null;
    }
    throw new ApiError(res.status, json);
  }
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  const parser = new SSEParser();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return { terminal: false, done: false };
      for (const frame of parser.feed(value)) {
        const d = decodeFrame(frame);
        if (d.done) return { terminal: false, done: true };
        if (d.error) {
          const err = new ApiError(200, { error: d.error }); // the server's word on this stream: not retried
          err.inStream = true;
          throw err;
        }
        onEvent(d.event);
        if (terminalTypes.has(d.event.type)) return { terminal: true };
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

// sleep waits ms, or rejects with an AbortError when signal aborts.
export function sleep(ms, signal) {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(new DOMException('aborted', 'AbortError'));
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      reject(new DOMException('aborted', 'AbortError'));
    }, { once: true });
  });
}
