// The Attention in phases page draws what POST /api/phases (lab/phases.py) answers: one answer
// per name, layer, head and query holds every phase; Play, back and forward only choose which to draw.
'use strict';

const {$, el, svg} = Lab;
let view = null;     // the last answer
let phase = 0;       // index into view.phases
let timer = null;    // the Play loop, while playing

async function load() {
  Lab.fillLayerHead();
  await Lab.guard(async () => {
    const query = $('query').value === '' ? null : Number($('query').value);
    view = await Lab.api('/api/phases', {ckpt: Lab.ckpt(), text: $('text').value, layer: Number($('layer').value),
                                         head: Number($('head').value), query});
    Lab.fillQuery(view);
    drawCode();
    show(phase);
  }, ['stage', 'numbers']);
}
const later = Lab.debounced(load);

// ---------------------------------------------------------------------------- the phases
function show(n) {
  phase = Math.max(0, Math.min(view.phases.length - 1, n));
  const p = view.phases[phase];
  document.body.dataset.phase = p.id;
  $('phase-list').replaceChildren(...view.phases.map((q, k) => el('li', {},
    el('button', {type: 'button', class: k === phase ? 'here' : k < phase ? 'done' : null, 'data-phase': q.id,
                  onclick: () => { stop(); show(k); }}, `${k + 1}. ${q.name}`))));
  $('phase-about').textContent = `${phase + 1}/${view.phases.length} ${p.name}: ${p.about}`;
  $('back').disabled = phase === 0;
  $('forward').disabled = phase === view.phases.length - 1;
  drawStage();
  drawNumbers();
  highlight();
}

const reached = id => view.phases.findIndex(p => p.id === id) <= phase;
const on = (id, toggle) => reached(id) && $(toggle).checked;

function play() {
  if (timer) { stop(); return; }
  if (phase === view.phases.length - 1) show(0);
  $('play').textContent = 'Pause';
  timer = setInterval(() => {
    if (phase >= view.phases.length - 1) { stop(); return; }
    show(phase + 1);
  }, Number($('speed').value));
}

function stop() {
  clearInterval(timer);
  timer = null;
  $('play').textContent = 'Play';
}

// ---------------------------------------------------------------------------- the picture
const STEP = 78, LEFT = 62, CHIP_Y = 100, CELL = 9;
// Past ZOOM_ABOVE positions (64 for the Shakespeare recipe: 5,000 px of chips) the picture zooms
// on the part being played: as many positions as fit the picture's box at full size (at least
// MIN_WINDOW), ending two after the query so that the mask shows, with the whole block drawn
// small underneath and the window marked on it; the tables beside keep every key. The 'zoom'
// box shows the whole block instead, in a box that scrolls.
const ZOOM_ABOVE = 12, MIN_WINDOW = 4;

function cellColour(x, most) {  // a vector component: orange for positive, blue for negative
  const t = Math.min(1, Math.abs(x) / most);
  return x >= 0 ? `rgba(232, 89, 12, ${0.12 + 0.88 * t})` : `rgba(31, 95, 191, ${0.12 + 0.88 * t})`;
}

// [first, last] position the picture shows
function shownRange(T, i) {
  if (T <= ZOOM_ABOVE || !$('zoom').checked) return [0, T - 1];
  const fit = Math.floor(($('stage').parentElement.clientWidth - LEFT - 20) / STEP);
  const n = Math.max(MIN_WINDOW, Math.min(ZOOM_ABOVE, fit));
  const hi = Math.min(T - 1, i + 2), lo = Math.max(0, hi - n + 1);
  return [lo, Math.min(T - 1, lo + n - 1)];
}

