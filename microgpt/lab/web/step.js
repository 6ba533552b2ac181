// The Lesson 04 page draws what POST /api/step answers (lab/step.py's step_report, as
// `python -m microgpt.lab step` prints it), in the same numbered sections; it only formats and sizes.
'use strict';

const {$, el, bar, num} = Lab;

// a signed number in exponent form, as the terminal prints Adam's numbers (+6.554412e-01)
function sci(x, digits = 6) {
  const s = Number(x).toExponential(digits);
  return x >= 0 ? `+${s}` : s;
}

function signed(x, digits = 4) {
  return `${x >= 0 ? '+' : '−'}${Math.abs(x).toFixed(digits)}`;
}

// a bar around a centre line: negative to the left (green: pulled up), positive to the right
function diverging(x, largest, rem = 1.2) {
  const left = el('span', {class: 'half left'}, x < 0 ? bar(-x / largest, rem, 'bar true') : null);
  const right = el('span', {class: 'half right'}, x > 0 ? bar(x / largest, rem, 'bar down') : null);
  return el('span', {class: 'diverging'}, left, right);
}

// On a large model (registry.STEP_NUMPY_FIRST_ABOVE) two answers per input: the numpy training
// path's step (milliseconds, the same numbers to 1e-12), drawn at once, then the scalar engine's
// (a second on a 4x64 model), asked once the learner pauses, which adds the graph's size and the
// engines' check. Each engine has a route of its own (the query string), so that Lab.api drops
// only an older input's answer from the same engine. A text longer than the scalar graph takes
// (step_scalar_positions) gets the numpy step alone, and section 6 says why.
async function draw() {
  const body = {ckpt: Lab.ckpt(), text: $('text').value, lr: Number($('lr').value)};
  const info = Lab.info(), chars = [...body.text].length, since = Lab.inputs;
  // the positions the step reads: [BOS] + the name, or the window's characters but its last
  const positions = Lab.isText() ? Math.min(chars - 1, info.config.block_size) : chars + 1;
  if (positions > info.step_scalar_positions) {
    await Lab.guard(async () => show(await Lab.api('/api/step?engine=numpy', {...body, engine: 'numpy'}), false), ['result']);
    return;
  }
  const numpyFirst = info.step_numpy_first;  // else a small model: the scalar step answers at once
  if (numpyFirst) {
    await Lab.guard(async () => show(await Lab.api('/api/step?engine=numpy', {...body, engine: 'numpy'})), ['result']);
    if (!await Lab.paused(since)) return;  // still typing: the next name's numpy step comes first
  }
  // with the numpy step shown, no busy sign over the page for the scalar one: the numbers shown
  // are already this input's
  await Lab.guard(async () => show(await Lab.api('/api/step', {...body, engine: 'scalar'})), ['result'], !numpyFirst);
}

// data: an answer; scalarComing: whether the scalar engine's step was asked too (and follows)
function show(data, scalarComing = true) {
  $('result').replaceChildren(
    summary(data),
    el('div', {class: 'row'}, positions(data), topGrads(data)),
    el('div', {class: 'row'}, wayBack(data), adam(data)),
    graph(data, scalarComing));
  $('result').dataset.engine = data.engine;  // who computed what is on screen: the tests wait for 'scalar'
}

function summary(d) {
  const change = d.loss_after - d.loss_before, text = d.data_mode === 'text';
  const labels = [...d.positions.map(p => p.reads), d.positions[d.n - 1].target];  // the n + 1 tokens
  return el('div', {class: 'panel', id: 'summary'},
    el('p', {class: 'mono'}, text ? `one training step on the window '${d.text.replace(/\n/g, '⏎')}' of running text (no BOS): tokens `
                                  : `one training step on '${d.text}': tokens `,
      labels.flatMap(l => [Lab.tok(l), ' ']), `${d.n} positions, ` +
      `lr ${d.lr}, a fresh Adam (its first step); the checkpoint file is not changed`),
    el('p', {class: 'big mono'}, text ? "the window's loss L  " : "the name's loss L  ",
      num(d.loss_before, 6, {id: 'loss-before'}), '  →  ',
      num(d.loss_after, 6, {id: 'loss-after'}), '  ',
      el('span', {class: change < 0 ? 'hit' : 'miss'}, `(${signed(change, 6)})`),
      change < 0 ? '' : el('span', {class: 'miss'}, change === 0 ? '  unchanged: no weight had a gradient that moved it'
                                                       : '  it went up: this lr overshoots, try a smaller one')));
}

