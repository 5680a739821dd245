// specscope: replay a saved run cycle by cycle, at the speed it ran or slowed down.
// The server rendered every cycle and every running figure; this only shows and hides them.
"use strict";

(function () {
  function $(id) { return document.getElementById(id); }

  document.addEventListener("DOMContentLoaded", function () {
    var run = $("saved-run");
    if (!run) return;
    var cycles = $("replay-cycles").children;
    var texts = $("replay-text").querySelectorAll("[data-cycle]");
    var frames = run.querySelectorAll("template.replay-frame");
    var total = Number(run.dataset.total);
    var shown = Number(run.dataset.shown);
    var speed = run.dataset.speed;
    var timer = null;

    function show(n) {
      shown = n;
      for (var i = 0; i < total; i++) {
        cycles[i].hidden = i >= n;
        texts[i].hidden = i >= n;
      }
      $("replay-figures").innerHTML = n ? frames[n - 1].innerHTML : "";
      $("replay-progress").value = n ? Number(frames[n - 1].dataset.tokens) : 0;
      $("replay-summary").hidden = n < total;
      $("replay-status").textContent = n < total ? "Cycle " + n + " of " + total + "." : "All " + total + " cycles.";
      if (n) cycles[n - 1].scrollIntoView({block: "nearest"});
      var query = "?cycle=" + n + "&speed=" + speed;
      $("replay-step").href = "?cycle=" + Math.min(n + 1, total) + "&speed=" + speed;
      history.replaceState(null, "", n < total ? query : "?speed=" + speed);
    }

    function stop() {
      if (timer) clearTimeout(timer);
      timer = null;
      $("replay-pause").hidden = true;
    }

    // Each cycle stays on screen as long as it took when it ran, divided by the speed.
    function tick() {
      if (shown >= total) { stop(); return; }
      timer = setTimeout(function () {
        show(shown + 1);
        tick();
      }, Number(frames[shown].dataset.delayMs) / Number(speed));
    }

    function play(newSpeed) {
      stop();
      speed = newSpeed;
      run.querySelectorAll(".replay-play").forEach(function (b) {
        b.classList.toggle("current", b.dataset.speed === speed);
      });
      show(0);
      $("replay-pause").hidden = false;
      tick();
    }

    run.querySelectorAll(".replay-play").forEach(function (link) {
      link.addEventListener("click", function (event) { event.preventDefault(); play(link.dataset.speed); });
    });
    $("replay-step").addEventListener("click", function (event) {
      event.preventDefault();
      stop();
      show(shown >= total ? 1 : shown + 1);
    });
    $("replay-all").addEventListener("click", function (event) { event.preventDefault(); stop(); show(total); });
    $("replay-pause").addEventListener("click", stop);

    var copy = $("copy-run-link");
    copy.hidden = false;
    copy.addEventListener("click", function () {
      var url = $("run-link").value;
      var done = function () { $("copy-run-status").textContent = "Link copied"; };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(url).then(done, function () { $("run-link").select(); });
      } else {
        $("run-link").select();
      }
    });
  });
})();
