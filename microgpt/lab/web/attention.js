// The Attention page (attention.html) draws what POST /api/attention answers (lab/attention.py's
// attention_view): a heatmap per head, a clicked cell's score taken apart, the row's statistics,
// and on a RoPE model the score of the query and a key at every distance.
'use strict';

const {$, el} = Lab;
let key = null;        // the key position j of the picked cell (null: none picked)
let view = null;       // the last answer from the API
const detail = $('detail');  // moved next to the picked cell's head, and back
const detailHome = detail.nextElementSibling;       // where it stands when no cell is picked

async function draw() {
  Lab.fillLayerHead();
  $('temperature-value').textContent = Lab.logSlider('temperature');
  await Lab.guard(async () => {
    const query = $('query').value === '' ? null : Number($('query').value);
    view = await Lab.api('/api/attention', {
      ckpt: Lab.ckpt(), text: $('text').value, layer: Number($('layer').value),
      head: Number($('head').value), query, key, scale: $('scale').checked, temperature: Lab.logSlider('temperature')});
    Lab.fillQuery(view);
    if (key !== null && key > view.query) key = null;
    drawHeads();
    drawDetail();
    placeDetail();
    drawStats();
    drawRope();
  }, ['heads', 'detail', 'stats', 'row', 'rope']);
}

// A cell's size for T positions, up to 16 (Lab.heatmap.compact): 2rem up to 8, narrower up to
// 16, so that two heads of a 16-position model fit side by side in a 1280 px window.
function cellSize(T) {
  return T <= 8 ? ['2rem', '0.65rem'] : T <= 12 ? ['1.7rem', '0.62rem'] : ['1.45rem', '0.58rem'];
}

// the compact cell's side in px: the heads two a row when each still gets 6 px a cell, else one
function compactCell(T, nHead) {
  const width = $('heads').clientWidth, axis = 46;  // the row marks' column, 'i \ j' and its padding
  const perRow = Math.min(nHead, width >= 2 * (axis + 6 * T) + 16 ? 2 : 1);
  const room = (width - 16 * (perRow - 1)) / perRow - axis - 4;
  return Lab.heatmap.cell(room, T);
}

function drawHeads() {
  const head = Number($('head').value), labels = view.labels, T = labels.length;
  const compact = Lab.heatmap.compact(T);
  if (compact) {
    $('heads').style.setProperty('--cell', `${compactCell(T, view.n_head)}px`);
  } else {
    const [size, font] = cellSize(T);
    $('heads').style.setProperty('--cell', size);
    $('heads').style.setProperty('--cell-font', font);
  }
  const label = i => [`${i} `, Lab.tok(labels[i])];
  const maps = view.all_heads.map((weights, h) => el('div', {class: 'head'},
    Lab.heatmap.table(T, {'data-head': h}, label, (i, j) => (weights[i][j] === null
      ? el('td', {class: 'cell blank', title: 'future key: masked, never scored'})
      : cell(weights[i][j], h, i, j, compact)),
    {caption: el('caption', {}, `head ${h}`), row: i => ({class: h === head && i === view.query ? 'query' : null})})));
  $('heads').replaceChildren(...maps);
  $('readout').hidden = !compact;
  $('readout').textContent = 'hover a cell for its numbers; click it to take its score apart';
}

// the read-out line of a compact heatmap: the hovered cell's head, query, key and weight
function readout(e) {
  const td = e.target.closest('td.cell');
  if (!td || !view || !$('heads').contains(td)) return;
  if (td.classList.contains('blank')) {
    $('readout').textContent = 'a future key: masked, never scored';
    return;
  }
  const {head, query, key, value} = td.dataset, labels = view.labels;
  $('readout').replaceChildren(`head ${head} · query ${query} (`, Lab.tok(labels[query]), `) · key ${key} (`,
    Lab.tok(labels[key]), ') · weight ', el('b', {}, Lab.fmt(Number(value), 4)));
}

// the breakdown of a picked cell goes right under the row of heads holding that cell (the heads
// wrap, so a row is those at the same height); with no cell picked it stands below them all
function placeDetail() {
  const boxes = Array.from($('heads').querySelectorAll(':scope > .head'));
  const picked = boxes[Number($('head').value)];
  if (key === null || !picked) {
    detailHome.before(detail);
    return;
  }
  const sameRow = boxes.filter(b => b.offsetTop === picked.offsetTop);
  sameRow[sameRow.length - 1].after(detail);
}

function cell(w, h, i, j, compact = false) {
  const chosen = h === Number($('head').value) && i === view.query && j === key;
  const td = el('td', {class: `cell filled${chosen ? ' chosen' : ''}`, 'data-head': h, 'data-query': i,
                       'data-key': j, 'data-value': w, title: `head ${h}, query ${i}, key ${j}: ${w}`,
                       onclick: () => pick(h, i, j)}, compact ? null : Lab.fmt(w, 2));
  td.style.background = Lab.shade(w);
  if (w > 0.6) td.style.color = 'white';
  return td;
}

async function pick(h, i, j) {
  $('head').value = h;
  $('query').value = i;
  key = j;
  await draw();
}

function numCell(x, digits = 4, extra = {}) {
  return el('td', {class: 'num', 'data-value': x, ...extra}, Lab.fmt(x, digits));
}

