// The Sampling page draws POST /api/sampling (lab/sampling.py's compute) in two requests: the
// distributions (one forward pass, drawn at once), then the draws, asked once the learner pauses.
'use strict';

const {$, el} = Lab;
const COMPARE = [0, 0.5, 1, 2];  // the temperatures `lab sampling` compares by default
const NUM = {lines: 10, text: 1};  // names, or continuations, a setting starts with

async function draw() {
  const own = Number($('temperature').value);
  $('temperature-value').textContent = $('temperature').value;
  const text = Lab.isText();
  const common = {ckpt: Lab.ckpt(), prompt: $('prompt').value, top_k: Number($('top_k').value)}, since = Lab.inputs;
  const distribution = Lab.guard(async () => {
    const data = await Lab.api('/api/sampling?part=distribution', {...common, temperatures: [...COMPARE, own], num: 0});
    const k = data.temperatures.indexOf(own);
    $('context').replaceChildren(...data.context.map(Lab.tok));
    const most = Math.max(...data.probs[k]);
    // a vocabulary of names fits in full; a larger one (running text's 65 characters) shows those
    // above HIDE at this temperature, and says how many it leaves out
    const shown = data.chars.map((_, i) => i).filter(i => data.chars.length <= FULL_LIST || data.probs[k][i] >= HIDE);
    const left = data.chars.length - shown.length;
    $('distribution').replaceChildren(...shown.flatMap(i => {
      const char = data.chars[i], p = data.probs[k][i];
      return [el('span', {}, Lab.tok(char)), el('span', {}, Lab.bar(p / most)),  // the likeliest character: 10rem
              el('span', {class: 'num', 'data-char': char, 'data-value': p}, Lab.fmt(p))];
    }), left ? el('span', {class: 'muted small whole-row'},
                  `${left} more ${data.unit}s below ${HIDE}`) : '');
    $('sandbox').replaceChildren(sandbox(data, own));
  }, ['distribution', 'sandbox']);
  $('drawn').classList.add('stale');  // until this input's draws come
  // asked once the distribution is drawn and the learner has paused (the server computes one at a time)
  await distribution;
  if (!await Lab.paused(since)) return;
  await Lab.guard(async () => {
    const data = await Lab.api('/api/sampling?part=draws', {...common, temperatures: [own], names_at: [own],
      num: Number($('num').value), seed: Number($('seed').value), ...(text ? {length: Number($('length').value)} : {})});
    if (Lab.inputs !== since) return;  // the learner changed a setting while these were drawn: they are not its
    $('names').replaceChildren(...draws(data, own, text));
    $('drawn').classList.remove('stale');
  }, ['names'], false);
}

// the draws at this page's temperature, without and with the top-k cut: names, each marked *
// where the training data has it, or running text's continuations after the prompt (in bold)
function draws(data, own, text) {
  const about = el('p', {class: 'muted small', id: 'marks'}, ...(text
    ? [`${data.num} continuation${data.num === 1 ? '' : 's'} of ${data.length} characters at each setting, ` +
       `seed ${data.seed}, as sample.py --length draws them`]
    : data.marked ? ['* = a name of the training data (', data.source, '; trained on or held out); the others are new']
      : [`not marked: ${data.source}`]));
  return [about, ...data.draws.filter(d => d.temperature === own).map(d =>
    el('div', {class: 'draw', 'data-top-k': d.top_k ?? 'none'},
      el('h4', {}, d.top_k ? `top-k ${d.top_k}` : (own === 0 ? 'greedy' : 'no cut')),
      text ? d.texts.map(t => Lab.textBlock(t, data.prompt, {class: 'text-block sample'}))
        : el('ol', {class: 'samples', 'data-top-k': d.top_k ?? 'none'}, d.names.map((name, i) => {
          const known = data.marked && d.known[i];
          return el('li', {class: known ? 'known' : (data.marked ? 'new' : null)},
                    name || '(empty: BOS first)', known ? '*' : '');
        }))))];
}

// one column of bars per temperature; a character is left out when it is below HIDE at every one
// (and, in a vocabulary of more than FULL_LIST, from the distribution at this temperature)
const HIDE = 0.005, FULL_LIST = 30;

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
      // the largest p of all (1 at T = 0): 5rem
      s.probs.map((p, k) => el('td', {class: isOwn(s.temperatures[k]) ? 'p own' : 'p'}, Lab.bar(p[i] / most, 5), ' ',
        el('span', {class: 'num', 'data-value': p[i]}, Lab.fmt(p[i], 3)))))));
  const hidden = s.chars.length - shown.length;
  return el('div', {class: 'panel'},
    el('h3', {}, 'side by side: p = softmax(logits / T)'),
    el('p', {class: 'muted small'}, 'T = 0 puts all the probability on the favourite; entropy in ' +
      `bits: 0 when one ${s.unit} is certain, largest when all are equal; `,
      el('span', {class: 'hit'}, 'green'), `: the ${s.top_k} ${s.unit}s top-k keeps` +
      (hidden ? `; ${hidden} ${s.unit}s below ${HIDE} at every T are left out` : '')),
    el('p', {class: 'mono small', id: 'top-k-line'},
      `top-k ${s.top_k} at T=1 keeps ${s.top_k_kept.join(' ')}: `,
      el('span', {'data-value': s.top_k_mass}, Lab.fmt(s.top_k_mass, 3)),
      ` of the probability, renormalised to entropy ${Lab.fmt(s.top_k_entropy, 3)} bits ` +
      `(T=1 whole: ${Lab.fmt(s.entropy[one], 3)} bits)`),
    table);
}

// how many to draw, to start with: ten names, or one continuation (each takes a forward pass a
// character); set again when a checkpoint of the other kind is picked, unless the learner chose
function startingNum() {
  const mode = Lab.isText() ? 'text' : 'lines', other = mode === 'text' ? 'lines' : 'text';
  if ($('num').value === String(NUM[other]) || $('num').value === $('num').defaultValue) $('num').value = NUM[mode];
}

Lab.on('form', 'submit', draw);
Lab.on('temperature', 'input', draw);
const later = Lab.debounced(draw);  // as the learner types: once they pause
for (const id of ['prompt', 'num', 'seed', 'top_k', 'length']) Lab.on(id, 'input', later);
Lab.start(() => { startingNum(); return draw(); });
