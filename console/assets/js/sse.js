// Server-sent events, read incrementally. The console streams with fetch
// and a stream reader (EventSource cannot send an Authorization header), so
// it parses the text/event-stream framing itself. No DOM: unit-tested by
// node:test in e2e/browser.

// SSEParser turns chunks of an event stream into frames {event, data}.
// Comment lines (":" keep-alives) and unknown fields are ignored; a frame
// ends at a blank line; "\n" and "\r\n" line ends are both accepted, even
// when a chunk ends between the two.
export class SSEParser {
  constructor() {
    this.buf = '';
    this.event = '';
    this.data = [];
  }

  // feed takes the next chunk of text and returns the frames it completed.
  feed(chunk) {
    this.buf += chunk;
    const frames = [];
    let nl;
    while ((nl = this.buf.indexOf('\n')) >= 0) {
      let line = this.buf.slice(0, nl);
      this.buf = this.buf.slice(nl + 1);
      if (line.endsWith('\r')) line = line.slice(0, -1);
      this.line(line, frames);
    }
    return frames;
  }

  line(line, frames) {
    if (line === '') {
      if (this.data.length > 0) {
        frames.push({ event: this.event || 'message', data: this.data.join('\n') });
      }
      this.event = '';
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'event') this.event = value;
    else if (field === 'data') this.data.push(value);
  }
}

// decodeFrame turns one frame into {done}, {error} or {event}: "[DONE]"
// ends the stream; an "error" frame, or data with a top-level "error" key,
// is an error (as the OpenAI SDKs read it); anything else is an event.
export function decodeFrame(frame) {
  if (frame.data === '[DONE]') return { done: true };
  let obj;
  try {
    obj = JSON.parse(frame.data);
  } catch {
    return { error: { message: 'malformed event data: ' + frame.data.slice(0, 80) } };
  }
  if (obj === null || typeof obj !== 'object') {
    return { error: { message: 'malformed event data: ' + frame.data.slice(0, 80) } };
  }
  if (frame.event === 'error' || obj.type === 'error' || (obj.error && !obj.type)) {
    const e = obj.error && typeof obj.error === 'object' ? obj.error : obj;
    return { error: { message: e.message || 'stream error', code: e.code || null } };
  }
  return { event: obj };
}

// terminalTypes are the events after which a response's stream ends.
export const terminalTypes = new Set(['response.completed', 'response.failed', 'response.incomplete', 'response.cancelled']);
