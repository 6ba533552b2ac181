// The Attention by hand page sends the boxes as typed to POST /api/byhand (lab/byhand.py's
// compute), which reads them or names the box it cannot read; this file only draws.
'use strict';

const {$, el, num, scroll} = Lab;
let boxes = null;   // what the boxes hold: {tokens, q, k, v, w_o}; null until the first answer
let maxTokens = 1;  // how many tokens the server takes (its answer says: limits.MAX_HAND_TOKENS)

function vec(xs, digits = 3, attrs = {}) {
  return el('span', {class: 'mono', 'data-values': JSON.stringify(xs), ...attrs},
            '[', xs.flatMap((x, c) => [c ? ', ' : '', num(x, digits)]), ']');
}

function options(select, n, label, value) {
  select.replaceChildren(...Array.from({length: n}, (_, i) => el('option', {value: i + 1}, label(i + 1))));
  select.value = Math.min(Math.max(1, value), n);
}

async function draw() {
  await Lab.guard(async () => {
    const body = {scale: $('scale').checked, batch: Number($('batch').value), length: Number($('length').value),
                  d_model: Number($('d_model').value), n_heads: Number($('n_heads').value),
                  bytes: Number($('bytes').value)};
    if (boxes) {
      Object.assign(body, {tokens: boxes.tokens, q: boxes.q, k: boxes.k, v: boxes.v,
                           query: Math.min(Number($('query').value) || boxes.k.length, boxes.k.length), n_head: Number($('n_head').value) || 1});
      if (boxes.w_o) body.w_o = boxes.w_o;
    }
    const r = await Lab.api('/api/byhand', body);
    maxTokens = r.max_tokens;
    if (!boxes) {
      boxes = {tokens: r.tokens, ...r.inputs};
      drawBoxes();
    }
    if (!boxes.w_o) boxes.w_o = r.inputs.w_o;  // the identity, as the server read it
    options($('query'), r.T, i => `${i} ${r.tokens[i - 1]}`, r.query + 1);
    options($('n_head'), r.d, i => `${i}`, r.n_head);
    $('note').textContent = r.q_given.every(g => g) ? '' :
      `The worked example needs no ${r.q_given.map((g, j) => g ? null : `q${j + 1}`).filter(Boolean).join(', ')} ` +
      'for token 3: the preset\'s is made up, and matters only when that token is the query.';
    drawScores(r);
    drawSoftmax(r);
    drawOutput(r);
    drawHeads(r);
    drawShapes(r.shapes);
  }, ['scores', 'softmax', 'output', 'heads', 'shapes', 'memory']);
}
const later = Lab.debounced(draw);

// one card per token: its name and its q, k, v as text boxes, sent as typed
function drawBoxes() {
  $('tokens').replaceChildren(...boxes.k.map((_, j) => el('div', {class: 'panel', 'data-token': j + 1},
    el('div', {class: 'vec'},
      el('span', {class: 'muted'}, `token ${j + 1}`),
      el('input', {type: 'text', value: boxes.tokens[j], id: `token-${j + 1}`, 'aria-label': `token ${j + 1}`,
                   oninput: e => { boxes.tokens[j] = e.target.value; later(); }}),
      ['q', 'k', 'v'].flatMap(name => [el('span', {class: 'mono'}, `${name}${j + 1}`),
        el('input', {type: 'text', value: boxes[name][j], id: `${name}-${j + 1}`, autocomplete: 'off',
                     'aria-label': `${name}${j + 1}`,
                     oninput: e => { boxes[name][j] = e.target.value; later(); }})])))));
}

