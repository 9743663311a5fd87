// #/responses/{id}: finds the run holding a response
// (GET /v1/runs?response_id=) and shows it there.

import { get, query, enc } from './api.js';
import { h, replace } from './dom.js';
import { go, showError } from './nav.js';

export function responsePage(main, id) {
  const ctrl = new AbortController();
  replace(main, h('h1', {}, `Response ${id}`), h('p', { class: 'muted' }, 'Finding its run…'));
  get('/v1/runs' + query({ response_id: id, limit: 1 }), ctrl.signal).then((page) => {
    const run = page.data?.[0];
    if (!run) {
      replace(main, h('h1', {}, `Response ${id}`), h('p', {}, 'No run holds this response (or it belongs to another key).'));
      return;
    }
    go(`/runs/${enc(run.id)}?response=${enc(id)}`, { replace: true });
  }, showError);
  return () => ctrl.abort();
}
