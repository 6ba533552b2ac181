// The Scaling page: four widgets, each drawing one `part` of POST /api/scaling (lab/scaling.py):
// 'row', 'variance', 'cost' and 'index'. "This model's" row sends /api/attention's raw scores back.
'use strict';

const {$, el, num, scroll} = Lab;
const STATS = [  // [key, label, digits]
  ['spread', 'spread (std of the scores)', 3], ['max_minus_min', 'max − min of the scores', 3],
  ['entropy', 'entropy (bits)', 3], ['max_weight', 'max weight', 4], ['gradient_scale', 'gradient scale', 4]];

const big = (x, attrs) => num(x, Number(x).toLocaleString('en'), attrs);  // 3,145,728

// POST /api/scaling for one part. The part is in the URL too (the server routes by the path
// alone): Lab.api drops an answer overtaken by a newer request to the same URL, and the four
// widgets must overtake only their own requests, not each other's.
function part(name, body) {
  return Lab.api(`/api/scaling?part=${name}`, {part: name, ...body});
}

// count the draws of a widget on its panel: the tests (and a curious reader) can tell a redraw
function drawn(panel) {
  const box = $(panel);
  box.dataset.draws = Number(box.dataset.draws || 0) + 1;
}

function headSize() {
  return 2 ** Number($('d').value);  // the slider is log2: 1 .. 1024
}

// ---------------------------------------------------------------------------- 1) one row
async function drawRow() {
  const model = $('source').value === 'model';
  document.body.dataset.source = $('source').value;
  $('d-value').textContent = headSize();
  $('temperature-value').textContent = Lab.logSlider('temperature');
  Lab.fillLayerHead();
  await Lab.guard(async () => {
    const body = {scale: $('scale').checked, temperature: Lab.logSlider('temperature')};
    let labels = null;
    if (model) {  // the model's own q.k for the last position of the name, unscaled
      const a = await Lab.api('/api/attention', {ckpt: Lab.ckpt(), text: $('text').value,
        layer: Number($('layer').value), head: Number($('head').value)});
      Object.assign(body, {scores: a.raw, row_d: a.head_dim});
      labels = a.labels;
    } else {
      Object.assign(body, {row_d: headSize(), keys: Number($('keys').value), seed: Number($('seed').value)});
    }
    const r = await part('row', body);
    labels = labels || r.weights.map((_, j) => `k${j}`);
    rowBars(r, labels);
    rowStats(r);
    drawn('row-panel');
  }, ['row-bars', 'row-stats']);
}

function rowBars(r, labels) {
  const most = Math.max(...r.weights);
  $('row-bars').replaceChildren(scroll(el('table', {class: 'data', id: 'row-table'},
    el('tr', {}, el('th', {class: 'l'}, 'key'), el('th', {}, 'q·k'), el('th', {}, 'score'),
      el('th', {}, 'weight'), el('th', {class: 'l'}, '')),
    r.weights.map((w, j) => el('tr', {}, el('td', {class: 'l mono'}, labels[j]), el('td', {}, num(r.raw[j], 2)),
      el('td', {}, num(r.scores[j], 3)), el('td', {}, num(w, 4, {'data-kind': 'weight'})),
      el('td', {class: 'l'}, Lab.bar(w / most, 9)))))));
}

