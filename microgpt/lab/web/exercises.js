// The Exercises page draws what POST /api/exercises answers (lab/exercises/web.py); a check is
// POST /api/exercises/check, run by the server in the checker's subprocess, never here.
'use strict';

const {$, el} = Lab;
const MARKS = {pass: '✓', fail: '✗', todo: '·', error: '!'};

async function draw() {
  await Lab.guard(async () => show(await Lab.api('/api/exercises', {})), ['path']);
}

function show(d) {
  const code = text => el('pre', {class: 'mono small'}, text);
  $('start').replaceChildren(...(d.workspace ? [
    el('p', {}, 'Your exercises: ', el('code', {id: 'workspace'}, d.workspace),
      '. A result here is the last check, from this page or the command line; check again after an edit.')] : [
    el('p', {}, 'Start in a terminal, then open your folder\'s first file:'), code(d.start.join('\n')),
    el('p', {id: 'no-workspace', class: 'muted'}, 'This lab was started without a folder of exercises, so it ' +
      'shows the path only and runs no code of yours. To see your results here and check from this page: ',
      el('code', {}, d.serve))]));
  let rung = null;
  const rows = [el('tr', {}, ['#', 'exercise', 'what', 'file', 'see the idea', ...(d.workspace ? ['last result', ''] : [])]
    .map(h => el('th', {class: 'l'}, h)))];
  for (const e of d.exercises) {
    if (e.rung !== rung) {
      rung = e.rung;
      rows.push(el('tr', {class: 'rung'}, el('th', {class: 'l', colspan: d.workspace ? 7 : 5}, d.rungs[rung])));
    }
    const cells = [el('td', {class: 'num'}, e.number), el('td', {class: 'l mono'}, `${e.function}()`),
      el('td', {class: 'l'}, e.title, el('div', {class: 'muted small'}, `microgpt's own: ${e.real}`)),
      el('td', {class: 'l mono small'}, e.file),
      el('td', {class: 'l'}, el('a', {href: '/' + e.page, class: 'idea'}, e.page_title),
        el('div', {class: 'muted small mono'}, e.command))];
    if (d.workspace) {
      const r = e.result;
      cells.push(el('td', {class: 'l result', 'data-status': r ? r.status : 'none'},
        r ? el('span', {class: `mark ${r.status}`}, MARKS[r.status] || '?') : el('span', {class: 'muted'}, 'not checked'),
        r ? ` ${r.line}` : '', r ? el('div', {class: 'muted small'}, `checked ${r.checked}` +
          (e.edited ? ', edited since' : '')) : null));
      cells.push(el('td', {}, el('button', {type: 'button', class: 'secondary check', 'data-number': e.number,
        onclick: () => check(e)}, 'check')));
    }
    rows.push(el('tr', {'data-number': e.number}, cells));
  }
  $('path').replaceChildren(...rows);
  if (d.next) $('start').append(el('div', {id: 'next'}, el('p', {}, 'Every exercise passes. Beyond the path:'),
    el('ul', {}, ...d.next.map(step => el('li', {}, step)))));
}

// the report of the last check, in a row of its own right under the exercise checked
function showReport(number, text, status) {
  document.getElementById('report-row')?.remove();
  const row = document.querySelector(`#path tr[data-number="${number}"]`);
  row.after(el('tr', {id: 'report-row', 'data-number': number, 'data-status': status || null},
    el('td', {colspan: 7}, el('pre', {id: 'report', class: 'report'}, text))));
}

async function check(e) {
  for (const b of document.querySelectorAll('button.check')) b.disabled = true;
  showReport(e.number, `checking exercise ${e.number} (${e.function}) …`);
  const result = await Lab.guard(async () => {
    const d = await Lab.api('/api/exercises/check', {number: e.number});
    show(d);
    showReport(d.number, d.report, d.status);
    return d;
  });
  if (result === undefined) document.getElementById('report-row')?.remove();
  for (const b of document.querySelectorAll('button.check')) b.disabled = false;
}

Lab.start(draw);
