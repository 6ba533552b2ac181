// The Autograd page draws the graph of Values that POST /api/autograd builds (lab/autograd.py
// parses the expression, never evaluates it). It lays the boxes out: a node one column right of
// its deepest input, a leaf just left of its first reader, an edge across columns along the free
// lane between two rows of boxes, and a graph wider than the page scaled down (to MIN_SCALE).
'use strict';

const {$, el, svg} = Lab;
const values = {a: 2, b: -3, c: 10};   // the worked example, the page's first graph
const BOX_W = 112, BOX_H = 54, GAP_X = 36, GAP_Y = 16, PAD = 10, MIN_SCALE = 0.6;

// a number with `digits` significant digits and no trailing zeros; null (not finite) as a dot
function short(x, digits = 5) {
  return x === null ? '·' : String(+x.toPrecision(digits));
}

// a slider dragged asks at each step: Lab.api sends one request at a time, the newest value
async function draw() {
  await Lab.guard(async () => {
    const data = await Lab.api('/api/autograd', {expression: $('expression').value, values, lenient: true});
    for (const [name, v] of Object.entries(data.variables)) values[name] = v.value;
    drawSliders(data.variables);
    $('result').textContent = `value ${Lab.fmt(data.value, 6)}   ` +
      Object.entries(data.variables).map(([n, v]) => `${n}.grad = ${short(v.grad, 6)}`).join('   ');
    drawGraph(data.nodes);
  }, ['result', 'graph']);
}

function drawSliders(variables) {
  const names = Object.keys(variables);
  const current = Array.from(document.querySelectorAll('#sliders input')).map(i => i.dataset.name);
  if (names.join() === current.join()) return;  // keep the slider being dragged
  $('sliders').replaceChildren(...names.flatMap(name => {
    const out = el('span', {class: 'num', id: `value-${name}`}, values[name]);
    const slider = el('input', {type: 'range', min: -10, max: 10, step: 0.1, value: values[name],
                                'data-name': name, id: `slider-${name}`,
      oninput: e => { values[name] = Number(e.target.value); out.textContent = values[name]; draw(); }});
    return [el('b', {}, name), slider, out];
  }));
}

function drawGraph(nodes) {
  // columns: every other node one right of its rightmost input; then each leaf (a variable or
  // a number) moves right to just before the first node that reads it, so it needs no long edge
  const column = [];
  nodes.forEach((n, k) => { column[k] = n.inputs.length ? 1 + Math.max(...n.inputs.map(c => column[c])) : 0; });
  nodes.forEach((n, k) => n.inputs.forEach(c => {
    if (!nodes[c].inputs.length) column[c] = Math.max(column[c], Math.min(...readers(nodes, c).map(r => column[r])) - 1);
  }));
  const rows = [], place = [];
  nodes.forEach((n, k) => {
    const c = column[k];
    rows[c] = (rows[c] || 0) + 1;
    place[k] = {x: PAD + c * (BOX_W + GAP_X), y: PAD + (rows[c] - 1) * (BOX_H + GAP_Y), row: rows[c] - 1};
  });
  const width = PAD * 2 + (Math.max(...column) + 1) * (BOX_W + GAP_X) - GAP_X;
  const height = PAD * 2 + Math.max(...rows.filter(Boolean)) * (BOX_H + GAP_Y) - GAP_Y;
  const graph = $('graph');
  const room = graph.parentElement.clientWidth - 2;  // the box's width, its border aside
  const scale = Math.max(MIN_SCALE, Math.min(1, room / width));
  graph.setAttribute('width', Math.round(width * scale));
  graph.setAttribute('height', Math.round(height * scale));
  graph.setAttribute('viewBox', `0 0 ${width} ${height}`);
  graph.dataset.scale = scale.toFixed(3);
  const edges = nodes.flatMap((n, k) => n.inputs.map(c => svg('path', {d: edge(place[c], place[k])})));
  const boxes = nodes.map((n, k) => {
    const {x, y} = place[k];
    const kind = n.variable !== null ? 'node variable' : (k === nodes.length - 1 ? 'node root' : 'node');
    return svg('g', {class: kind, 'data-label': n.label, 'data-variable': n.variable, 'data-data': n.data,
                     'data-grad': n.grad, transform: `translate(${x},${y})`},
      svg('rect', {width: BOX_W, height: BOX_H, rx: 5}),
      svg('text', {x: 7, y: 16, class: 'label'}, `#${k} ${n.label}`),
      svg('text', {x: 7, y: 32}, `data ${short(n.data)}`),
      svg('text', {x: 7, y: 47, class: 'grad'}, `grad ${short(n.grad)}`));
  });
  graph.replaceChildren(...edges, ...boxes);
}

function readers(nodes, c) {
  return nodes.flatMap((n, k) => n.inputs.includes(c) ? [k] : []);
}

// from the right side of box a to the left side of box b: a curve to the next column, or, when
// columns lie between them, down (or up) to the lane under (over) a's row, along it, and in to b
function edge(a, b) {
  const x0 = a.x + BOX_W, y0 = a.y + BOX_H / 2, x1 = b.x, y1 = b.y + BOX_H / 2, g = GAP_X;
  if (x1 - x0 <= g + 1) return `M${x0},${y0} C${x0 + g / 2},${y0} ${x1 - g / 2},${y1} ${x1},${y1}`;
  const lane = b.y >= a.y ? a.y + BOX_H + GAP_Y / 2 : a.y - GAP_Y / 2;  // free in every column
  return `M${x0},${y0} C${x0 + g / 2},${y0} ${x0 + g / 2},${lane} ${x0 + g},${lane} ` +
         `L${x1 - g},${lane} C${x1 - g / 2},${lane} ${x1 - g / 2},${y1} ${x1},${y1}`;
}

Lab.on('form', 'submit', draw);
Lab.start(draw);
