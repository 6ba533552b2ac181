// The Loss page: the chosen checkpoint's training log as curves and a table of tenths. Every
// number comes from POST /api/loss (microgpt/lab/loss.py's compute on the log beside the
// checkpoint); this file only scales them to the chart.
'use strict';

const {el, svg} = Lab;
const $ = id => document.getElementById(id);

async function draw() {
  if (!Lab.info().log) {  // the listing says: no log beside it (a converted checkpoint has none)
    for (const id of ['loss-chart', 'stretches', 'best']) $(id).replaceChildren();
    $('source').textContent = 'This checkpoint has no training log beside it (train.py writes one ' +
      'there; a converted checkpoint has none): there are no curves to draw.';
    return;
  }
  await Lab.guard(async () => {
    const d = await Lab.api('/api/loss', {ckpt: Lab.ckpt()});
    const train = d.train, val = d.val;
    $('source').textContent = `${d.path}: ${train.length} training steps (${train[0][0]}..${train[train.length - 1][0]}), ` +
      `${val.length} validation measurements; running mean of ${d.window} steps`;
    chart(d);
    $('stretches').replaceChildren(el('h3', {}, 'the run in ten stretches'),
      el('table', {class: 'data', id: 'stretch-table'},
        el('tr', {}, ['steps', 'mean training loss', 'learning rate', 'validation loss'].map(h => el('th', {}, h))),
        d.stretches.map(([a, b, mean, lr, v]) => el('tr', {}, el('td', {}, `${a}..${b}`),
          el('td', {class: 'num', 'data-value': mean}, Lab.fmt(mean, 4)),
          el('td', {class: 'num'}, lr === null ? '' : Number(lr).toPrecision(3)),
          el('td', {class: 'num', 'data-value': v}, v === null ? '' : Lab.fmt(v, 4))))));
    if (val.length) {
      const best = val.reduce((a, b) => (b[1] < a[1] ? b : a));
      const last = val[val.length - 1];
      $('best').replaceChildren(el('p', {}, `last validation loss `, el('span', {class: 'num', id: 'last-val'}, Lab.fmt(last[1], 4)),
        ` at step ${last[0]}`), el('p', {}, `lowest `, el('span', {class: 'num'}, Lab.fmt(best[1], 4)), ` at step ${best[0]}`));
    } else {
      $('best').replaceChildren(el('p', {class: 'muted'}, 'This run measured no validation loss (--eval-every 0).'));
    }
  }, ['loss-chart', 'stretches', 'best']);
}

function chart(d) {
  const W = 760, H = 320, L = 50, R = 16, T = 14, B = 36;
  const steps = d.train.map(r => r[0]), losses = d.train.map(r => r[1]);
  const all = losses.concat(d.val.map(v => v[1]));
  const [s0, s1] = [steps[0], Math.max(steps[steps.length - 1], ...d.val.map(v => v[0]))];
  const [l0, l1] = [Math.min(...all), Math.max(...all)];
  const X = s => L + (s - s0) / ((s1 - s0) || 1) * (W - L - R);
  const Y = l => T + (l1 - l) / ((l1 - l0) || 1) * (H - T - B);
  const line = (xs, ys) => xs.map((x, i) => `${i ? 'L' : 'M'}${X(x).toFixed(1)},${Y(ys[i]).toFixed(1)}`).join('');
  const ticks = Array.from({length: 5}, (_, k) => l0 + (l1 - l0) * k / 4);
  const c = $('loss-chart');
  c.setAttribute('viewBox', `0 0 ${W} ${H}`);
  c.setAttribute('width', W);
  c.setAttribute('height', H);
  c.dataset.trainPoints = d.train.length;
  c.dataset.valPoints = d.val.length;
  c.replaceChildren(
    svg('line', {class: 'axis', x1: L, x2: W - R, y1: H - B, y2: H - B}),
    svg('line', {class: 'axis', x1: L, x2: L, y1: T, y2: H - B}),
    ...ticks.map(t => svg('text', {x: L - 6, y: Y(t) + 4, 'text-anchor': 'end'}, t.toFixed(2))),
    svg('text', {x: L, y: H - B + 16}, `step ${s0}`),
    svg('text', {x: W - R, y: H - B + 16, 'text-anchor': 'end'}, `step ${s1}`),
    svg('text', {x: (W + L) / 2, y: H - 6, 'text-anchor': 'middle'}, 'step'),
    svg('path', {class: 'train', d: line(steps, losses)}),
    svg('path', {class: 'smooth', d: line(steps, d.smooth)}),
    ...d.val.map(([s, v]) => svg('circle', {class: 'val', cx: X(s), cy: Y(v), r: 3.5, 'data-step': s, 'data-value': v},
      svg('title', {}, `step ${s}: validation loss ${v}`))));
}

Lab.start(draw);
