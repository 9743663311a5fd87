// The console's entry point: the API key form, the notice line and a
// router over location.hash (#/runs, #/runs/{id}, #/runs/{id}/checkpoints,
// #/responses/{id}). Each page is a function that fills <main> and returns
// a function that stops its timers and streams.

import { key } from './api.js';
import { notify, inform } from './nav.js';
import { runsPage } from './runs.js';
import { runPage } from './run.js';
import { checkpointsPage } from './checkpoints.js';
import { responsePage } from './response.js';

const main = document.getElementById('main');
let stopPage = null;

const routes = [
  [/^\/runs\/?$/, (m, q) => runsPage(main, q)],
  [/^\/runs\/([^/]+)\/checkpoints$/, (m, q) => checkpointsPage(main, decodeURIComponent(m[1]), q)],
  [/^\/runs\/([^/]+)$/, (m, q) => runPage(main, decodeURIComponent(m[1]), q)],
  [/^\/responses\/([^/]+)$/, (m, q) => responsePage(main, decodeURIComponent(m[1]), q)],
];

function route() {
  const hash = location.hash.startsWith('#/') ? location.hash.slice(1) : '/runs';
  const [path, qs] = hash.split('?');
  const q = new URLSearchParams(qs || '');
  if (stopPage) stopPage();
  stopPage = null;
  notify('');
  inform('');
  for (const [re, page] of routes) {
    const m = path.match(re);
    if (m) {
      stopPage = page(m, q) || null;
      focusHeading();
      return;
    }
  }
  main.replaceChildren();
  const h1 = document.createElement('h1');
  h1.textContent = 'Not found';
  main.append(h1);
}

// focusHeading moves focus to the new page's heading, so keyboard and
// screen reader users start at the top of what changed.
function focusHeading() {
  const h1 = main.querySelector('h1');
  if (h1) {
    h1.tabIndex = -1;
    h1.focus({ preventScroll: true });
    document.title = `${h1.textContent} · superstep`;
  }
}

function setupKey() {
  const form = document.getElementById('key-form');
  const input = document.getElementById('api-key');
  const state = document.getElementById('key-state');
  const show = () => {
    state.textContent = key.get() ? 'key set for this tab' : 'no key';
  };
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    key.set(input.value.trim());
    input.value = '';
    show();
    route();
  });
  document.getElementById('key-forget').addEventListener('click', () => {
    key.set('');
    input.value = '';
    show();
    route();
  });
  show();
}

document.querySelector('.skip').addEventListener('click', (e) => {
  e.preventDefault();
  main.focus();
});
setupKey();
window.addEventListener('hashchange', route);
route();
