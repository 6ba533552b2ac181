// The Embeddings page draws what POST /api/embeddings answers (lab/embeddings.py's compute): it
// only places the labels and colours the cells.
'use strict';

const {$, el, svg} = Lab;

async function draw() {
  await Lab.guard(async () => {
    const e = await Lab.api('/api/embeddings', {ckpt: Lab.ckpt(), neighbours: Number($('neighbours').value)});
    scatter(e);
    neighbours(e);
    wpe(e);
  }, ['scatter', 'near', 'wpe']);
}

// Each label near its point, nudged where it would cover another: the first of OFFSETS (in
// the picture's units) at which its box meets no label placed before it, a thin line back to
// the point when it moved. Running text's 65 characters crowd where names' 27 did not.
const OFFSETS = [[0, 0], [0, -16], [0, 16], [11, 0], [-11, 0], [11, -16], [-11, -16], [11, 16], [-11, 16],
                 [0, -32], [0, 32], [22, 0], [-22, 0], [22, -16], [-22, -16], [22, 16], [-22, 16],
                 [33, 0], [-33, 0], [0, -48], [0, 48]];
const CHAR_W = 8.5, LABEL_H = 16;  // a label's box at the picture's 13 px monospace font, its line's height

function place(points) {
  const placed = [];
  return points.map(([x, y, text]) => {
    const w = CHAR_W * [...text].length + 2;
    const box = ([dx, dy]) => [x + dx - w / 2, y + dy - LABEL_H + 4, w, LABEL_H];  // y is the baseline
    const free = b => placed.every(([x0, y0, w0, h0]) => b[0] + b[2] <= x0 || x0 + w0 <= b[0] || b[1] + b[3] <= y0 || y0 + h0 <= b[1]);
    const offset = OFFSETS.find(o => free(box(o))) || OFFSETS[0];
    placed.push(box(offset));
    return offset;
  });
}

function scatter(e) {
  const W = 520, H = 400, pad = 34;
  const xs = e.coords.map(c => c[0]), ys = e.coords.map(c => c[1]);
  const span = (lo, hi) => (hi - lo) || 1;
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const X = x => pad + (x - x0) / span(x0, x1) * (W - 2 * pad);
  const Y = y => H - pad - (y - y0) / span(y0, y1) * (H - 2 * pad);
  const shown = e.labels.map(l => (l === '<BOS>' ? 'BOS' : l));
  const offsets = place(e.coords.map(([cx, cy], i) => [X(cx), Y(cy), shown[i]]));
  const s = $('scatter');
  s.setAttribute('viewBox', `0 0 ${W} ${H}`);
  s.setAttribute('width', W);
  s.setAttribute('height', H);
  s.replaceChildren(
    svg('line', {class: 'axis', x1: pad, x2: W - pad, y1: H - pad + 8, y2: H - pad + 8}),
    svg('line', {class: 'axis', x1: pad - 8, x2: pad - 8, y1: pad, y2: H - pad}),
    svg('text', {class: 'tick', x: W / 2, y: H - 6, 'text-anchor': 'middle'},
      `principal component 1 (${(e.share[0] * 100).toFixed(0)} % of the spread)`),
    svg('text', {class: 'tick', x: 12, y: H / 2, transform: `rotate(-90 12 ${H / 2})`, 'text-anchor': 'middle'},
      `component 2 (${(e.share[1] * 100).toFixed(0)} %)`),
    ...e.labels.flatMap((label, i) => {
      const [px, py] = [X(e.coords[i][0]), Y(e.coords[i][1])], [dx, dy] = offsets[i];
      const moved = dx || dy;
      return [moved ? svg('line', {class: 'leader', x1: px, y1: py - 4, x2: px + dx, y2: py + dy - 4}) : null,
        svg('text', {x: px + dx, y: py + dy, 'text-anchor': 'middle',
          class: `${e.vowel[i] ? 'vowel' : 'consonant'}${Lab.isGlyph(label) ? ' glyph' : ''}`,
          'data-label': label, 'data-x': e.coords[i][0], 'data-y': e.coords[i][1]},
          svg('title', {}, `${label}: (${Lab.fmt(e.coords[i][0], 3)}, ${Lab.fmt(e.coords[i][1], 3)})`), shown[i])];
    }));
  $('share').textContent = `wte: ${e.labels.length} rows of ${e.n_embd} numbers. The two components hold ` +
    `${(e.share[0] * 100).toFixed(0)} % and ${(e.share[1] * 100).toFixed(0)} % of how the rows differ.` +
    (e.data_mode === 'text' ? ' (Running text never reads BOS: its row is left out.)' : '');
}

function neighbours(e) {
  const k = e.neighbours[0].length;
  $('near').replaceChildren(el('h3', {}, 'nearest neighbours, by cosine similarity'),
    el('table', {class: 'data', id: 'near-table'},
      el('tr', {}, el('th', {class: 'l'}, 'char'), Array.from({length: k}, (_, n) => el('th', {class: 'l'}, `#${n + 1}`))),
      e.labels.map((label, i) => el('tr', {'data-label': label}, el('td', {class: `l mono ${e.vowel[i] ? 'miss' : ''}`}, Lab.tok(label)),
        e.neighbours[i].map(([other, sim]) => el('td', {class: 'l mono'}, Lab.tok(other), ' ',
          el('span', {class: 'num muted', 'data-value': sim}, Lab.fmt(sim, 2))))))));
}

// a compact map's cells sized to the panel, a hovered cell's numbers in the read-out line
function wpe(e) {
  if (e.wpe_cosine === null) {  // a RoPE model: no wpe, and the API's words why
    $('wpe').replaceChildren(el('h3', {}, 'wpe'), el('p', {id: 'wpe-note'}, e.wpe_note));
    return;
  }
  const c = e.wpe_cosine, n = c.length, compact = Lab.heatmap.compact(n);
  const size = Lab.heatmap.cell($('wpe').clientWidth - 60, n);
  const table = Lab.heatmap.table(n, {id: 'wpe-table'}, i => i, (i, j) => {
    const x = c[i][j], td = el('td', {class: 'cell', 'data-value': x, 'data-i': i, 'data-j': j,
                                      title: `positions ${i} and ${j}: ${x}`}, compact ? null : Lab.fmt(x, 1));
    td.style.background = x >= 0 ? Lab.shade(x) : `rgba(232, 89, 12, ${Math.min(1, -x).toFixed(3)})`;
    if (x > 0.6) td.style.color = 'white';
    return td;
  });
  if (compact) table.style.setProperty('--cell', `${size}px`);
  $('wpe').replaceChildren(el('h3', {}, 'wpe: cosine similarity of position i (rows) and position j'),
    el('p', {class: 'mono small readout', id: 'wpe-readout', hidden: !compact}, 'hover a cell for its numbers'),
    el('div', {class: 'scroll'}, table),
    el('p', {class: 'muted small'}, 'Blue: alike (1 on the diagonal); orange: pointing apart. Neighbouring positions ' +
      'tend to get similar embeddings.'));
}

// the read-out line of a compact wpe map: the hovered cell's positions and similarity
function readout(ev) {
  const td = ev.target.closest('#wpe-table td.cell');
  if (!td) return;
  $('wpe-readout').replaceChildren(`positions ${td.dataset.i} and ${td.dataset.j}: cosine similarity `,
    el('b', {}, Lab.fmt(Number(td.dataset.value), 3)));
}

Lab.on('neighbours', 'input', Lab.debounced(draw));
Lab.on('wpe', 'mouseover', readout);
Lab.start(draw);