function drawStage() {
  const v = view, T = v.labels.length, i = v.query, d = v.head_dim;
  const [lo, hi] = shownRange(T, i), zoomed = hi - lo + 1 < T;
  $('zoom-box').hidden = T <= ZOOM_ABOVE;
  const width = Math.max(zoomed ? 0 : 560, LEFT + (hi - lo + 1) * STEP + 20);
  const heads = on('heads', 'show-heads');
  const height = (heads ? 410 : 330) + (zoomed ? 34 : 0);
  const x = j => LEFT + (j - lo) * STEP + STEP / 2;
  const stage = $('stage');
  stage.setAttribute('viewBox', `0 0 ${width} ${height}`);
  stage.setAttribute('width', width);
  stage.setAttribute('height', height);
  stage.dataset.first = lo;
  stage.dataset.last = hi;
  const parts = [svg('defs', {}, svg('pattern', {id: 'hatch', width: 6, height: 6, patternUnits: 'userSpaceOnUse',
    patternTransform: 'rotate(45)'}, svg('rect', {width: 6, height: 6, fill: '#f4f5f7'}),
    svg('line', {x1: 0, y1: 0, x2: 0, y2: 6, stroke: '#d0d5dd', 'stroke-width': 2})))];
  const future = j => j > i;
  const masked = on('mask', 'show-mask');
  // the mask: a wall in front of the future keys, which the query's call never sees
  if (masked && i < hi) {
    parts.push(svg('rect', {class: 'wall', id: 'wall', x: x(i + 1) - STEP / 2 + 4, y: CHIP_Y - 46,
      width: (hi - i) * STEP - 8, height: 170, rx: 6}),
      svg('text', {class: 'small', x: x(i + 1) - STEP / 2 + 10, y: CHIP_Y - 34}, 'masked:'),
      svg('text', {class: 'small', x: x(i + 1) - STEP / 2 + 10, y: CHIP_Y - 22}, 'never scored'));
  }
  // rays from the query to every visible key: the scores, then the weights
  const weights = on('softmax', 'show-weights'), scores = on('scores', 'show-scores');
  if (weights || scores) {
    for (let j = lo; j <= i; j++) {
      const w = v.weights[j];
      const lift = Math.min(80, 22 + Math.abs(i - j) * 7);  // the rays' peaks stay inside the picture
      const mid = (x(i) + x(j)) / 2;
      const path = j === i
        ? `M ${x(i) - 10} ${CHIP_Y - 14} C ${x(i) - 24} ${CHIP_Y - 50}, ${x(i) + 24} ${CHIP_Y - 50}, ${x(i) + 10} ${CHIP_Y - 14}`
        : `M ${x(i)} ${CHIP_Y - 14} Q ${mid} ${CHIP_Y - 14 - 2 * lift} ${x(j)} ${CHIP_Y - 14}`;
      const ray = svg('path', {class: 'ray', d: path, 'data-key': j, 'data-weight': w,
        'stroke-width': weights ? (1 + 9 * w).toFixed(2) : 1.5, opacity: weights ? (0.25 + 0.75 * w).toFixed(2) : 0.7});
      parts.push(ray);
      const label = weights ? Lab.fmt(w, 2) : Lab.fmt(v.scores[j], 2);
      parts.push(svg('text', {class: 'ray-label', x: j === i ? x(i) : mid, y: j === i ? CHIP_Y - 42 : CHIP_Y - 14 - lift - 2,
        'text-anchor': 'middle'}, label));
    }
  }
  // the tokens
  for (let j = lo; j <= hi; j++) {
    const cls = `chip${j === i ? ' query' : ''}${future(j) && masked ? ' future' : ''}`;
    parts.push(svg('g', {class: cls, 'data-position': j, 'data-label': v.labels[j]},
      svg('rect', {x: x(j) - 28, y: CHIP_Y - 14, width: 56, height: 28, rx: 5}),
      svg('text', {x: x(j), y: CHIP_Y + 5, 'text-anchor': 'middle', class: Lab.isGlyph(v.labels[j]) ? 'glyph' : null}, v.labels[j]),
      svg('text', {class: 'small', x: x(j), y: CHIP_Y + 27, 'text-anchor': 'middle'}, j === i ? `query ${j}` : `${j}`)));
  }
  if (lo > 0) {  // the keys left of the window: in the tables, and on the block below
    parts.push(svg('text', {class: 'small', x: 2, y: CHIP_Y - 2, id: 'elided'}, `◀ ${lo} more`),
      svg('text', {class: 'small', x: 2, y: CHIP_Y + 10}, `(0..${lo - 1})`));
  }
  // q, k, v of this head under each token, one cell per dimension
  if (on('qkv', 'show-qkv')) {
    const most = Math.max(1e-9, ...['q', 'k', 'v'].flatMap(n => v[n].flat().map(Math.abs)));
    const cell = Math.min(CELL, (STEP - 14) / d);
    ['q', 'k', 'v'].forEach((name, r) => {
      const y = CHIP_Y + 38 + r * 14;
      parts.push(svg('text', {class: 'small', x: 8, y: y + 8}, name));
      for (let j = lo; j <= hi; j++) {
        if (name === 'q' && j !== i) continue;  // only the query's q is used by this call
        const dim = future(j) && masked ? 0.25 : 1;
        v[name][j].forEach((val, c) => parts.push(svg('rect', {x: x(j) - (d * cell) / 2 + c * cell, y, width: cell - 1,
          height: 10, fill: cellColour(val, most), opacity: dim, 'data-vec': name, 'data-position': j})));
      }
    });
  }
  // the values flowing into the mixer, each as w_j * v_j
  const mixY = 280;
  if (on('weighted', 'show-values')) {
    for (let j = lo; j <= i; j++) {
      const w = v.weights[j];
      parts.push(svg('path', {class: 'flow', 'data-key': j, d: `M ${x(j)} ${CHIP_Y + 76} C ${x(j)} ${mixY - 40}, ${x(i)} ${mixY - 50}, ${x(i)} ${mixY - 16}`,
        'stroke-width': (1 + 9 * w).toFixed(2), opacity: (0.25 + 0.75 * w).toFixed(2)}));
      parts.push(svg('text', {class: 'flow-label', x: x(j) + 4, y: CHIP_Y + 92}, `w·v ${Lab.fmt(w, 2)}`));
    }
    parts.push(svg('circle', {class: 'mixer', cx: x(i), cy: mixY, r: 16}),
      svg('text', {x: x(i), y: mixY + 4, 'text-anchor': 'middle'}, 'Σ'),
      // its label on the side with room: left of the mixer when the query is at the picture's right end
      x(i) + 230 < width ? svg('text', {class: 'small', x: x(i) + 22, y: mixY + 4}, `out_${i} = Σ w_j v_j (head ${v.head})`)
                         : svg('text', {class: 'small', x: x(i) - 22, y: mixY + 4, 'text-anchor': 'end'},
                               `out_${i} = Σ w_j v_j (head ${v.head})`));
  }
  // every head's weights for the same query, side by side: a bar per key 0..i, all of them
  if (heads) {
    const span = (width - 20) / v.n_head, bar = Math.max(1, Math.min(12, (span - 10) / (i + 1)));
    v.all_weights.forEach((ws, h) => {
      const gx = 20 + h * span, gy = 390;
      parts.push(svg('text', {class: 'small', x: gx, y: gy + 14, 'font-weight': h === v.head ? 700 : 400},
        `head ${h}${h === v.head ? ' (this one)' : ''}`));
      ws.forEach((w, j) => parts.push(svg('rect', {x: gx + j * bar, y: gy - w * 60, width: Math.max(0.5, bar - 1),
        height: Math.max(0.5, w * 60), fill: h === v.head ? '#e8590c' : '#94a3b8', 'data-head': h, 'data-key': j,
        'data-weight': w})));
      parts.push(svg('line', {class: 'axis', x1: gx, x2: gx + (i + 1) * bar, y1: gy, y2: gy}));
      if (h === 0) parts.push(svg('text', {class: 'small', x: gx, y: gy - 68}, 'every head\'s weights over keys 0..' + i));
    });
  }
  // the whole block, small, with the window the picture shows marked on it
  if (zoomed) {
    const y = height - 26, w = (width - LEFT - 20) / T;
    parts.push(svg('text', {class: 'small', x: 4, y: y + 8}, 'block'));
    for (let j = 0; j < T; j++) {
      parts.push(svg('rect', {class: 'mini', x: LEFT + j * w, y, width: Math.max(0.5, w - 0.5), height: 10,
        fill: j === i ? '#e8a200' : j > i ? '#eceef2' : '#c7d7f0'}));
    }
    parts.push(svg('rect', {id: 'window-mark', x: LEFT + lo * w - 1, y: y - 2, width: (hi - lo + 1) * w + 2, height: 14,
      fill: 'none', stroke: '#1d2330', 'stroke-width': 1.5, rx: 2}),
      svg('text', {class: 'small', x: LEFT, y: y + 22}, `positions 0..${T - 1}; the picture shows ${lo}..${hi}`));
  }
  stage.replaceChildren(...parts);
}


