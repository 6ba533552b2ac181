// The Training page: starts, watches and stops train.py on the server through POST
// /api/train/start, /status and /stop (lab/runs.py); its form's fields are the server's list of
// train.py's flags (limits.RUN_LIMITS), and it draws what it is sent.
'use strict';

const {$, el} = Lab;
let FIELDS = [];  // the form's numbers: train.py's flags, in the server's order (setup)
let RUNGS = [];   // the rungs' controls, train.py's flags too: a switch, mlp's choice, n_kv_head's number
let train = [], smooth = [], val = [], offset = 0, run = null, timer = null, total = 1, batch = 1;
let mode = 'lines', announced = null, going = false, refused = false;
// running text's settings to start from: README's Shakespeare recipe, shorter (numpy, float32,
// an evaluation every 300 steps, a save every 100 as train.py does, so that the samples show it learn)
const TEXT_START = {steps: 500, n_layer: 4, n_embd: 128, n_head: 4, block_size: 64, batch_size: 12, lr: 0.004,
                    eval_every: 300};
const TEXT_DTYPE = 'float32';

function setup() {
  const options = Lab.config.features.training;
  $('engine').replaceChildren(...options.engines.map(e => el('option', {value: e}, e)));
  // one labelled number box per flag, its --help as the hint, after the data's choice: made
  // once, though setup runs again for each checkpoint picked
  if (!FIELDS.length) {
    $('data_mode').closest('label').after(...options.fields.map(f => el('label', {title: f.help}, f.name,
      el('input', {type: 'number', id: f.name, step: f.integer ? 1 : 'any'}))), ...options.rungs.map(rungControl));
  }
  FIELDS = options.fields.map(f => f.name);
  RUNGS = options.rungs;
  setLimits(options.limits);
  fillDtypes();
  $('data_mode').querySelector('option[value=text]').disabled = !options.text;
  if (options.text && Lab.isText()) {  // a model of running text is looked at: train one like it
    $('data_mode').value = 'text';
    chooseMode();
  }
  describeData();
  poll();
}

// a rung's control, off (microgpt's) at first: a checkbox, a choice, or a number left empty
function rungControl(r) {
  if (r.switch) return el('label', {class: 'inline', title: r.help}, el('input', {type: 'checkbox', id: r.name}), r.name);
  return el('label', {title: r.help}, r.name, r.choices
    ? el('select', {id: r.name}, r.choices.map(c => el('option', {value: c}, c)))
    : el('input', {type: 'number', id: r.name, min: r.low, max: r.high, step: 1, placeholder: 'n_head'}));
}

// each number box's bounds and first value, from the server's limits for the mode
function setLimits(limits) {
  for (const name of FIELDS) [$(name).min, $(name).max, $(name).value] = limits[name];
}

// the dtypes the engine computes in; the one chosen kept where the engine has it
function fillDtypes(prefer) {
  const dtypes = Lab.config.features.training.dtypes[$('engine').value];
  const keep = prefer || $('dtype').value;
  $('dtype').replaceChildren(...dtypes.map(d => el('option', {value: d}, d)));
  $('dtype').value = dtypes.includes(keep) ? keep : dtypes[0];
}

// what the run will train on, as the server was told
function describeData() {
  const options = Lab.config.features.training;
  $('data').textContent = $('data_mode').value === 'text'
    ? `It trains on ${options.text} as running text (the server's --text): windows of block_size + 1 ` +
      'characters drawn at random from its first 90%, the last 10% held out.'
    : (options.data ? `It trains on ${options.data} (the server's --data): one name per line.`
      : "It trains on the census first names bundled with microgpt (start the server with --data FILE for your own).") +
      (options.text ? '' : ' For running text, start the server with --text FILE (or on a model of running text).');
}

// running text starts from the recipe's settings on the numpy engine; names from the page's own
function chooseMode() {
  const text = $('data_mode').value === 'text';
  const options = Lab.config.features.training;
  setLimits(text ? options.text_limits : options.limits);
  if (text) for (const [name, value] of Object.entries(TEXT_START)) $(name).value = value;
  $('engine').value = text ? 'numpy' : 'scalar';
  fillDtypes(text ? TEXT_DTYPE : 'float64');
  describeData();
}

// the request for the run the form describes: every field as the flag's value (an empty box,
// or one that holds no number, is sent as it is, for the server to refuse in one line)
function formBody() {
  const rung = r => r.switch ? $(r.name).checked : r.choices ? $(r.name).value
    : $(r.name).value === '' ? null : Number($(r.name).value);  // an empty n_kv_head: n_head's
  return {...Object.fromEntries(FIELDS.map(f => [f, $(f).value === '' ? '' : Number($(f).value)])),
          ...Object.fromEntries(RUNGS.map(r => [r.name, rung(r)])),
          engine: $('engine').value, dtype: $('dtype').value, data_mode: $('data_mode').value};
}