function drawScores(r) {
  const h = r.head, i = r.query;
  $('scores').replaceChildren(el('h3', {}, `1) scores q${i + 1}·k_j, 2) ÷ √${r.d}`),
    scroll(el('table', {class: 'data', id: 'score-table'},
      el('tr', {}, el('th', {class: 'l'}, 'key'), el('th', {class: 'l'}, 'q·k, one product per dimension'),
        el('th', {}, 'q·k'), el('th', {}, r.scale ? `÷ ${Lab.fmt(h.divisor, 3)}` : 'not scaled')),
      h.raw.map((raw, j) => el('tr', {'data-key': j + 1},
        el('td', {class: 'l mono'}, `${j + 1} ${r.tokens[j]}`),
        el('td', {class: 'l mono'}, h.products[j].map(p => Lab.fmt(p, 2)).join(' + ')),
        el('td', {}, num(raw, 3, {'data-kind': 'raw'})), el('td', {}, num(h.scores[j], 3, {'data-kind': 'score'})))),
      r.masked.map(j => el('tr', {'data-key': j + 1, class: 'muted'}, el('td', {class: 'l mono'}, `${j + 1} ${r.tokens[j]}`),
        el('td', {class: 'l'}, 'a future token: masked'), el('td', {}, ''), el('td', {}, '−∞'))))));
}

function drawSoftmax(r) {
  const h = r.head;
  $('softmax').replaceChildren(el('h3', {}, '3) softmax: e^score, their sum, the weights'),
    scroll(el('table', {class: 'data', id: 'softmax-table'},
      el('tr', {}, el('th', {class: 'l'}, 'key'), el('th', {}, 'e^score'), el('th', {}, 'weight'), el('th', {}, '%')),
      h.exps.map((e, j) => el('tr', {'data-key': j + 1}, el('td', {class: 'l mono'}, `${j + 1} ${r.tokens[j]}`),
        el('td', {}, num(e, 3, {'data-kind': 'exp'})), el('td', {}, num(h.weights[j], 3, {'data-kind': 'weight'})),
        el('td', {}, `${(h.weights[j] * 100).toFixed(1)} %`))),
      r.masked.map(j => el('tr', {'data-key': j + 1, class: 'muted'}, el('td', {class: 'l mono'}, `${j + 1} ${r.tokens[j]}`),
        el('td', {}, 'e^−∞ = 0'), el('td', {}, num(0, 3, {'data-kind': 'weight'})), el('td', {}, '0 %'))),
      el('tr', {}, el('th', {class: 'l'}, 'sum'), el('td', {}, num(h.sum, 3, {id: 'exp-sum'})), el('td', {}, '1.000'), el('td', {}, '')))));
}

function drawOutput(r) {
  const h = r.head, i = r.query;
  $('output').replaceChildren(el('h3', {}, `4) out${i + 1} = Σ w_j · v_j, component by component`),
    scroll(el('table', {class: 'data', id: 'output-table'},
      el('tr', {}, el('th', {class: 'l'}, ''), el('th', {}, 'w_j'),
        Array.from({length: r.d}, (_, c) => el('th', {}, `component ${c + 1}`))),
      h.weighted.map((row, j) => el('tr', {'data-key': j + 1}, el('td', {class: 'l mono'}, `w${j + 1} · v${j + 1}`),
        el('td', {}, num(h.weights[j])), row.map(x => el('td', {}, num(x))))),
      el('tr', {id: 'out-row'}, el('th', {class: 'l'}, `out${i + 1}`), el('td', {}, ''),
        h.out.map((x, c) => el('td', {}, num(x, 3, {'data-kind': 'out', 'data-component': c + 1})))))));
}