// 1) and 5): each position before and after the update
function positions(d) {
  const head = ['pos', 'reads', 'next', 'loss', 'p before', 'p after', 'change'];
  return el('div', {class: 'panel fit'},
    el('h3', {}, `1) forward, and 5) the same ${d.data_mode === 'text' ? 'window' : 'name'} after the update`),
    el('table', {class: 'data', id: 'positions'},
      el('tr', {}, head.map((h, i) => el('th', {class: i < 3 ? 'l' : null}, h))),
      d.positions.map(p => el('tr', {'data-position': p.position},
        el('td', {class: 'l'}, p.position), el('td', {class: 'l mono'}, Lab.tok(p.reads)),
        el('td', {class: 'l mono'}, Lab.tok(p.target)),
        el('td', {}, num(p.loss, 4)),
        el('td', {class: 'l'}, bar(p.p_before, 2.5), ' ', num(p.p_before, 4)),
        el('td', {class: 'l'}, bar(p.p_after, 2.5, 'bar true'), ' ', num(p.p_after, 4)),
        el('td', {class: p.p_after > p.p_before ? 'hit' : 'miss'}, signed(p.p_after - p.p_before))))),
    el('p', {class: 'muted small'}, `p = p(true next); loss = −ln p; the step's loss L is the mean ` +
      `over the ${d.n} positions`));
}

// 2) dL/dlogits at each position: the largest entries and the true character
function topGrads(d) {
  const largest = Math.max(...d.top_grads.flat().map(([, g]) => Math.abs(g)), 1e-12);
  const rows = d.top_grads.map((entries, i) => el('tr', {'data-position': i},
    el('th', {class: 'l mono'}, `${i} → `, Lab.tok(d.positions[i].target)),
    entries.flatMap(([char, g, p, isTrue]) => [
      el('td', {class: isTrue ? 'mono char hit' : 'mono char', title: `p = ${p}`}, Lab.tok(char)),
      el('td', {class: 'l'}, diverging(g, largest)),
      el('td', {}, num(g, signed(g), {class: isTrue ? 'num hit' : 'num'}))])));
  return el('div', {class: 'panel'},
    el('h3', {}, `2) the gradient at the top: dL/dlogits = (p − one_hot(next)) / n, n = ${d.n}`),
    el('p', {class: 'muted small'}, el('span', {class: 'hit'}, 'negative (left, green)'),
      ': the true next character, pulled up; positive (right): its rivals, pushed down; ' +
      'the largest |dL/dlogit| at each position'),
    el('table', {class: 'data grads', id: 'top-grads'}, rows),
    el('p', {class: 'mono small', id: 'closed-form'},
      `check: the logits' .grad from backward() equal (p − one_hot) / n, largest difference `,
      num(d.closed_form_diff, d.closed_form_diff.toExponential(1))));
}

// 3) the gradient's norm at each stage, each matrix's, and the embedding rows it reached
function wayBack(d) {
  const barRows = (items, id) => {
    const largest = Math.max(...items.map(([, v]) => v), 1e-12);
    return el('div', {class: 'bars wide', id}, items.flatMap(([name, v]) => [
      el('span', {}, name), el('span', {}, bar(v / largest, 5.5)), num(v, v.toFixed(5), {'data-name': name})]));
  };
  return el('div', {class: 'panel'},
    el('h3', {}, "3) the gradient on its way back: |dL/d stage| over all positions"),
    barRows(d.stages, 'stages'),
    el('p', {class: 'muted small'}, 'a residual add x + block(x) hands its gradient unchanged to both ' +
      'inputs; rmsnorm rescales it (small embeddings: a larger gradient)'),
    el('h3', {}, "each weight matrix's gradient norm |dL/dW|"),
    barRows(d.matrix_norms, 'matrix-norms'),
    el('p', {class: 'mono small', id: 'embedding-rows'}, d.rows_text),
    el('p', {class: 'muted small'}, d.rows_why));
}

