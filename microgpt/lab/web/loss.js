// The Loss page draws what POST /api/loss answers (lab/loss.py's compute, on the logs beside the
// checkpoints asked, the chosen one first): it only scales them to the chart.
'use strict';

const {$, el} = Lab;
// The colours the chart paints with and the words the page says for them: one table, so that the
// text never names a colour the picture does not show. One run: each kind of mark its colour;
// several: each run one colour for all its marks, in order (at most six, loss.py's MARKS).
const ONE_RUN = {smooth: ['blue', '#1f5fbf'], val: ['orange', '#c2410c'], estimate: ['green', '#067647']};
const RUN_COLOURS = [['blue', '#1f5fbf'], ['purple', '#7c3aed'], ['teal', '#0e7490'], ['pink', '#be185d'],
                     ['olive', '#4d7c0f'], ['brown', '#92400e']];
const others = new Set();  // the ids of the other checkpoints ticked

async function draw() {
  if (!Lab.info().log) {  // the listing says: no log beside it (a converted checkpoint has none)
    for (const id of ['loss-chart', 'stretches', 'best', 'legend', 'compare']) $(id).replaceChildren();
    $('source').textContent = 'This checkpoint has no training log beside it (train.py writes one ' +
      'there; a converted checkpoint has none): there are no curves to draw.';
    return;
  }
  const ids = [Lab.ckpt(), ...Lab.config.checkpoints.filter(c => c.log && others.has(c.id) && c.id !== Lab.ckpt()).map(c => c.id)];
  drawCompare();
  await Lab.guard(async () => {
    const d = await Lab.api('/api/loss', {ckpt: ids[0], also: ids.length > 1 ? ids.slice(1) : undefined,
                                          unit: $('unit').value});
    const label = id => Lab.config.checkpoints.find(c => c.id === id).label;
    const runs = d.runs.map((r, k) => ({...r, id: ids[k], label: label(ids[k]), colour: RUN_COLOURS[k % RUN_COLOURS.length]}));
    const main = runs[0], train = main.train, val = main.val;
    $('source').textContent = `${main.path}: ${train.length} training steps (${train[0][0]}..${train[train.length - 1][0]}), ` +
      `${val.length} validation measurement${val.length === 1 ? '' : 's'}; running mean reaching about ${main.window} steps back` +
      (d.unit === 'bits' ? "; in bits per character (each step's loss x the run's tokens per character / ln 2)" : '');
    chart(runs);
    $('stretches').replaceChildren(el('h3', {}, 'the run in ten stretches'),
      el('table', {class: 'data', id: 'stretch-table'},
        el('tr', {}, ['steps', 'mean training loss', 'learning rate', 'validation loss'].map(h => el('th', {}, h))),
        main.stretches.map(([a, b, mean, lr, v]) => el('tr', {}, el('td', {}, `${a}..${b}`),
          el('td', {class: 'num', 'data-value': mean}, Lab.fmt(mean, 4)),
          el('td', {class: 'num'}, lr === null ? '' : Number(lr).toPrecision(3)),
          el('td', {class: 'num', 'data-value': v}, v === null ? '' : Lab.fmt(v, 4))))));
    $('best').replaceChildren(...runs.flatMap(r => best(r, runs.length > 1)));
  }, ['loss-chart', 'stretches', 'best', 'legend']);
}

// the other checkpoints, each a box to tick: its run drawn beside this one's; with none, where
// one would come from (no box to tick is promised)
function drawCompare() {
  const list = Lab.config.checkpoints.filter(c => c.id !== Lab.ckpt() && c.log);  // those with a log to draw
  $('compare').replaceChildren(...(list.length
    ? ['Tick other runs to draw them on the same picture: ', ...list.map(c => el('label', {class: 'inline-check'},
        el('input', {type: 'checkbox', 'data-id': c.id, checked: others.has(c.id),
                     onchange: e => { e.target.checked ? others.add(c.id) : others.delete(c.id); draw(); }}), ` ${c.label}`))]
    : [el('span', {class: 'muted', id: 'no-others'}, 'No other run to draw beside this one yet: the Training page\'s ' +
        "runs, and train.py's checkpoints with a log beside them in the folder of the one the server was started " +
        'on, are listed here (reload the page after training one).')]));
}

