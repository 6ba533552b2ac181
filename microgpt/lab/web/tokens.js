// The Tokens page draws what POST /api/tokens answers (lab/tokens.py's compute): it only
// colours the tokens and lays them out.
'use strict';

const {$, el} = Lab;
const COLOURS = ['#dbeafe', '#fde68a', '#bbf7d0', '#fbcfe8', '#ddd6fe', '#fed7aa'];  // one per token, in turn

async function draw() {
  await Lab.guard(async () => {
    const d = await Lab.api('/api/tokens', {ckpt: Lab.ckpt(), text: $('text').value, merges: Number($('merges').value)});
    const kind = d.kind === 'bpe' ? `byte pairs: 256 bytes, ${d.n_merges} merges and BOS` : 'characters: one token each, and BOS';
    $('summary').textContent = `${kind} (${d.vocab_size} tokens); ${d.n_chars} characters in ${d.tokens.length} tokens`;
    // each token, then the cut after it: both say why when clicked, tapped, hovered or focused
    const why = d.tokens.map(t => `'${t.label}' (id ${t.id}): ${t.why}`);
    const cutWhy = d.cuts.map(c => `'${d.tokens[c.after].label}' | '${d.tokens[c.after + 1].label}': ${c.why}`);
    const pick = (node, text) => () => {
      for (const old of $('pieces').querySelectorAll('.chosen')) old.classList.remove('chosen');
      node.classList.add('chosen');
      $('why').textContent = text;
    };
    const pieces = d.tokens.flatMap((t, i) => {
      const chip = el('span', {class: 'token', tabindex: 0, 'data-id': t.id, 'data-index': i,
                               title: `id ${t.id}: bytes ${t.bytes.join(' ')}`}, t.label);
      chip.style.background = COLOURS[i % COLOURS.length];
      const cut = i < d.cuts.length ? el('span', {class: 'cut', tabindex: 0, 'data-cut': i, role: 'button',
                                                  'aria-label': `why the cut after token ${i}`}) : null;
      return cut ? [[chip, why[i]], [cut, cutWhy[i]]] : [[chip, why[i]]];
    });
    for (const [node, text] of pieces) {
      for (const event of ['click', 'mouseenter', 'focus']) node.addEventListener(event, pick(node, text));
    }
    $('pieces').replaceChildren(...pieces.map(([node]) => node));
    $('why').textContent = '';
    if (pieces.length) pick(...(pieces[1] || pieces[0]))();  // the first cut (or the only token) to start with
    $('token-table').replaceChildren(el('h3', {}, 'each token'), el('div', {class: 'scroll'}, el('table', {class: 'data', id: 'tokens-table'},
      el('tr', {}, ['id', 'token', 'bytes', 'made by'].map(h => el('th', {}, h))),
      d.tokens.map(t => el('tr', {}, el('td', {class: 'num'}, String(t.id)), el('td', {class: 'mono'}, t.label),
                                     el('td', {class: 'mono'}, t.bytes.join(' ')),
                                     el('td', {class: 'mono'}, t.merge === null ? (d.kind === 'bpe' ? 'a byte' : '') : `merge ${t.merge}`))))));
    $('merge-table').replaceChildren(el('h3', {}, d.kind === 'bpe'
      ? `the first ${d.merges.length} of ${d.n_merges} merges, in the order learned` : 'no merges: a character model'),
      ...(d.merges.length ? [el('table', {class: 'data', id: 'merges-table'},
        el('tr', {}, ['#', 'pair', 'makes'].map(h => el('th', {}, h))),
        d.merges.map(m => el('tr', {}, el('td', {class: 'num'}, String(m.k)),
          el('td', {class: 'mono'}, `${m.parts[0]} + ${m.parts[1]} (${m.pair.join(' ')})`),
          el('td', {class: 'mono'}, `${m.label} (${m.id})`))))] : []));
    $('fed').textContent = `fed to the model ${d.data_mode === 'lines' ? 'after BOS, as a name' : 'as running text'}: ` +
      `[${d.fed.join(', ')}]`;
  }, ['pieces', 'why', 'token-table', 'merge-table', 'fed']);
}

Lab.on('form', 'submit', draw);
const later = Lab.debounced(draw);  // as the learner types: once they pause
for (const id of ['text', 'merges']) Lab.on(id, 'input', later);
Lab.start(draw);
