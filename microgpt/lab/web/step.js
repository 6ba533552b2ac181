// The Lesson 04 page: one training step on a name, drawn from POST /api/step, which calls
// microgpt.lab.step where this version has it. Without it the page says so. The answer is
// shown as it comes: numbers in tables, lists of numbers in rows, nested parts as sections.
'use strict';

const {el} = Lab;
const $ = id => document.getElementById(id);

function show(value, name) {
  if (Array.isArray(value) && value.every(v => typeof v === 'number' || v === null)) {
    return el('p', {class: 'mono'}, `${name}: [${value.map(v => Lab.fmt(v)).join(', ')}]`);
  }
  if (value !== null && typeof value === 'object') {
    const entries = Array.isArray(value) ? value.map((v, i) => [`${i}`, v]) : Object.entries(value);
    return el('div', {class: 'panel'}, el('h3', {}, name), entries.map(([k, v]) => show(v, k)));
  }
  return el('p', {class: 'mono'}, `${name}: ${typeof value === 'number' ? Lab.fmt(value, 6) : value}`);
}

async function draw() {
  const available = Lab.config.features.step;
  $('unavailable').hidden = available;
  $('form').hidden = !available;
  if (!available) return;
  await Lab.guard(async () => {
    const data = await Lab.api('/api/step', {ckpt: Lab.ckpt(), text: $('text').value, lr: Number($('lr').value)});
    $('result').replaceChildren(show(data, 'one training step'));
  });
}

Lab.on('form', 'submit', draw);
Lab.start(draw);