// ---------------------------------------------------------------------------- the numbers
function vec(xs, digits = 3) {
  return `[${xs.map(x => Lab.fmt(x, digits)).join(', ')}]`;
}

function drawNumbers() {
  const v = view, i = v.query, id = v.phases[phase].id, t = i + 1;
  const keys = Array.from({length: t}, (_, j) => j);
  const row = (cells, attrs = {}) => el('tr', attrs, cells.map((c, k) => el('td', {class: k ? 'num' : 'l mono'}, c)));
  const key = j => [`${j} `, Lab.tok(v.labels[j])];
  const tables = {
    tokens: () => [el('p', {}, `${v.data_mode === 'text' ? 'the text, no BOS' : '[BOS] + the name'}: ` +
                   `${v.labels.length} positions; the query is position ${i} (`, Lab.tok(v.labels[i]), `), which sees keys 0..${i}.`)],
    qkv: () => [el('table', {class: 'data', id: 'numbers-table'},
      row(['', 'q (query only)', 'k', 'v']),
      keys.map(j => row([key(j), j === i ? vec(v.q[i]) : '', vec(v.k[j]), vec(v.v[j])])))],
    scores: () => [el('table', {class: 'data', id: 'numbers-table'}, row(['key', 'q·k', `÷ √${v.head_dim}`]),
      keys.map(j => row([key(j), Lab.fmt(v.raw[j], 4), Lab.fmt(v.scores[j], 4)], {'data-key': j})))],
    mask: () => [el('p', {}, i < v.labels.length - 1
      ? `Keys ${i + 1}..${v.labels.length - 1} come later: gpt() has not been called for them when it computes position ${i}, ` +
        'so their k and v are not in the cache. No score, no weight: the mask is the calling order.'
      : 'The last position: every key is visible. Pick an earlier query to see the mask.')],
    softmax: () => [el('table', {class: 'data', id: 'numbers-table'}, row(['key', 'score', 'weight']),
      keys.map(j => row([key(j), Lab.fmt(v.scores[j], 4), Lab.fmt(v.weights[j], 4)], {'data-key': j}))),
      el('p', {class: 'muted small'}, 'The weights over the visible keys sum to 1.')],
    weighted: () => [el('table', {class: 'data', id: 'numbers-table'}, row(['key', 'w_j', 'w_j · v_j']),
      keys.map(j => row([key(j), Lab.fmt(v.weights[j], 4), vec(v.weighted[j])], {'data-key': j})),
      row([`out_${i}`, '', vec(v.out)], {id: 'out-row'}))],
    heads: () => [el('table', {class: 'data', id: 'numbers-table'}, row(['head', 'weights over keys 0..' + i, 'its output']),
      v.all_weights.map((ws, h) => row([`${h}`, vec(ws, 2), vec(v.all_out[h], 2)], {'data-head': h}))),
      el('p', {class: 'mono small'}, `concat (${v.concat.length}) → attn_wo → ${vec(v.attn_wo_out, 2)}`)],
  };
  $('numbers').replaceChildren(el('h3', {}, view.phases[phase].name), ...tables[id]());
}

