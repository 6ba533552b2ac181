// The Autograd page: an expression's graph of engine Values as SVG, each box with its data
// and grad, and a slider per variable. The server parses (never evaluates) the expression,
// builds the graph and runs backward() (POST /api/autograd, lab/autograd.py's explore); this
// file only lays the boxes out: a node's column is one more than its deepest input's.
'use strict';

const {el, svg} = Lab;
const $ = id => document.getElementById(id);
const values = {a: 2, b: -3, c: 10};   // the lesson's example, the page's first graph
const BOX_W = 120, BOX_H = 54, GAP_X = 50, GAP_Y = 16, PAD = 10;
let pending = null, busy = false;      // one request at a time; the newest slider value wins

// a number with `digits` significant digits and no trailing zeros; null (not finite) as a dot
function short(x, digits = 5) {
  return x === null ? '·' : String(+x.toPrecision(digits));
}

async function draw() {
  if (busy) { pending = true; return; }
  busy = true;
  await Lab.guard(async () => {
    const data = await Lab.api('/api/autograd', {expression: $('expression').value, values, lenient: true});
    for (const [name, v] of Object.entries(data.variables)) values[name] = v.value;
    drawSliders(data.variables);
    $('result').textContent = `value ${Lab.fmt(data.value, 6)}   ` +
      Object.entries(data.variables).map(([n, v]) => `${n}.grad = ${short(v.grad, 6)}`).join('   ');
    drawGraph(data.nodes);
  }, ['result', 'graph']);
  busy = false;
  if (pending) { pending = null; draw(); }
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
    return [el('b', {}, name), slider, out, el('span', {class: 'muted'}, '')];
  }));
}

function drawGraph(nodes) {
  // columns: leaves in column 0, every other node one right of its rightmost input
  const column = [];
  nodes.forEach((n, k) => { column[k] = n.inputs.length ? 1 + Math.max(...n.inputs.map(c => column[c])) : 0; });
  const rows = [], place = [];
  nodes.forEach((n, k) => {
    const c = column[k];
    rows[c] = (rows[c] || 0) + 1;
    place[k] = {x: PAD + c * (BOX_W + GAP_X), y: PAD + (rows[c] - 1) * (BOX_H + GAP_Y)};
  });
  const width = PAD * 2 + (Math.max(...column) + 1) * (BOX_W + GAP_X) - GAP_X;
  const height = PAD * 2 + Math.max(...rows) * (BOX_H + GAP_Y) - GAP_Y;
  const graph = $('graph');
  graph.setAttribute('width', width);
  graph.setAttribute('height', height);
  graph.setAttribute('viewBox', `0 0 ${width} ${height}`);
  const edges = nodes.flatMap((n, k) => n.inputs.map(c => {
    const a = place[c], b = place[k];
    const x0 = a.x + BOX_W, y0 = a.y + BOX_H / 2, x1 = b.x, y1 = b.y + BOX_H / 2;
    return svg('path', {d: `M${x0},${y0} C${x0 + GAP_X / 2},${y0} ${x1 - GAP_X / 2},${y1} ${x1},${y1}`});
  }));
  const boxes = nodes.map((n, k) => {
    const {x, y} = place[k];
    const kind = n.variable !== null ? 'node variable' : (k === nodes.length - 1 ? 'node root' : 'node');
    return svg('g', {class: kind, 'data-label': n.label, 'data-variable': n.variable, 'data-data': n.data,
                     'data-grad': n.grad, transform: `translate(${x},${y})`},
      svg('rect', {width: BOX_W, height: BOX_H, rx: 5}),
      svg('text', {x: 8, y: 16, class: 'label'}, `#${k} ${n.label}`),
      svg('text', {x: 8, y: 32}, `data ${short(n.data)}`),
      svg('text', {x: 8, y: 47, class: 'grad'}, `grad ${short(n.grad)}`));
  });
  graph.replaceChildren(...edges, ...boxes);
}

Lab.on('form', 'submit', draw);
Lab.start(draw);
