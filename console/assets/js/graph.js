// The workflow graph as SVG, with the executors of one superstep lit.

import { s } from './dom.js';
import { layoutGraph, label } from './layout.js';

let uid = 0;

// graphSVG draws graph (a run's `graph`) and lights the executors in lit (a
// Set of ids). The drawing is one image to assistive technology, named by
// its caption: which executors there are and which ran.
export function graphSVG(graph, lit, caption) {
  const g = layoutGraph(graph);
  const outputs = new Set((graph.executors || []).filter((e) => e.output).map((e) => e.id));
  const kinds = new Map((graph.edges || []).map((e) => [e.from + '\u0000' + e.to, e.kind]));
  const arrow = `arrow-${++uid}`;
  const titleId = `graph-title-${uid}`;
  return s('svg', {
    class: 'graph', role: 'img', 'aria-labelledby': titleId,
    viewBox: `0 0 ${Math.max(g.width, 1)} ${Math.max(g.height, 1)}`, width: g.width, height: g.height,
  },
  s('title', { id: titleId }, caption),
  s('defs', {}, s('marker', { id: arrow, viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
    s('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrowhead' }))),
  g.edges.map((e) => s('path', {
    d: e.path, class: `edge${e.back ? ' back' : ''}${e.far ? ' far' : ''}${lit.has(e.from) && lit.has(e.to) ? ' lit' : ''}`,
    'marker-end': `url(#${arrow})`, 'data-from': e.from, 'data-to': e.to,
  }, s('title', {}, `${e.from} → ${e.to}${kinds.get(e.from + '\u0000' + e.to) ? ` (${kinds.get(e.from + '\u0000' + e.to)})` : ''}`))),
  g.nodes.map((n) => s('g', {
    class: `node${lit.has(n.id) ? ' lit' : ''}${n.id === graph.start ? ' start' : ''}${outputs.has(n.id) ? ' output' : ''}`, 'data-executor': n.id,
    transform: `translate(${n.x},${n.y})`,
  },
  s('title', {}, n.id + (outputs.has(n.id) ? ', yields output' : '') + (lit.has(n.id) ? ' (ran in this superstep)' : '')),
  s('rect', { width: n.w, height: n.h, rx: 6 }),
  s('text', { x: n.w / 2, y: n.h / 2, 'dominant-baseline': 'central', 'text-anchor': 'middle' }, label(n.id)))));
}
