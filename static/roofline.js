// specscope: the roofline section's log-scale batch slider. The slider has no name: it sets
// the batch box (which is in the link) to the server's table of quarter-octave batches, before
// the input event reaches htmx. Without JavaScript the slider stays hidden and the box works.
"use strict";

document.addEventListener("DOMContentLoaded", function () {
  var slider = document.getElementById("batch-slider");
  var box = document.getElementById("rl-batch");
  if (!slider || !box) return;
  var batches = slider.dataset.batches.split(",");
  slider.hidden = false;
  slider.addEventListener("input", function () {
    box.value = batches[Number(slider.value)];
  });
});