// a node painted in a run's colour: lab.css's rules for several runs read --run
function tint(node, [, colour]) {
  node.style.setProperty('--run', colour);
  return node;
}

// a run's last and lowest validation loss, with the training loss measured alike at the last
function best(r, named) {
  const val = r.val;
  const name = named ? [tint(el('b', {class: 'run'}, r.label), r.colour), ': '] : [];
  if (!val.length) return [el('p', {class: 'muted'}, ...name, 'this run measured no validation loss (--eval-every 0).')];
  const low = val.reduce((a, b) => (b[1] < a[1] ? b : a)), last = val[val.length - 1];
  return [el('p', {}, ...name, 'last validation loss ', el('span', {class: 'num', 'data-run': r.id, id: named ? null : 'last-val'},
      Lab.fmt(last[1], 4)), ` at step ${last[0]}`,
    last[2] === null ? '' : el('span', {}, ' (training loss measured alike ', el('span', {class: 'num', 'data-run': r.id,
      'data-kind': 'train-estimate'}, Lab.fmt(last[2], 4)), ')'),
    '; lowest ', el('span', {class: 'num'}, Lab.fmt(low[1], 4)), ` at step ${low[0]}`)];
}

function chart(runs) {
  const steps = runs.flatMap(r => r.train.map(x => x[0]).concat(r.val.map(v => v[0])));
  // Steps on a log scale where the runs' lengths differ tenfold: on a linear one, a 100-step run
  // beside a 10,000-step one is squeezed into the picture's first pixels.
  const ends = runs.map(r => Math.max(...r.train.map(x => x[0])));
  const log = $('xscale').value === 'log' || ($('xscale').value === 'auto' && Math.max(...ends) >= 10 * Math.min(...ends));
  const c = $('loss-chart'), one = runs.length === 1;
  for (const [kind, [, colour]] of Object.entries(ONE_RUN)) c.style.setProperty(`--${kind}`, colour);
  Lab.lossChart(c, runs.map(r => ({...r, colour: one ? null : r.colour[1],
                                   smooth: r.train.map(([s], i) => [s, r.smooth[i]])})),
                [Math.min(...steps), Math.max(...steps)], log);
  // the legend: what each mark is, in the words of the colours painted, and with several runs
  // each one's colour and name
  const key = (kind, [, colour]) => {
    const k = el('span', {class: `key ${kind}`});
    k.style.setProperty(kind === 'estimate' ? 'border-bottom-color' : 'background-color', colour);
    return k;
  };
  const hasVal = runs.some(r => r.val.length), hasEstimate = runs.some(r => r.val.some(v => v[2] !== null));
  $('legend').replaceChildren(...(one
    ? [key('smooth', ONE_RUN.smooth), ` training loss, running mean (${ONE_RUN.smooth[0]} line)  `,
       ...(hasVal ? [key('val', ONE_RUN.val), ` validation loss (${ONE_RUN.val[0]} circles)  `] : []),
       ...(hasEstimate ? [key('estimate', ONE_RUN.estimate), ` training loss measured alike (${ONE_RUN.estimate[0]} triangles)`] : [])]
    : [...runs.flatMap(r => [key('smooth', r.colour), ' ', el('b', {'data-run': r.id}, r.label), ` (${r.colour[0]})   `]),
       el('br'), "each run's marks in its colour: the line its training loss, running mean" +
       (hasVal ? '; ○ ringed circles its validation loss' : '') +
       (hasEstimate ? '; ▲ triangles its training loss measured alike' : '')]));
}

$('unit').addEventListener('change', draw);
$('xscale').addEventListener('change', draw);
Lab.start(draw);
