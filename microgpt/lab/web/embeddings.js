// The Embeddings page: wte's rows on their two principal components, each character's nearest
// neighbours by cosine similarity, and the cosine similarity of every pair of wpe rows. Every
// number comes from POST /api/embeddings (microgpt/lab/embeddings.py's compute); this file
// only places the labels and colours the cells.
'use strict';

const {el, svg} = Lab;
const $ = id => document.getElementById(id);

async function draw() {
  await Lab.guard(async () => {
    const e = await Lab.api('/api/embeddings', {ckpt: Lab.ckpt(), neighbours: Number($('neighbours').value)});
    scatter(e);
    neighbours(e);
    wpe(e);
  }, ['scatter', 'near', 'wpe']);
}

function scatter(e) {
  const W = 520, H = 400, pad = 34;
  const xs = e.coords.map(c => c[0]), ys = e.coords.map(c => c[1]);
  const span = (lo, hi) => (hi - lo) || 1;
  const [x0, x1, y0, y1] = [Math.min(...xs), Math.max(...xs), Math.min(...ys), Math.max(...ys)];
  const X = x => pad + (x - x0) / span(x0, x1) * (W - 2 * pad);
  const Y = y => H - pad - (y - y0) / span(y0, y1) * (H - 2 * pad);
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
    ...e.labels.map((label, i) => svg('text', {x: X(e.coords[i][0]), y: Y(e.coords[i][1]), 'text-anchor': 'middle',
      class: e.vowel[i] ? 'vowel' : 'consonant', 'data-label': label, 'data-x': e.coords[i][0], 'data-y': e.coords[i][1]},
      svg('title', {}, `${label}: (${Lab.fmt(e.coords[i][0], 3)}, ${Lab.fmt(e.coords[i][1], 3)})`),
      label === '<BOS>' ? 'BOS' : label)));
  $('share').textContent = `wte: ${e.labels.length} rows of ${e.n_embd} numbers. The two components hold ` +
    `${(e.share[0] * 100).toFixed(0)} % and ${(e.share[1] * 100).toFixed(0)} % of how the rows differ.`;
}

function neighbours(e) {
  const k = e.neighbours[0].length;
  $('near').replaceChildren(el('h3', {}, 'nearest neighbours, by cosine similarity'),
    el('table', {class: 'data', id: 'near-table'},
      el('tr', {}, el('th', {class: 'l'}, 'char'), Array.from({length: k}, (_, n) => el('th', {class: 'l'}, `#${n + 1}`))),
      e.labels.map((label, i) => el('tr', {'data-label': label}, el('td', {class: `l mono ${e.vowel[i] ? 'miss' : ''}`}, label),
        e.neighbours[i].map(([other, sim]) => el('td', {class: 'l mono'}, `${other} `,
          el('span', {class: 'num muted', 'data-value': sim}, Lab.fmt(sim, 2))))))));
}

function wpe(e) {
  const c = e.wpe_cosine, n = c.length;
  $('wpe').replaceChildren(el('h3', {}, 'wpe: cosine similarity of position i (rows) and position j'),
    el('div', {class: 'scroll'}, el('table', {class: 'heatmap', id: 'wpe-table'},
      el('tr', {}, el('th', {}, 'i \\ j'), Array.from({length: n}, (_, j) => el('th', {}, j))),
      c.map((row, i) => el('tr', {}, el('th', {}, i), row.map((x, j) => {
        const td = el('td', {class: 'cell', 'data-value': x, title: `positions ${i} and ${j}: ${x}`}, Lab.fmt(x, 1));
        td.style.background = x >= 0 ? Lab.shade(x) : `rgba(232, 89, 12, ${Math.min(1, -x).toFixed(3)})`;
        if (x > 0.6) td.style.color = 'white';
        return td;
      }))))),
    el('p', {class: 'muted small'}, 'Blue: alike (1 on the diagonal); orange: pointing apart. Neighbouring positions ' +
      'tend to get similar embeddings.'));
}

Lab.on('neighbours', 'input', Lab.debounced(draw));
Lab.on('form', 'submit', () => {});
Lab.start(draw);
