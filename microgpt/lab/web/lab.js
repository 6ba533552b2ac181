// The web lab's shared code: the header (pages, checkpoint, its config), calls to the JSON
// API, and small helpers for building HTML and SVG. Every number a page shows comes from the
// API (microgpt/lab/api.py), which runs the same lab functions as the terminal commands: this
// file and the page scripts only draw. Plain JavaScript, no framework, nothing to build.
'use strict';

const Lab = (() => {
  const STORE = 'microgpt-lab-ckpt';
  let config = null;          // /api/config: checkpoints and features
  let onChange = () => {};    // the page's redraw when another checkpoint is picked
  let markReady;
  const ready = new Promise(resolve => { markReady = resolve; });  // once the header is drawn

  // fn for an input that may come in bursts (typing, a slider): the first after a quiet `ms` runs
  // at once; one within `ms` of the last run waits for a pause of `ms`, so a page asks the server
  // once every `ms` at most while the learner types, and always about the last key
  function debounced(fn, ms = 100) {
    let timer = null, last = -Infinity;
    const run = () => { last = performance.now(); fn(); };
    return () => {
      clearTimeout(timer);
      if (performance.now() - last >= ms) run();
      else timer = setTimeout(run, ms);
    };
  }

  // a <select> of the options 0..n-1, each shown as label(i); the choice kept where it still exists
  function fillSelect(select, n, label = i => `${i}`) {
    const old = select.value;
    select.replaceChildren(...Array.from({length: n}, (_, i) => el('option', {value: i}, label(i))));
    if (old !== '' && Number(old) < n) select.value = old;
  }

  // listen for `event` on the element with this id; events before the config arrived wait for it
  function on(id, event, handler) {
    document.getElementById(id).addEventListener(event, async e => {
      await ready;
      handler(e);
    });
  }

  // The newest POST to each URL wins: while one is answered (the server computes one at a time)
  // a newer one waits, and only the newest of those waiting is sent, so typing a name queues one
  // step at most; an answer that comes after a newer request was made is dropped, never drawn.
  class Superseded extends Error {}
  const newest = {}, answering = {};

  // POST body (or GET without one) to the API; the answer's JSON, or an Error with its message.
  async function api(path, body) {
    const post = body !== undefined;
    const mine = newest[path] = (newest[path] || 0) + 1;
    while (post && answering[path]) await answering[path];
    if (post && mine !== newest[path]) throw new Superseded(path);
    const init = post ? {method: 'POST', headers: {'Content-Type': 'application/json'}, body: JSON.stringify(body)}
      : {method: 'GET'};
    const answer = fetch(path, init).then(async response => [response, await response.json()]);
    if (post) answering[path] = answer.catch(() => {}).finally(() => { delete answering[path]; });
    const [response, data] = await answer;
    if (post && mine !== newest[path]) throw new Superseded(path);
    if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
    return data;
  }

  // Inputs so far (each key, each control changed). A page asks for a slow answer (the scalar
  // step, the draws) once the learner has paused `ms` after the quick one was drawn, so that the
  // next quick answer does not wait behind it: the server computes one request at a time.
  let inputs = 0;
  document.addEventListener('input', () => { inputs += 1; }, true);  // before the page's own listeners
  async function paused(since, ms = 250) {
    await new Promise(resolve => setTimeout(resolve, ms));
    return inputs === since;
  }

  const $ = id => document.getElementById(id);

  // el('div', {class: 'x', onclick: f}, child, 'text', ...) -> an HTML element
  function el(tag, attrs = {}, ...children) {
    return build(document.createElement(tag), attrs, children);
  }

  function svg(tag, attrs = {}, ...children) {
    return build(document.createElementNS('http://www.w3.org/2000/svg', tag), attrs, children);
  }

  function build(node, attrs, children) {
    for (const [key, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else if (key === 'text') node.textContent = value;
      else node.setAttribute(key, value === true ? '' : value);
    }
    for (const child of children.flat()) {
      if (child !== null && child !== undefined) {
        node.append(child instanceof Node ? child : String(child));
      }
    }
    return node;
  }

  // A token label as the server writes it (render.token_label: ⏎ a newline, ␣ a space, ⇥ a
  // tab, ↵ a carriage return): an invisible character's sign is set large enough to read, in
  // HTML (tok) and in the pages' SVG pictures (isGlyph for the class)
  const GLYPHS = new Set(['⏎', '␣', '⇥', '↵']);
  const isGlyph = label => GLYPHS.has(label);
  function tok(label) {
    return isGlyph(label) ? el('span', {class: 'glyph'}, label) : label;
  }

  // A heatmap of n positions (Attention, Embeddings): up to COMPACT_ABOVE each cell shows its
  // number and each axis its positions (label(i)); past that the cells are colour alone, 4 to 14
  // px square, and the axes marked every TICK positions. td(i, j, compact): a cell; row(i): the
  // attributes of row i.
  const COMPACT_ABOVE = 16, TICK = 8, MIN_CELL = 4, MAX_CELL = 14;
  const heatmap = {
    compact: n => n > COMPACT_ABOVE,
    cell: (room, n) => Math.max(MIN_CELL, Math.min(MAX_CELL, Math.floor(room / n))),
    table(n, attrs, label, td, {caption = null, row = () => ({})} = {}) {
      const compact = heatmap.compact(n), all = f => Array.from({length: n}, (_, i) => f(i));
      const ticks = Array.from({length: Math.ceil(n / TICK)}, (_, k) =>
        el('th', {class: 'tick', colspan: Math.min(TICK, n - k * TICK)}, `${k * TICK}`));
      const rowTick = i => (i % TICK ? null : el('th', {class: 'tick', rowspan: Math.min(TICK, n - i)}, `${i}`));
      return el('table', {...attrs, class: compact ? 'heatmap compact' : 'heatmap'}, caption,
        el('tr', {}, el('th', {}, 'i \\ j'), compact ? ticks : all(j => el('th', {}, label(j)))),
        all(i => el('tr', row(i), compact ? rowTick(i) : el('th', {}, label(i)), all(j => td(i, j, compact)))));
    },
  };

  // running text as it reads, its newlines kept as line breaks, each marked with a faint ⏎;
  // `prefix` (the prompt it follows) in bold before it
  function textBlock(text, prefix = '', attrs = {}) {
    const lines = s => String(s).split('\n').flatMap((line, i) => i ? [el('span', {class: 'glyph nl'}, '⏎'), '\n', line] : [line]);
    return el('pre', {class: 'text-block', ...attrs}, prefix ? el('b', {}, lines(prefix)) : null, lines(text));
  }

  // a number for display; null (NaN or a masked cell on the server) shows as a dot
  function fmt(x, digits = 4) {
    if (x === null || x === undefined) return '·';
    const text = Number(x).toFixed(digits);
    return Number(text) === 0 ? (0).toFixed(digits) : text;  // never '-0.000': it reads as another number
  }

  // a number with its exact value kept in data-value, for the reader's tooltip and the tests;
  // shown to `digits` places (an integer of 100,000 or more with thousands separators), or as
  // the text given instead
  function num(x, digits = 3, attrs = {}) {
    const text = typeof digits === 'string' ? digits
      : typeof x === 'number' && Math.abs(x) >= 1e5 ? x.toLocaleString('en') : fmt(x, digits);
    return el('span', {class: 'num', 'data-value': x, title: String(x), ...attrs}, text);
  }

  // a horizontal bar: `fraction` of `rem` rem wide
  function bar(fraction, rem = 10, cls = 'bar') {
    const b = el('span', {class: cls});
    b.style.width = `${(Math.max(0, fraction) * rem).toFixed(2)}rem`;
    return b;
  }

  function scroll(...children) {  // a table that scrolls sideways in a narrow window, not the page
    return el('div', {class: 'scroll'}, ...children);
  }

  // A loss chart (the Training and Loss pages): each run's training loss at every step (faint)
  // and its running mean, then at each evaluation its validation loss (a circle) and the
  // training loss measured alike (a triangle), on five labelled heights of loss. runs: [{id,
  // label, colour (a CSS colour, or none), train: [[step, loss]], smooth: [[step, mean]],
  // val: [[step, loss, training loss measured alike or null]]}]; steps: the axis's [first, last].
  // lab.css paints one run by kind of mark, several (class 'many') each in its --run.
  function lossChart(chart, runs, [s0, s1], log = false) {
    const W = 760, H = 300, L = 50, R = 16, T = 14, B = 36, one = runs.length === 1;
    const losses = runs.flatMap(r => [...r.train.map(p => p[1]),
                                      ...r.val.flatMap(([, v, t]) => (t === null ? [v] : [v, t]))]);
    let [l0, l1] = [Math.min(...losses), Math.max(...losses)];
    if (l1 - l0 < 1e-9) { l0 -= 0.5; l1 += 0.5; }
    const u = log ? s => Math.log(Math.max(s, 1)) : s => s;  // train.py counts steps from 1; a log may hold 0
    const X = s => L + (s1 > s0 ? (u(s) - u(s0)) / (u(s1) - u(s0)) : 0.5) * (W - L - R);
    const Y = l => T + (l1 - l) / (l1 - l0) * (H - T - B);
    const line = points => points.map(([s, l], i) => `${i ? 'L' : 'M'}${X(s).toFixed(1)},${Y(l).toFixed(1)}`).join('');
    const tint = (node, r) => { if (r.colour) node.style.setProperty('--run', r.colour); return node; };
    const named = (r, what) => `${one ? '' : r.label + ', '}${what}`;
    const ticks = Array.from({length: 5}, (_, k) => l0 + (l1 - l0) * k / 4);  // a loss read off any height
    chart.classList.toggle('many', !one);
    chart.setAttribute('viewBox', `0 0 ${W} ${H}`);
    chart.setAttribute('width', W);
    chart.setAttribute('height', H);
    Object.assign(chart.dataset, {trainPoints: runs[0].train.length, valPoints: runs[0].val.length, runs: runs.length,
                                  xscale: log ? 'log' : 'linear'});
    chart.replaceChildren(
      ...ticks.flatMap(t => [svg('line', {class: 'grid', x1: L, y1: Y(t), x2: W - R, y2: Y(t)}),
        svg('text', {x: L - 6, y: Y(t) + 4, 'text-anchor': 'end'}, t.toFixed(2))]),
      svg('line', {class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B}),
      svg('line', {class: 'axis', x1: L, x2: L, y1: T, y2: H - B}),
      svg('text', {x: L, y: H - B + 16}, `step ${s0}`),
      svg('text', {x: W - R, y: H - B + 16, 'text-anchor': 'end'}, `step ${s1}`),
      svg('text', {x: (W + L) / 2, y: H - 6, 'text-anchor': 'middle'}, log ? 'step (log scale)' : 'step'),
      ...runs.map(r => tint(svg('g', {class: 'run', 'data-run': r.id},
        svg('path', {class: 'train', d: line(r.train)}), svg('path', {class: 'smooth', d: line(r.smooth)})), r)),
      // the evaluations last, above every run's curves: the training loss measured alike, then validation
      ...runs.flatMap(r => [
        ...r.val.filter(v => v[2] !== null).map(([s, , t]) => tint(svg('path', {class: 'estimate', 'data-step': s,
          'data-value': t, 'data-run': r.id, d: `M${X(s).toFixed(1)},${(Y(t) - 4.5).toFixed(1)}l4.5,8h-9z`},
          svg('title', {}, named(r, `step ${s}: training loss measured alike ${t}`))), r)),
        ...r.val.map(([s, v]) => tint(svg('circle', {class: 'val', cx: X(s), cy: Y(v), r: 3.5, 'data-step': s,
          'data-value': v, 'data-run': r.id}, svg('title', {}, named(r, `step ${s}: validation loss ${v}`))), r))]));
  }

  // a log10 slider's value (the Attention and Scaling pages' temperature), to 3 digits
  function logSlider(id) {
    return Number((10 ** Number($(id).value)).toPrecision(3));
  }

  // the layer and head boxes for the model looked at; the query box for the answer's positions
  function fillLayerHead() {
    const c = ckptInfo().config;
    fillSelect($('layer'), c.n_layer);
    fillSelect($('head'), c.n_head);
  }

  function fillQuery(view) {
    fillSelect($('query'), view.labels.length, i => `${i} ${view.labels[i]}`);  // (an option holds text alone)
    $('query').value = view.query;
  }

  // a weight in [0, 1] as a background colour, white to deep blue
  function shade(w) {
    const t = Math.max(0, Math.min(1, w));
    const r = Math.round(255 - 225 * t), g = Math.round(255 - 160 * t), b = Math.round(255 - 40 * t);
    return `rgb(${r}, ${g}, ${b})`;
  }

  function currentCkpt() {
    const ids = config ? config.checkpoints.map(c => c.id) : [];
    const stored = localStorage.getItem(STORE);
    return ids.includes(stored) ? stored : 'start';
  }

  function ckptInfo() {
    return config.checkpoints.find(c => c.id === currentCkpt());
  }

  function selectCkpt(id) {
    localStorage.setItem(STORE, id);
    renderHeader();
    onChange();
  }

  // a box whose table is wider than the window says so above it (on a phone a cut-off table
  // looks like the whole of one)
  function markScrollers() {
    for (const box of document.querySelectorAll('.scroll')) {
      box.toggleAttribute('data-overflows', box.scrollWidth > box.clientWidth + 1);
    }
  }
  window.addEventListener('resize', markScrollers);

  function showError(message) {
    const box = document.getElementById('error');
    box.textContent = message || '';
    box.hidden = !message;
  }

  // Run an async draw, a refused request shown as the error line under the header. Past BUSY_MS
  // a busy sign shows and the results are greyed out (busy = false: the page shows its own sign);
  // on an error the elements named in `clear` are emptied: no result beside inputs it is not for.
  const BUSY_MS = 200;
  let pending = 0;
  async function guard(fn, clear = [], busy = true) {
    if (busy) pending += 1;
    const timer = setTimeout(() => { if (pending) setBusy(true); }, BUSY_MS);
    try {
      showError('');
      const result = await fn();
      markScrollers();
      document.body.dataset.draws = Number(document.body.dataset.draws || 0) + 1;  // drawn: the tests wait for it
      return result;
    } catch (e) {
      if (!(e instanceof Superseded)) {  // a newer request will draw
        showError(e.message);
        for (const id of clear) document.getElementById(id)?.replaceChildren();
      }
      return undefined;
    } finally {
      clearTimeout(timer);
      if (busy) pending -= 1;
      if (!pending) setBusy(false);
    }
  }

  function setBusy(on) {
    document.body.classList.toggle('busy', on);
    if (document.getElementById('busy')) document.getElementById('busy').hidden = !on;
  }

  function renderHeader() {
    const header = document.getElementById('lab-header');
    const here = document.body.dataset.page;
    const select = el('select', {id: 'ckpt', title: 'the checkpoint every page looks at',
                                 onchange: e => selectCkpt(e.target.value)},
      config.checkpoints.map(c => el('option', {value: c.id, selected: c.id === currentCkpt()}, c.label)));
    const c = ckptInfo().config;
    header.replaceChildren(
      el('span', {class: 'brand'}, 'microgpt lab'),
      el('span', {id: 'busy', class: 'busy', role: 'status', hidden: !document.body.classList.contains('busy')},
        'computing…'),
      // the pages of microgpt/lab/registry.py, in its order, as /api/config lists them
      el('nav', {}, config.pages.map(({name, title}) =>
        el('a', {href: '/' + name, class: name === here ? 'here' : null}, title))),
      el('div', {class: 'ckpt'}, el('label', {}, 'checkpoint ', select),
        el('span', {id: 'config'},
          `n_layer=${c.n_layer} n_embd=${c.n_embd} n_head=${c.n_head} head_dim=${c.head_dim} ` +
          `block_size=${c.block_size} vocab_size=${c.vocab_size}${c.rungs}`)));
    applyMode();
  }

  // A model of running text reads text, not a name: body[data-mode] ('text' or 'lines') shows a
  // page's .text-only or .lines-only words (lab.css); the input box is three lines for text, one
  // for a name (where Enter draws)
  function applyMode() {
    const text = isText();
    document.body.dataset.mode = text ? 'text' : 'lines';
    for (const w of document.querySelectorAll('.input-word')) w.textContent = text ? 'text' : 'name';
    // what the model reads one of: 'character', or a byte-pair model's 'token' (the server's word)
    for (const w of document.querySelectorAll('.unit-word')) w.textContent = ckptInfo().unit ?? 'character';
    for (const box of document.querySelectorAll('textarea.text-input')) {
      box.rows = text ? 3 : 1;
      // the model's own example (a name, or its data's first lines), never over the learner's text
      if (box.id === 'text' && (box.value === box.defaultValue || box.value === box.dataset.example)) {
        box.value = box.dataset.example = ckptInfo().example ?? box.defaultValue;
      }
    }
  }

  function isText() {
    return ckptInfo().data_mode === 'text';
  }

  // a form never reloads the page: a page that draws on Enter listens for its 'submit'
  document.addEventListener('submit', e => e.preventDefault(), true);

  // Enter in a one-line (names) box submits its form; in running text only Ctrl+Enter does
  document.addEventListener('keydown', e => {
    const box = e.target;
    if (e.key !== 'Enter' || !box.matches?.('textarea.text-input') || !box.form) return;
    if (config && isText() && !e.ctrlKey && !e.metaKey) return;
    e.preventDefault();
    box.form.requestSubmit();
  });

  // called once by each page: titles it after its <h1> ('Loss: the curves...' is 'Loss'), draws
  // the header, then the page (and again on a new checkpoint)
  async function start(draw) {
    onChange = draw;
    document.title = `microgpt lab: ${document.querySelector('h1').textContent.split(':')[0]}`;
    try {
      await refreshConfig();
    } catch (e) {
      showError(`cannot reach the lab's server: ${e.message}`);
      return;
    }
    markReady();
    await draw();
    document.body.dataset.drawn = 'true';  // the first draw is done (the browser tests wait for it)
  }

  async function refreshConfig() {
    config = await api('/api/config');
    renderHeader();
    return config;
  }

  return {$, api, el, svg, fmt, num, bar, scroll, lossChart, logSlider, fillLayerHead, fillQuery, shade, tok, isGlyph, heatmap, textBlock, start, on, debounced, fillSelect, guard, showError, selectCkpt,
          refreshConfig, isText, paused, ckpt: currentCkpt, info: ckptInfo, get config() { return config; },
          get inputs() { return inputs; }};
})();