function drawHeads(r) {
  const rows = r.w_o.map((row, n) => el('input', {type: 'text', value: boxes.w_o[n], id: `w_o-${n + 1}`,
    'aria-label': `W_O row ${n + 1}`, oninput: e => { boxes.w_o[n] = e.target.value; later(); }}));
  $('heads').replaceChildren(el('h3', {}, `5) ${r.n_head} head${r.n_head > 1 ? 's' : ''} of ${r.head_dim}, side by side, then W_O`),
    el('div', {class: 'row'},
      scroll(el('table', {class: 'data', id: 'heads-table'},
        el('tr', {}, el('th', {class: 'l'}, 'head'), el('th', {class: 'l'}, 'its dimensions'),
          el('th', {class: 'l'}, 'weights over the visible keys'), el('th', {class: 'l'}, 'its output')),
        r.heads.map((head, n) => el('tr', {'data-head': n}, el('td', {class: 'l'}, n),
          el('td', {class: 'l mono'}, `${head.slice[0] + 1}..${head.slice[1]}`),
          el('td', {class: 'l'}, vec(head.weights)), el('td', {class: 'l'}, vec(head.out)))),
        el('tr', {}, el('th', {class: 'l'}, 'concat'), el('td', {}, ''), el('td', {}, ''),
          el('td', {class: 'l'}, vec(r.concat, 3, {id: 'concat'}))),
        el('tr', {}, el('th', {class: 'l'}, 'W_O · concat'), el('td', {}, ''), el('td', {}, ''),
          el('td', {class: 'l'}, vec(r.final, 3, {id: 'final'}))))),
      el('div', {}, el('p', {class: 'muted small'}, `W_O, one row per output (stored [n_out][n_in] as every ` +
        'microgpt matrix): out[r] = Σ_c W_O[r][c] · concat[c]. By default it is the identity: it passes concat through.'),
        el('div', {class: 'vec'}, rows.flatMap((input, n) => [el('span', {class: 'mono'}, `row ${n + 1}`), input])),
        el('button', {type: 'button', class: 'secondary', id: 'identity',
                      onclick: () => { boxes.w_o = null; draw(); }}, 'W_O = the identity'))));
}

function drawShapes(s) {
  $('shapes').replaceChildren(scroll(el('table', {class: 'data', id: 'shapes-table'},
    el('tr', {}, el('th', {class: 'l'}, ''), el('th', {class: 'l'}, 'shape'), el('th', {}, 'numbers'), el('th', {class: 'l'}, '')),
    s.rows.map(row => el('tr', {}, el('td', {class: 'l mono'}, row.name), el('td', {class: 'l mono'}, `[${row.shape.join(', ')}]`),
      el('td', {}, Number(row.numbers).toLocaleString('en')), el('td', {class: 'l muted'}, row.meaning))))));
  const mib = s.score_bytes / 2 ** 20;
  $('memory').replaceChildren(el('p', {class: 'big'}, 'one layer\'s score matrix: ',
    el('span', {class: 'num', id: 'score-numbers', 'data-value': s.score_numbers}, Number(s.score_numbers).toLocaleString('en')),
    ' numbers'),
    el('p', {class: 'big'}, `× ${s.bytes_per_number} bytes = `,
      el('span', {class: 'num', id: 'score-mib', 'data-value': mib}, `${mib.toLocaleString('en', {maximumFractionDigits: 2})} MiB`)),
    el('p', {class: 'muted small'}, 'd_model is not in it: the matrix grows with the heads and the square of T. ' +
      `head_dim here is ${s.head_dim}. FlashAttention never builds it whole.`));
}

function resize(T) {
  for (const name of ['q', 'k', 'v']) {
    while (boxes[name].length < T) boxes[name].push(boxes[name][boxes[name].length - 1]);
    boxes[name].length = T;
  }
  while (boxes.tokens.length < T) boxes.tokens.push(`token ${boxes.tokens.length + 1}`);
  boxes.tokens.length = T;
  drawBoxes();
  draw();
}

Lab.on('add', 'click', () => { if (boxes && boxes.k.length < maxTokens) resize(boxes.k.length + 1); });
Lab.on('remove', 'click', () => { if (boxes && boxes.k.length > 1) resize(boxes.k.length - 1); });
Lab.on('preset', 'click', () => { boxes = null; $('query').value = ''; $('n_head').value = ''; draw(); });
for (const id of ['query', 'n_head', 'scale', 'bytes']) Lab.on(id, 'change', draw);
for (const id of ['batch', 'length', 'd_model', 'n_heads']) Lab.on(id, 'input', later);
Lab.start(draw);
