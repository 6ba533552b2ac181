// The Sampling page: the distribution of the next character after [BOS] + the prompt at the
// chosen temperature (and top-k, once the sampler has it), and names drawn with the seeded
// sampler of sample.py. Everything comes from POST /api/sample (microgpt.sampling).
'use strict';

const {el} = Lab;
const $ = id => document.getElementById(id);

async function draw() {
  const topK = Lab.config.features.top_k;
  $('top_k').disabled = !topK;
  $('topk-note').hidden = topK;
  $('temperature-value').textContent = $('temperature').value;
  await Lab.guard(async () => {
    const body = {ckpt: Lab.ckpt(), prompt: $('prompt').value, temperature: Number($('temperature').value),
                  num: Number($('num').value), seed: Number($('seed').value)};
    if (topK && $('top_k').value !== '') body.top_k = Number($('top_k').value);
    const data = await Lab.api('/api/sample', body);
    $('context').textContent = `[BOS]${data.prompt}`;
    const most = Math.max(...data.distribution.map(d => d.p));
    $('distribution').replaceChildren(...data.distribution.flatMap(({char, p}) => {
      const bar = el('span', {class: 'bar'});
      bar.style.width = `${(p / most * 10).toFixed(2)}rem`;  // the likeliest character: 10rem
      return [el('span', {}, char), el('span', {}, bar),
              el('span', {class: 'num', 'data-char': char, 'data-value': p}, Lab.fmt(p))];
    }));
    $('sandbox').replaceChildren(...(data.sandbox ? [Lab.show(data.sandbox, "lesson 04's sampling sandbox")] : []));
    $('names').replaceChildren(...data.names.map(name => el('li', {}, name || '(empty: BOS first)')));
  });
}

Lab.on('form', 'submit', draw);
Lab.on('temperature', 'input', draw);
Lab.start(draw);