// a refused start said under the form, where the learner is (not above the page), and Start
// held back until a field changes: the same settings would be refused again
function refuse(message) {
  refused = Boolean(message);
  $('form-error').textContent = message;
  $('form-error').hidden = !refused;
  $('start').disabled = going || refused;
  if (refused) $('form-error').scrollIntoView({block: 'nearest'});
}

async function start() {
  try {
    await Lab.api('/api/train/start', formBody());
  } catch (e) {
    refuse(e.message);
    return;
  }
  poll();
}

async function poll() {
  clearTimeout(timer);
  // an answer overtaken by a newer poll is dropped by Lab.api, so no record is drawn twice
  const status = await Lab.guard(() => Lab.api('/api/train/status', {offset}));
  if (!status) return;
  if (status.run !== run) {  // another run than drawn (from here or elsewhere): its log read from its start
    const stale = offset !== 0;  // this answer is from the old run's offset in the new log
    train = []; smooth = []; val = []; run = status.run; offset = 0;
    $('finished').replaceChildren();  // the last run's button would open the wrong checkpoint
    if (stale) { poll(); return; }
  }
  offset = status.offset;
  smooth.push(...status.smooth);
  for (const r of status.records) {
    if ('loss' in r) train.push([r.step, r.loss]);
    else if ('val_loss' in r) val.push([r.step, r.val_loss, r.train_loss ?? null]);
  }
  going = status.state === 'running' || status.state === 'stopping';
  $('start').disabled = going || refused;
  $('stop').disabled = status.state !== 'running';
  if (status.state === 'idle') return;
  ({steps: total, batch_size: batch, data_mode: mode} = status.params);
  const last = train.length ? train[train.length - 1] : null;
  $('status').textContent = `run ${status.run}: ${status.state}` +
    (last ? `, step ${last[0]}/${total}, loss ${Lab.fmt(last[1])}` : '') +
    (val.length ? `, val loss ${Lab.fmt(val[val.length - 1][1])}` : '') +
    (status.error ? ` — ${status.error}` : '');
  $('estimate').textContent = going ?  // its own pace, once it has one
    `${Lab.fmt(status.elapsed, 0)} s so far, ${status.estimate ? status.estimate.text : 'timing its first steps'}.` : '';
  drawChart();
  $('samples').replaceChildren(...status.samples.map(s => s.text !== undefined
    ? el('li', {}, `step ${s.step}:`, Lab.textBlock(s.text))
    : el('li', {}, `step ${s.step}: ${s.names.join(', ')}`)));
  if (going || status.records.length) {  // more to come, or more of the log to read
    timer = setTimeout(poll, going ? 400 : 50);
  } else if (status.ckpt && announced !== status.ckpt) {
    announced = status.ckpt;
    await Lab.refreshConfig();
    $('finished').replaceChildren(`Saved as checkpoint “${status.ckpt}”. `,
      el('button', {type: 'button', id: 'open-run', onclick: () => Lab.selectCkpt(status.ckpt)},
        'Open it in the other pages'));
  }
}

// the run so far on the chart's whole width: steps 1 to the run's last
function drawChart() {
  if (!train.length && !val.length) { $('chart').replaceChildren(); $('chart-legend').replaceChildren(); return; }
  Lab.lossChart($('chart'), [{id: run, train, smooth, val}], [1, total]);
  drawLegend();
}

// what each mark is, below the chart (as HTML it wraps on a phone instead of shrinking with it)
function drawLegend() {
  const each = mode === 'text' ? `mean of ${batch} window${batch === 1 ? '' : 's'}`
    : batch === 1 ? 'one name' : `mean of ${batch} names`;
  const key = kind => el('span', {class: `key ${kind}`});
  $('chart-legend').replaceChildren(key('train'), ` training loss: each step (${each})  `,
    key('smooth'), ' running mean  ', key('val'),
    ` validation loss (held-out ${mode === 'text' ? 'characters' : 'names'})`,
    ...(val.some(v => v[2] !== null) || mode === 'text' ? ['  ', key('estimate'), ' training loss measured alike'] : []));
}

Lab.on('form', 'submit', start);
Lab.on('form', 'input', () => refuse(''));
Lab.on('data_mode', 'change', chooseMode);
Lab.on('engine', 'change', () => fillDtypes());
Lab.on('stop', 'click', () => Lab.guard(() => Lab.api('/api/train/stop', {})));
Lab.start(setup);