function rowStats(r) {
  const median = r.median ? [el('th', {}, `median of ${r.draws} rows`)] : [];
  $('row-stats').replaceChildren(scroll(el('table', {class: 'data', id: 'stats-table'},
    el('tr', {'data-d': r.row_d, 'data-scale': r.scale}, el('th', {class: 'l'}, `d = ${r.row_d}, ${r.weights.length} keys`), el('th', {}, 'this row'), median),
    STATS.map(([k, label, digits]) => el('tr', {}, el('th', {class: 'l'}, label),
      el('td', {}, num(r.stats[k], digits, {'data-name': k})),
      r.median ? el('td', {}, num(r.median[k], digits, {'data-median': k})) : null)),
    el('tr', {}, el('th', {class: 'l muted'}, 'a uniform row'), el('td', {class: 'muted'},
      `${Lab.fmt(r.stats.max_entropy, 3)} bits, weight ${Lab.fmt(1 / r.weights.length, 3)}`)))));
  const box = $('vanishing');
  box.hidden = !r.vanishing;
  box.textContent = r.vanishing ? (r.median
    ? `The gradient vanishes: half of all random rows at d = ${r.row_d}${r.scale ? '' : ' without scaling'} have a ` +
      `gradient scale below ${Lab.fmt(r.median.gradient_scale, 4)}, under ${r.threshold}: a change of 1 in the ` +
      'scores moves their weights by less than that, so the scores all but stop learning.'
    : `The gradient vanishes: this row's gradient scale ${Lab.fmt(r.stats.gradient_scale, 4)} is under ` +
      `${r.threshold}: the weights barely move when the scores change.`) : '';
}

// ---------------------------------------------------------------------------- 2) Var(q.k) = d
async function drawVariance() {
  await Lab.guard(async () => {
    const v = await part('variance', {samples: Number($('samples').value),
                                             seed: Number($('variance-seed').value)});
    $('variance').replaceChildren(scroll(el('table', {class: 'data', id: 'variance-table'},
      el('tr', {}, ['d', 'measured Var(q·k)', '± std. error', 'predicted d', 'std dev']
        .map(h => el('th', {}, h))),
      v.rows.map(r => el('tr', {'data-d': r.d}, el('td', {}, r.d), el('td', {}, num(r.var, 2, {'data-kind': 'var'})),
        el('td', {}, `± ${Lab.fmt(r.se, 2)}`), el('td', {}, r.d), el('td', {}, num(r.sd, 2)))))),
      el('p', {class: 'muted small'}, `${v.samples.toLocaleString('en')} dot products per d. Without the ` +
        'division the scores spread like √d (±8 at d = 64); divided by √d their variance is 1 whatever d is.'));
    drawn('variance-panel');
  }, ['variance']);
}

// ---------------------------------------------------------------------------- 3) cost
async function drawCost() {
  await Lab.guard(async () => {
    const c = await part('cost', {n: Number($('n').value), D: Number($('D').value)});
    $('cost').replaceChildren(scroll(el('table', {class: 'data', id: 'cost-table'},
      el('tr', {}, el('th', {class: 'l'}, 'projections Q, K, V, O: 4 n D²'), el('td', {}, big(c.projections, {id: 'cost-projections'}))),
      el('tr', {}, el('th', {class: 'l'}, 'the two contractions: 2 n² D'), el('td', {}, big(c.attention, {id: 'cost-attention'}))),
      el('tr', {}, el('th', {class: 'l'}, 'attention / projections = n / (2D)'), el('td', {}, num(c.ratio, 4, {id: 'cost-ratio'}))))),
      el('p', {class: c.ratio > 1 ? 'miss' : 'hit'}, c.ratio > 1
        ? `n = ${c.n} is past 2D = ${c.crossover}: attention outweighs the projections.`
        : `Below n = 2D = ${c.crossover} the projections cost more than attention.`));
    $('cost-examples').replaceChildren(el('table', {class: 'data', id: 'cost-examples-table'},
      el('tr', {}, el('th', {}, `n (D = ${c.examples[0].D})`), el('th', {}, 'n / (2D)')),
      c.examples.map(r => el('tr', {}, el('td', {}, r.n), el('td', {}, num(r.ratio, 4, {'data-kind': 'ratio'}))))));
    drawn('cost-panel');
  }, ['cost']);
}

// ---------------------------------------------------------------------------- 4) index notation
let tab = 'scores';
const sizes = {};  // the sizes typed so far, by index letter; the API fills in GPT-2 small's

