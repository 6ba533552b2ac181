// The Sampling page: the distribution of the next character after [BOS] + the prompt at the
// chosen temperature and top-k, and names drawn with the seeded sampler of sample.py; beside
// them, lesson 04's sampling sandbox: the same distribution at T = 0 (greedy), 0.5, 1, 2 and
// the page's own temperature side by side, with each one's entropy and what a top-k cut keeps.
// Everything comes from POST /api/sample (microgpt.sampling, and microgpt/lab/sampler.py's
// sample_view for the sandbox).
'use strict';

const {el} = Lab;
const $ = id => document.getElementById(id);

async function draw() {
  $('temperature-value').textContent = $('temperature').value;
  await Lab.guard(async () => {
    const body = {ckpt: Lab.ckpt(), prompt: $('prompt').value, temperature: Number($('temperature').value),
                  num: Number($('num').value), seed: Number($('seed').value)};
    if ($('top_k').value !== '') body.top_k = Number($('top_k').value);
    const data = await Lab.api('/api/sample', body);
    $('context').textContent = `[BOS]${data.prompt}`;
    const most = Math.max(...data.distribution.map(d => d.p));
    $('distribution').replaceChildren(...data.distribution.flatMap(({char, p}) => {
      const bar = el('span', {class: 'bar'});
      bar.style.width = `${(p / most * 10).toFixed(2)}rem`;  // the likeliest character: 10rem
      return [el('span', {}, char), el('span', {}, bar),
              el('span', {class: 'num', 'data-char': char, 'data-value': p}, Lab.fmt(p))];
    }));
    $('sandbox').replaceChildren(sandbox(data.sandbox, data.temperature));
    $('names').replaceChildren(...data.names.map(name => el('li', {}, name || '(empty: BOS first)')));
  });
}

// one column of bars per temperature; a character is left out when it is below HIDE at every one
const HIDE = 0.005;

function sandbox(s, own) {
  const most = Math.max(...s.probs.flat(), 1e-12);
  const one = s.temperatures.indexOf(1);  // T = 1: the model's own distribution, top-k's reference
  const order = s.chars.map((_, i) => i).sort((a, b) => s.probs[one][b] - s.probs[one][a]);
  const shown = order.filter(i => s.probs.some(p => p[i] >= HIDE));
  const kept = new Set(s.top_k_kept);
  const isOwn = t => t === own;
  const table = el('table', {class: 'data temps', id: 'temperatures'},
    el('tr', {}, el('th', {class: 'l'}, 'next'), s.temperatures.map((t, k) =>
      el('th', {class: isOwn(t) ? 'l own' : 'l', 'data-temperature': t, 'data-entropy': s.entropy[k]},
        `T=${t}`, el('br'), t === 0 ? 'greedy' : isOwn(t) ? 'this page' : '', el('br'),
        el('span', {class: 'num'}, `${Lab.fmt(s.entropy[k], 3)} bits`)))),
    shown.map(i => el('tr', {class: kept.has(s.chars[i]) ? 'kept' : null},
      el('th', {class: 'l mono'}, s.chars[i]),
      s.probs.map((p, k) => {
        const b = el('span', {class: 'bar'});
        b.style.width = `${(p[i] / most * 5).toFixed(2)}rem`;  // the largest p of all (1 at T = 0): 5rem
        return el('td', {class: isOwn(s.temperatures[k]) ? 'p own' : 'p'}, b, ' ',
                  el('span', {class: 'num', 'data-value': p[i]}, Lab.fmt(p[i], 3)));
      }))));
  const hidden = s.chars.length - shown.length;
  return el('div', {class: 'panel'},
    el('h3', {}, 'side by side: p = softmax(logits / T)'),
    el('p', {class: 'muted small'}, 'T = 0 puts all the probability on the favourite; entropy in ' +
      'bits: 0 when one character is certain, largest when all are equal; ',
      el('span', {class: 'hit'}, 'green'), `: the ${s.top_k} characters top-k keeps` +
      (hidden ? `; ${hidden} characters below ${HIDE} at every T are left out` : '')),
    el('p', {class: 'mono small', id: 'top-k-line'},
      `top-k ${s.top_k} at T=1 keeps ${s.top_k_kept.join(' ')}: `,
      el('span', {'data-value': s.top_k_mass}, Lab.fmt(s.top_k_mass, 3)),
      ` of the probability, renormalised to entropy ${Lab.fmt(s.top_k_entropy, 3)} bits ` +
      `(T=1 whole: ${Lab.fmt(s.entropy[one], 3)} bits)`),
    table);
}

Lab.on('form', 'submit', draw);
Lab.on('temperature', 'input', draw);
Lab.start(draw);
