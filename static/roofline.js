// specscope: the roofline section's log-scale batch slider. The slider has no name: it sets
// the batch box (which is in the link) to the server's table of quarter-octave batches, before
// the input event reaches htmx; a typed batch moves the slider. Without JavaScript the slider
// stays hidden and the box works.
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
  // A typed batch moves the slider to the nearest table entry on the log scale.
  box.addEventListener("input", function () {
    var typed = Math.log(Number(box.value));
    if (!isFinite(typed)) return;
    var nearest = 0;
    batches.forEach(function (b, i) {
      if (Math.abs(Math.log(b) - typed) < Math.abs(Math.log(batches[nearest]) - typed)) nearest = i;
    });
    slider.value = nearest;
  });
});
