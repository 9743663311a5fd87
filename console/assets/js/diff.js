// Diffs of checkpoints: which parts a checkpoint changed against its
// parent, and a line diff of a part's contents when the API gives them.
// No DOM: unit-tested by node:test in e2e/browser.

// partsDiff compares a checkpoint's parts with its parent's. With the
// parent at hand a part is added, removed, changed (the API's changed flag,
// or a different size) or same; without it (the parent was pruned, or it
// is the first) the changed flag alone says changed or same, and parts the
// parent had but this one lacks cannot be known.
export function partsDiff(cp, parent) {
  const before = new Map((parent?.parts || []).map((p) => [p.name, p]));
  const rows = [];
  for (const p of cp.parts || []) {
    const q = before.get(p.name);
    let status;
    if (!parent) status = p.changed ? 'changed' : 'same';
    else if (!q) status = 'added';
    else status = p.changed || q.size !== p.size ? 'changed' : 'same';
    rows.push({ name: p.name, status, size: p.size, parentSize: q ? q.size : null, part: p, parentPart: q || null });
    before.delete(p.name);
  }
  if (parent) {
    for (const q of before.values()) {
      rows.push({ name: q.name, status: 'removed', size: null, parentSize: q.size, part: null, parentPart: q });
    }
  }
  return rows.sort((a, b) => a.name.localeCompare(b.name));
}

// pretty renders a part's text for diffing: JSON indented, else as is.
export function pretty(text) {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

// maxCells caps the dynamic-programming table of lineDiff; a larger middle
// (after common lines at both ends are cut) is shown as all removed and
// all added rather than freezing the page.
const maxCells = 4_000_000;

// lineDiff returns the lines of a and b as [{op, text}] with op ' ' (in
// both), '-' (only in a) or '+' (only in b): a longest common subsequence
// of the lines between their common prefix and suffix.
export function lineDiff(a, b) {
  const x = a === '' ? [] : a.split('\n');
  const y = b === '' ? [] : b.split('\n');
  let pre = 0;
  while (pre < x.length && pre < y.length && x[pre] === y[pre]) pre++;
  let suf = 0;
  while (suf < x.length - pre && suf < y.length - pre && x[x.length - 1 - suf] === y[y.length - 1 - suf]) suf++;
  const xm = x.slice(pre, x.length - suf);
  const ym = y.slice(pre, y.length - suf);
  const out = x.slice(0, pre).map((t) => ({ op: ' ', text: t }));
  if (xm.length * ym.length > maxCells) {
    out.push(...xm.map((t) => ({ op: '-', text: t })), ...ym.map((t) => ({ op: '+', text: t })));
  } else {
    out.push(...lcsDiff(xm, ym));
  }
  out.push(...x.slice(x.length - suf).map((t) => ({ op: ' ', text: t })));
  return out;
}

function lcsDiff(x, y) {
  const n = x.length;
  const m = y.length;
  // len[i*(m+1)+j] = LCS length of x[i:] and y[j:].
  const len = new Uint32Array((n + 1) * (m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) {
      len[i * (m + 1) + j] = x[i] === y[j] ? len[(i + 1) * (m + 1) + j + 1] + 1
        : Math.max(len[(i + 1) * (m + 1) + j], len[i * (m + 1) + j + 1]);
    }
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) {
      out.push({ op: ' ', text: x[i] });
      i++;
      j++;
    } else if (len[(i + 1) * (m + 1) + j] >= len[i * (m + 1) + j + 1]) {
      out.push({ op: '-', text: x[i++] });
    } else {
      out.push({ op: '+', text: y[j++] });
    }
  }
  while (i < n) out.push({ op: '-', text: x[i++] });
  while (j < m) out.push({ op: '+', text: y[j++] });
  return out;
}
