// specscope: the small enhancements htmx does not cover. No figure is computed here;
// the server renders every number.
"use strict";

(function () {
  function decimals(input) {
    return Number.isInteger(Number(input.step)) ? 0 : 2;
  }

  // The number beside each slider follows the thumb before the server answers.
  document.addEventListener("input", function (event) {
    var input = event.target;
    if (input.type !== "range") return;
    var output = document.getElementById(input.id + "-value");
    if (output) output.value = Number(input.value).toFixed(decimals(input));
  });

  // Resample: take the next seed and refresh the results (the link works without JS).
  document.addEventListener("click", function (event) {
    var link = event.target.closest("#resample");
    if (!link) return;
    var seed = document.getElementById("seed");
    var form = document.getElementById("controls");
    if (!seed || !form || !window.htmx) return;
    event.preventDefault();
    seed.value = link.dataset.seed;
    htmx.trigger(form, "submit");
  });

  // Copy link: the address bar is the state.
  document.addEventListener("DOMContentLoaded", function () {
    var button = document.getElementById("copy-link");
    var status = document.getElementById("copy-status");
    if (!button) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      var url = window.location.href;
      var done = function () { status.textContent = "Link copied"; };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(url).then(done, function () { window.prompt("Copy this link", url); });
      } else {
        window.prompt("Copy this link", url);
      }
    });
  });
})();