// the picked score, or the whole row when no cell is picked
function drawDetail() {
  const i = view.query, d = view.head_dim, labels = view.labels, head = $('head').value;
  if (key === null) {
    detail.replaceChildren(el('p', {class: 'muted'},
      `Click a coloured cell to take its score apart (head ${head}, query ${i} is shown below).`));
  } else {
    const j = key, dims = Array.from({length: d}, (_, n) => n);
    detail.replaceChildren(
      el('h3', {}, `head ${head}, query ${i} (`, Lab.tok(labels[i]), `) · key ${j} (`, Lab.tok(labels[j]), ')'),
      el('table', {class: 'data', id: 'products'},
        el('tr', {}, el('th', {class: 'l'}, ''), dims.map(n => el('th', {}, `d${n}`)), el('th', {}, 'sum')),
        el('tr', {}, el('th', {class: 'l'}, `q_${i}[d]`), view.q.map(x => numCell(x, 3))),
        el('tr', {}, el('th', {class: 'l'}, `k_${j}[d]`), view.keys[j].map(x => numCell(x, 3))),
        el('tr', {}, el('th', {class: 'l'}, 'product'), view.products[j].map(x => numCell(x, 3, {'data-kind': 'product'})),
          numCell(view.raw[j], 4, {id: 'detail-raw'}))),
      el('table', {class: 'data'},
        el('tr', {}, el('th', {class: 'l'}, 'q·k'), numCell(view.raw[j])),
        el('tr', {}, el('th', {class: 'l'}, $('scale').checked ? `÷ √${d}` : 'not scaled'),
          numCell(view.scaled[j], 4, {id: 'detail-scaled'})),
        el('tr', {}, el('th', {class: 'l'}, `÷ temperature ${Lab.logSlider('temperature')} = score`),
          numCell(view.scores[j], 4, {id: 'detail-score'})),
        el('tr', {}, el('th', {class: 'l'}, `softmax over keys 0..${i} = weight`),
          numCell(view.weights[j], 4, {id: 'detail-weight'}))));
  }
  const rows = view.raw.map((_, j) => el('tr', {class: j === key ? 'picked' : null},
    el('td', {class: 'l'}, `${j} `, Lab.tok(labels[j])), numCell(view.raw[j]), numCell(view.scaled[j]),
    numCell(view.scores[j]), numCell(view.weights[j]), el('td', {class: 'l'}, Lab.bar(view.weights[j], 8))));
  const masked = labels.slice(i + 1).map((l, n) => el('tr', {},
    el('td', {class: 'l'}, `${i + 1 + n} `, Lab.tok(l)), el('td', {}, ''), el('td', {}, ''), el('td', {}, ''),
    el('td', {}, '·'), el('td', {class: 'l muted'}, 'masked: future key')));
  const shared = view.n_kv_head < view.n_head ? ` (grouped-query attention: kv head ${view.kv_head}'s)` : '';
  $('row').replaceChildren(el('h3', {}, `head ${head}, query ${i}: scores and weights over the keys${shared}`),
    el('table', {class: 'data'},
      el('tr', {}, el('th', {class: 'l'}, 'key j'), el('th', {}, 'q·k'), el('th', {}, 'scaled'),
        el('th', {}, 'score'), el('th', {}, 'weight'), el('th', {}, '')),
      rows, masked),
    el('p', {class: 'mono'}, `output out_${i} = Σ w_j v_j = [${view.out.map(x => Lab.fmt(x, 3)).join(', ')}]`));
}

function drawStats() {
  const names = [['spread', 'spread (std of scores)', 4], ['entropy', 'entropy (bits)', 3],
                 ['max_entropy', 'max = log2(keys)', 3], ['max_weight', 'max weight', 4],
                 ['gradient_scale', 'gradient scale', 4]];
  const labels = Object.keys(view.stats);
  $('stats').replaceChildren(el('h3', {}, 'row statistics'),
    el('table', {class: 'data', id: 'stats-table'},
      el('tr', {}, el('th', {class: 'l'}, ''), labels.map(l => el('th', {}, l))),
      names.map(([k, label, digits]) => el('tr', {}, el('th', {class: 'l'}, label),
        labels.map(l => numCell(view.stats[l][k], digits))))));
}

// RoPE: the query's and the key's score (the picked key, else the most weighted) at every
// distance i - j, as attention.py's rope_by_distance gives it; the model's own in bold
function drawRope() {
  const r = view.rope;
  $('rope').hidden = !r;
  if (!r) return;
  const j = r.key, labels = view.labels;
  $('rope').replaceChildren(
    el('h3', {}, `RoPE: q_${view.query} and k_${j} (`, Lab.tok(labels[j]), ') at every distance i − j'),
    el('div', {class: 'scroll'}, el('table', {class: 'data', id: 'rope-table'},
      el('tr', {}, el('th', {class: 'l'}, 'i − j'), r.scores.map((_, d) => el('th', {}, `${d}`))),
      el('tr', {}, el('th', {class: 'l'}, 'score'), r.scores.map((x, d) => d === r.distance
        ? numCell(x, 3, {class: 'num own'}) : numCell(x, 3))))),
    el('p', {class: 'muted small'}, `Both turned back to before RoPE, then q turned by each distance: ` +
      `the score of the two that far apart, wherever they sit. Bold: the model's own, ${r.distance} apart.`));
}

// a new name forgets the old one's query at once (an Enter may draw before the typing pauses),
// and redraws as the learner types (no Enter needed), at its last position
Lab.on('form', 'submit', draw);
Lab.on('text', 'input', () => { $('query').value = ''; key = null; });
Lab.on('text', 'input', Lab.debounced(draw));
for (const id of ['layer', 'head', 'query', 'scale']) Lab.on(id, 'change', () => { key = null; draw(); });
Lab.on('temperature', 'input', draw);
Lab.on('heads', 'mouseover', readout);
// a compact heatmap's cells are sized to the window: drawn again when it changes
window.addEventListener('resize', Lab.debounced(() => { if (view) { drawHeads(); placeDetail(); } }, 150));
Lab.start(draw);
