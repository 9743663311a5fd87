// A few helpers to build DOM nodes without HTML strings (so no text from
// the API is ever parsed as markup).

const svgNS = 'http://www.w3.org/2000/svg';

// h makes an element: attrs are set as attributes, except on* (listeners),
// class, text (textContent) and boolean false/null/undefined (skipped);
// children are nodes, strings, or arrays of them (null skipped).
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

// s is h for SVG elements.
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(svgNS, tag), attrs, children);
}

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'text') el.textContent = v;
    else if (k === 'class' && el instanceof HTMLElement) el.className = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

// replace puts children in place of el's.
export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
}

// time formats Unix seconds as a local date and time.
export function time(sec) {
  if (sec === null || sec === undefined) return '—';
  const d = new Date(sec * 1000);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// relative says how long before now Unix seconds were, or how long after.
export function relative(sec) {
  if (sec === null || sec === undefined) return '';
  const d = Math.round(sec - Date.now() / 1000);
  if (d === 0) return 'now';
  const abs = Math.abs(d);
  const span = abs < 120 ? `${abs} s` : abs < 7200 ? `${Math.round(abs / 60)} min` : `${Math.round(abs / 3600)} h`;
  return d > 0 ? `in ${span}` : `${span} ago`;
}

// bytes formats a size.
export function bytes(n) {
  if (n === null || n === undefined) return '—';
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

// badge is a status label; its class colours it, its text says it.
export function badge(status) {
  return h('span', { class: `badge badge-${status || 'none'}` }, status || '—');
}
