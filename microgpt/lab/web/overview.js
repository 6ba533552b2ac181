// The Overview page draws what POST /api/overview answers (lab/overview.py's predictions and
// continuation).
'use strict';

const {$, el} = Lab;

function barRow(char, p, isTrue) {
  return [el('span', {class: isTrue ? 'hit' : null}, Lab.tok(char)),
          el('span', {}, Lab.bar(p, 10, isTrue ? 'bar true' : 'bar')),  // 10rem = probability 1
          el('span', {class: 'num'}, Lab.fmt(p))];
}

async function draw() {
  await Lab.guard(async () => {
    const data = await Lab.api('/api/overview', {
      ckpt: Lab.ckpt(), text: $('text').value, top: Number($('top').value),
      temperature: Number($('temperature').value), seed: Number($('seed').value)});
    const cards = data.positions.map(r => {
      const bars = r.top.flatMap(([char, p]) => barRow(char, p, char === r.target));
      if (r.rank > r.top.length) bars.push(...barRow(r.target, r.p, true));
      const scored = r.target !== null;  // running text: the last position's next is not in the text
      return el('div', {class: 'position', 'data-position': r.position},
        el('h3', {}, `pos ${r.position} reads `, Lab.tok(r.reads), ' → next ', scored ? Lab.tok(r.target) : '?'),
        el('div', {class: 'bars'}, bars),
        scored ? el('p', {class: 'mono'}, `p = ${Lab.fmt(r.p)}  loss = ${Lab.fmt(r.loss, 3)} `,
                    el('span', {class: r.hit ? 'hit' : 'miss'}, r.hit ? '✓' : `✗ (rank ${r.rank})`))
               : el('p', {class: 'muted small'}, `the next ${data.unit} is not in the text: not scored`));
    });
    $('positions').replaceChildren(...cards);
    const rest = data.continuation.slice(data.text.length), text = data.data_mode === 'text';
    const what = text ? `predicted ${data.unit}s` : 'positions';
    $('summary').replaceChildren(
      el('p', {class: 'mono', id: 'mean-loss', 'data-value': data.mean_loss}, data.mean_loss === null
        ? `no position has its next ${data.unit} in the text: type a second ${data.unit} for a loss`
        : `mean loss over ${data.scored} ${what}: ${Lab.fmt(data.mean_loss)}` +
          `   (uniform guess over ${data.vocab_size} tokens: ln ${data.vocab_size} = ${Lab.fmt(data.uniform_loss)})`),
      text ? el('div', {id: 'continuation'},
               el('p', {class: 'mono'}, `continuation of ${rest.length} characters (temperature ${data.temperature}, ` +
                 `seed ${data.seed}; the text in bold, newlines kept):`),
               Lab.textBlock(rest, data.text))
           : el('p', {class: 'mono', id: 'continuation'},
               `continuation (temperature ${data.temperature}, seed ${data.seed}): `,
               el('b', {}, data.text), rest || ' (the model ends the name right there)'));
    drawLosses(data.positions.filter(r => r.target !== null));
  }, ['summary', 'losses', 'positions']);
}

// the loss at each position as a column chart
function drawLosses(rows) {
  const max = Math.max(...rows.map(r => r.loss), 1e-9);
  const table = el('table', {class: 'data', id: 'loss-table'},
    el('tr', {}, el('th', {class: 'l'}, 'position'), rows.map(r => el('th', {}, `${r.position}`))),
    el('tr', {}, el('th', {class: 'l'}, 'next'), rows.map(r => el('td', {}, Lab.tok(r.target)))),
    el('tr', {}, el('th', {class: 'l'}, 'loss = −ln p'),
      rows.map(r => el('td', {class: 'num loss', 'data-value': r.loss}, Lab.fmt(r.loss, 3)))),
    el('tr', {}, el('th', {class: 'l'}, ''), rows.map(r => {
      const bar = el('span', {class: 'bar'});
      bar.style.width = '0.8rem';
      bar.style.height = `${(r.loss / max * 4).toFixed(2)}rem`;
      return el('td', {}, bar);
    })));
  $('losses').replaceChildren(el('h3', {}, 'loss at each position'), table);
}

Lab.on('form', 'submit', draw);
const later = Lab.debounced(draw);  // as the learner types: once they pause
for (const id of ['text', 'top', 'temperature', 'seed']) Lab.on(id, 'input', later);
Lab.start(draw);
