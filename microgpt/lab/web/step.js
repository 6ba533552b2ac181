// The Lesson 04 page: one training step on a name, drawn from POST /api/step, which calls
// microgpt.lab.step where this version has it. Without it the page says so. The answer is
// shown as it comes: numbers in tables, lists of numbers in rows, nested parts as sections.
'use strict';

const $ = id => document.getElementById(id);

async function draw() {
  const available = Lab.config.features.step;
  $('unavailable').hidden = available;
  $('form').hidden = !available;
  if (!available) return;
  await Lab.guard(async () => {
    const data = await Lab.api('/api/step', {ckpt: Lab.ckpt(), text: $('text').value, lr: Number($('lr').value)});
    $('result').replaceChildren(Lab.show(data, 'one training step'));
  });
}

Lab.on('form', 'submit', draw);
Lab.start(draw);