// 4) Adam's first step on one weight, and what that means for every weight
function adam(d) {
  const a = d.adam;
  const rows = [
    ['g', 'dL/dw', a.g, sci(a.g), 'the gradient'],
    ['m', '(1 − β1) g', a.m, sci(a.m), `first moment, β1 = ${a.beta1}`],
    ['v', '(1 − β2) g²', a.v, sci(a.v), `second moment, β2 = ${a.beta2}`],
    ['m_hat', 'm / (1 − β1¹)', a.m_hat, sci(a.m_hat), '= g: bias correction undoes the zero start'],
    ['v_hat', 'v / (1 − β2¹)', a.v_hat, sci(a.v_hat), '= g²'],
    ['update', '−lr m_hat / (√v_hat + eps)', a.update, sci(a.update), `lr = ${a.lr}, eps = ${a.eps}`],
    ['before', 'w', a.before, signed(a.before, 6), 'the weight before'],
    ['after', 'w + step', a.after, signed(a.after, 6), `moved ${sci(a.moved)}`],
  ];
  const untouched = d.n_params - d.n_with_grad;
  return el('div', {class: 'panel wide'},
    el('h3', {}, `4) Adam on one weight: ${a.param}`),
    el('p', {class: 'muted small'}, 'the weight with the largest |g| (the terminal command takes --param)'),
    el('table', {class: 'data', id: 'adam'},
      rows.map(([name, formula, x, text, meaning]) => el('tr', {},
        el('th', {class: 'l mono'}, name), el('td', {class: 'l mono'}, formula),
        el('td', {}, num(x, text, {'data-name': name})), el('td', {class: 'l muted wrap'}, meaning)))),
    el('p', {class: 'small'}, `so a fresh Adam moves each weight by lr g / (|g| + eps): lr = ${a.lr} whatever |g| is.`),
    el('p', {class: 'mono small', id: 'fresh-adam'},
      `over all ${d.n_with_grad} of ${d.n_params} weights with a gradient: |step| / lr from `,
      num(d.step_ratio_min, d.step_ratio_min.toFixed(9)), ' to ', num(d.step_ratio_max, d.step_ratio_max.toFixed(9)),
      `; equal to |g| / (|g| + eps) within ${d.formula_diff.toExponential(1)}. ` +
      `${d.small_grads} have |g| < 1e-2, where eps shows past the 6th digit; the ${untouched} ` +
      `weights without a gradient moved by ${d.untouched_moved}`),
    // why the weights without a gradient have none: step.py's zero_gradient_census, as lab step says it
    el('p', {class: 'small', id: 'without-grad', 'data-zeros': d.without_grad.zeros}, d.without_grad.text));
}

// 6) the graph's size, and the same step through the numpy path and PyTorch, matrix by matrix
function graph(d, scalarComing = true) {
  if (d.engine === 'numpy' && !scalarComing) {
    return el('div', {class: 'panel', id: 'graph-size'},
      el('p', {class: 'mono small', id: 'numpy-only'},
        `6) these numbers are the numpy training path's (src/backprop), the same as the scalar engine's ` +
        `to 1e-12: on this model the scalar engine's graph takes at most ${Lab.info().step_scalar_positions} ` +
        `positions, and this step has ${d.n} (a shorter text shows its graph and the engines' check)`));
  }
  if (d.engine === 'numpy') {
    return el('div', {class: 'panel', id: 'graph-size'},
      el('p', {class: 'mono small', id: 'scalar-coming'}, el('span', {class: 'busy'}, 'computing… '),
        '6) these numbers are the numpy training path\'s (src/backprop); the scalar engine is taking ' +
        'the same step, its graph and the engines\' check follow'));
  }
  const engines = {numpy: 'the numpy training path (package backprop)', torch: "PyTorch's autograd (package torchgpt)"};
  const shown = Object.keys(engines).filter(e => d[e]);
  const lines = Object.entries(engines).map(([e, what]) => el('p', {class: 'mono small', id: `${e}-check`},
    d[e] ? `${what}: the same gradients, largest difference ${d[e].max_diff.toExponential(1)}`
         : `${what} is not installed: no opinion from it`));
  const rows = d.matrix_norms.map(([name, n]) => el('tr', {},
    el('td', {class: 'l'}, name), el('td', {}, num(n, n.toExponential(4))),
    ...shown.map(e => el('td', {}, num(d[e].matrices[name], d[e].matrices[name].toExponential(1))))));
  const head = el('tr', {}, el('th', {class: 'l'}, 'matrix'), el('th', {}, '|grad| (scalar)'),
    ...shown.map(e => el('th', {}, `${e} − scalar`)));
  return el('div', {class: 'panel', id: 'graph-size'},
    el('p', {class: 'mono small'}, `6) the graph of this step on the scalar engine: ${d.graph_nodes} nodes ` +
      `recorded on the tape (plus the ${d.n_params} weights, its leaves)`),
    ...lines, shown.length ? el('table', {class: 'data mono small', id: 'engines'}, head, ...rows) : null);
}

// the lr box starts at the learning rate the checkpoint was trained with, as `lab step` does
// (train.py's default where the checkpoint does not say), and again when another is picked
function startingLr() {
  $('lr').value = String(Lab.info().trained_lr ?? 0.01);
}

Lab.on('form', 'submit', draw);
const later = Lab.debounced(draw);  // as the learner types: once they pause
for (const id of ['text', 'lr']) Lab.on(id, 'input', later);
Lab.start(() => { startingLr(); return draw(); });
