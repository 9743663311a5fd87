// A layered layout of a workflow graph for a small SVG: executors in rows
// by their longest distance from the start (edges that close a cycle are
// set aside as back edges and drawn around the side). No DOM: unit-tested
// by node:test in e2e/browser.

export const nodeHeight = 32;
const rowGap = 40;
const colGap = 16;
const charWidth = 7.2; // of the 12px monospace label
const margin = 12;
const maxLabel = 28;
const maxLineWidth = 560;

// label is an executor id as drawn: long ids are cut with an ellipsis
// (the full id is the node's tooltip and accessible name).
export function label(id) {
  return id.length > maxLabel ? id.slice(0, maxLabel - 1) + '…' : id;
}

// layoutGraph places graph = {start, executors: [{id}], edges: [{from, to}]}
// in rows by layer (a layer wider than maxLineWidth wraps onto more rows).
// It returns {nodes: [{id, x, y, w, h, layer, line}], edges: [{from, to,
// back, far, path}], width, height}: x, y are a node's top-left corner, and path an
// SVG path from the source's bottom to the target's top (around the right
// of the drawing for a back edge or a self loop).
export function layoutGraph(graph) {
  const ids = (graph?.executors || []).map((e) => e.id);
  const known = new Set(ids);
  const edges = (graph?.edges || []).filter((e) => known.has(e.from) && known.has(e.to));
  const out = new Map(ids.map((id) => [id, []]));
  for (const e of edges) out.get(e.from).push(e.to);

  // Depth-first from the start (then from any executor not reached): an
  // edge to a node still on the stack closes a cycle.
  const state = new Map(); // 1 on stack, 2 done
  const order = [];
  const pre = []; // discovery order: the left-to-right order within a row
  const back = new Set();
  const visit = (id) => {
    state.set(id, 1);
    pre.push(id);
    for (const to of out.get(id)) {
      if (state.get(to) === 1) back.add(id + '\u0000' + to);
      else if (!state.has(to)) visit(to);
    }
    state.set(id, 2);
    order.push(id);
  };
  const roots = known.has(graph?.start) ? [graph.start, ...ids] : ids;
  for (const id of roots) if (!state.has(id)) visit(id);
  order.reverse(); // a topological order of the forward edges

  const layer = new Map(ids.map((id) => [id, 0]));
  for (const id of order) {
    for (const to of out.get(id)) {
      if (!back.has(id + '\u0000' + to)) layer.set(to, Math.max(layer.get(to), layer.get(id) + 1));
    }
  }
  const rows = [];
  for (const id of pre) (rows[layer.get(id)] ||= []).push(id);

  // A wide layer (a fan-out to 64 workers) wraps onto several lines of at
  // most maxLineWidth, so the drawing stays readable in a side panel.
  const lines = [];
  rows.forEach((row, r) => {
    let line = [];
    let w = 0;
    for (const id of row) {
      const nw = nodeWidth(id);
      if (line.length && w + colGap + nw > maxLineWidth) {
        lines.push({ layer: r, ids: line });
        line = [];
        w = 0;
      }
      w += (line.length ? colGap : 0) + nw;
      line.push(id);
    }
    if (line.length) lines.push({ layer: r, ids: line });
  });
  const nodes = new Map();
  const lineWidth = (ids) => ids.reduce((w, id) => w + nodeWidth(id), 0) + colGap * (ids.length - 1);
  const width = Math.max(0, ...lines.map((l) => lineWidth(l.ids))) + 2 * margin;
  lines.forEach((l, i) => {
    let x = margin + (width - 2 * margin - lineWidth(l.ids)) / 2;
    for (const id of l.ids) {
      const w = nodeWidth(id);
      nodes.set(id, { id, x, y: margin + i * (nodeHeight + rowGap), w, h: nodeHeight, layer: l.layer, line: i });
      x += w + colGap;
    }
  });
  const hasBack = edges.some((e) => back.has(e.from + '\u0000' + e.to) || e.from === e.to);
  const height = lines.length * (nodeHeight + rowGap) - rowGap + 2 * margin;
  const drawn = edges.map((e) => {
    const isBack = back.has(e.from + '\u0000' + e.to) || e.from === e.to;
    const a = nodes.get(e.from);
    const b = nodes.get(e.to);
    // far: it crosses other lines of nodes (a wrapped layer); drawn faint.
    return { from: e.from, to: e.to, back: isBack, far: !isBack && b.line - a.line > 1, path: edgePath(a, b, isBack, width) };
  });
  return { nodes: [...nodes.values()], edges: drawn, width: width + (hasBack ? 40 : 0), height: Math.max(height, 0) };
}

function nodeWidth(id) {
  return Math.max(64, Math.round(label(id).length * charWidth) + 20);
}

function edgePath(a, b, isBack, width) {
  if (!isBack) {
    const x1 = a.x + a.w / 2;
    const y1 = a.y + a.h;
    const x2 = b.x + b.w / 2;
    const y2 = b.y;
    const my = (y1 + y2) / 2;
    return `M${x1},${y1} C${x1},${my} ${x2},${my} ${x2},${y2}`;
  }
  // Around the right side: out of the source's right, back into the
  // target's right.
  const side = width + 20;
  const y1 = a.y + a.h * 0.3;
  const y2 = b.y + b.h * 0.7;
  return `M${a.x + a.w},${y1} C${side},${y1} ${side},${y2} ${b.x + b.w},${y2}`;
}