async function drawIndex() {
  await Lab.guard(async () => {
    const x = await part('index', {tab, sizes});
    $('tabs').replaceChildren(...Object.entries(x.tabs).map(([name, spec]) => el('button', {
      type: 'button', role: 'tab', class: name === tab ? 'tab here' : 'tab', 'data-tab': name,
      'aria-selected': name === tab ? 'true' : 'false', title: spec,
      onclick: () => { tab = name; drawIndex(); }}, name)));
    for (const i of x.indices) sizes[i.index] = i.size;
    const inputs = [...$('index-form').querySelectorAll('input')];
    if (inputs.map(i => i.dataset.index).join('') !== x.indices.map(i => i.index).join('')) {
      $('index-form').replaceChildren(...x.indices.map(i => el('label', {}, `${i.index} (${i.meaning})`,
        el('input', {type: 'number', min: 1, value: i.size, 'data-index': i.index, id: `size-${i.index}`,
                     oninput: e => { sizes[i.index] = Number(e.target.value); laterIndex(); }}))));
    } else {  // the sizes the answer used, except in the box being typed in
      for (const input of inputs) if (input !== document.activeElement) input.value = sizes[input.dataset.index];
    }
    $('index').replaceChildren(el('p', {class: 'mono big', id: 'spec'}, x.spec.replace('->', ' → ')),
      el('p', {class: 'muted'}, x.about),
      scroll(el('table', {class: 'data', id: 'index-table'},
        el('tr', {}, el('th', {class: 'l'}, 'index'), el('th', {}, 'size'), el('th', {class: 'l'}, 'role'),
          el('th', {class: 'l'}, 'meaning')),
        x.indices.map(i => el('tr', {'data-index': i.index}, el('td', {class: 'l mono'}, i.index),
          el('td', {}, big(i.size)), el('td', {class: `l ${i.role}`}, i.role === 'kept' ? 'kept' : 'summed'),
          el('td', {class: 'l muted'}, i.meaning))))));
    $('index-result').replaceChildren(el('table', {class: 'data', id: 'index-numbers'},
      el('tr', {}, el('th', {class: 'l'}, 'result shape'), el('td', {id: 'index-shape'}, `[${x.shape.join(', ')}]`)),
      el('tr', {}, el('th', {class: 'l'}, 'elements'), el('td', {}, big(x.elements, {id: 'index-elements'}))),
      el('tr', {}, el('th', {class: 'l'}, 'multiply-adds'), el('td', {}, big(x.multiply_adds, {id: 'index-macs'}))),
      el('tr', {}, el('th', {class: 'l'}, 'per element'), el('td', {}, big(x.per_element, {id: 'index-per'})))),
      el('p', {class: 'muted small'}, 'Each summed index multiplies the work per element; each kept one the number of elements.'));
    drawn('index-panel');
  }, ['index', 'index-result']);
}

function setSizes(values) {
  Object.assign(sizes, values);
  drawIndex();
}

const laterRow = Lab.debounced(drawRow), laterVariance = Lab.debounced(drawVariance, 300);
const laterCost = Lab.debounced(drawCost), laterIndex = Lab.debounced(drawIndex);

async function drawAll() {
  await Promise.all([drawRow(), drawVariance(), drawCost(), drawIndex()]);
}

for (const id of ['source', 'scale', 'layer', 'head']) Lab.on(id, 'change', drawRow);
for (const id of ['d', 'temperature']) Lab.on(id, 'input', drawRow);
for (const id of ['keys', 'seed', 'text']) Lab.on(id, 'input', laterRow);
Lab.on('redraw', 'click', () => { $('seed').value = Number($('seed').value) + 1; drawRow(); });
for (const id of ['samples', 'variance-seed']) Lab.on(id, 'input', laterVariance);
for (const id of ['n', 'D']) Lab.on(id, 'input', laterCost);
Lab.on('cost-model', 'click', () => {
  const c = Lab.info().config;
  $('n').value = c.block_size;
  $('D').value = c.n_embd;
  drawCost();
});
Lab.on('index-model', 'click', () => {
  const c = Lab.info().config;
  setSizes({b: 1, h: c.n_head, q: c.block_size, k: c.block_size, d: c.head_dim, t: c.block_size,
            c: c.n_embd, e: c.n_embd});
});
Lab.on('index-example', 'click', () => { for (const k of Object.keys(sizes)) delete sizes[k]; setSizes({}); });
Lab.start(drawAll);