// ---------------------------------------------------------------------------- the code
function drawCode() {
  const c = view.code;
  if (c.error) {  // model.py could not be read as Python: the numbers stand, the code box says why
    $('code-title').textContent = c.error;
    $('code').replaceChildren();
    return;
  }
  $('code-title').textContent = `${c.file}, gpt(), lines ${c.first}..${c.first + c.lines.length - 1}, read from the file just now`;
  $('code').replaceChildren(...c.lines.map((text, k) => el('div', {'data-line': c.first + k},
    el('span', {class: 'ln'}, c.first + k), text)));
}

function highlight() {
  if (view.code.error) return;
  const lines = new Set(view.code.phases[view.phases[phase].id]);
  let first = null;
  for (const div of $('code').children) {
    const hit = lines.has(Number(div.dataset.line));
    div.classList.toggle('hl', hit);
    if (hit && !first) first = div;
  }
  if (first) $('code').scrollTop = first.offsetTop - $('code').offsetTop - 40;  // the code box, not the page
}

Lab.on('play', 'click', play);
Lab.on('back', 'click', () => { stop(); show(phase - 1); });
Lab.on('forward', 'click', () => { stop(); show(phase + 1); });
Lab.on('speed', 'change', () => { if (timer) { stop(); play(); } });
Lab.on('text', 'input', () => { $('query').value = ''; later(); });
for (const id of ['layer', 'head', 'query']) Lab.on(id, 'change', load);
for (const id of ['show-qkv', 'show-scores', 'show-weights', 'show-mask', 'show-values', 'show-heads', 'zoom']) {
  Lab.on(id, 'change', () => { if (view) drawStage(); });
}
// a zoomed picture holds as many positions as its box: drawn again when the window changes
window.addEventListener('resize', Lab.debounced(() => { if (view) drawStage(); }, 150));
Lab.start(load);
