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

  // Moving v lets the batch section's costs go: the model returns to one v for every k. This
  // runs in the capture phase, before the request the move triggers reads the form.
  document.addEventListener("input", function (event) {
    if (event.target.id !== "v") return;
    document.querySelectorAll("#controls .held-cost").forEach(function (input) { input.remove(); });
  }, true);

  // The drafter preset: prompt lookup's c is near 0 and it has a share π of cycles with a
  // proposal; the draft model's c is the page's default. Capture phase: before the request
  // this change triggers reads the form.
  document.addEventListener("input", function (event) {
    var select = event.target;
    if (select.id !== "preset") return;
    var option = select.options[select.selectedIndex];
    var c = document.getElementById("c");
    if (c && option && option.dataset.c !== undefined) {
      c.value = option.dataset.c;
      var output = document.getElementById("c-value");
      if (output) output.value = Number(c.value).toFixed(2);
    }
    document.querySelectorAll("#controls .lookup-only").forEach(function (el) {
      el.hidden = select.value !== "ngram";
      // Disabled, pi stays out of the draft model's link.
      el.querySelectorAll("input").forEach(function (input) { input.disabled = el.hidden; });
    });
  }, true);

  // One pass's fixed cost c0 belongs to the one-pass shape: shown, and in the link, with it.
  document.addEventListener("input", function (event) {
    if (event.target.id !== "shape") return;
    document.querySelectorAll("#controls .pass-only").forEach(function (el) {
      el.hidden = event.target.value !== "pass";
      el.querySelectorAll("input").forEach(function (input) { input.disabled = el.hidden; });
    });
  }, true);

    // Resample: take the next seed and refresh the results (the link works without JS).
  document.addEventListener("click", function (event) {
    var link = event.target.closest("#resample");
    if (!link) return;
    var seed = document.getElementById("seed");
    var form = document.getElementById("controls");
    if (!seed || !form) return;
    event.preventDefault();
    seed.value = link.dataset.seed;
    form.dispatchEvent(new Event("submit", {bubbles: true, cancelable: true}));
  });

  // The sliders: each move fetches the results alone and puts them in place. Not through
  // htmx, whose swap sent two cleanup events for every element it removed and validated every
  // input of the three forms, a third of a step on a drag. One request at a time: moves made
  // while one is out wait, and only the last of them is sent, so a drag ends on its value.
  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("controls");
    if (!form) return;
    var out = false;
    var again = false;
    function link() {
      var params = new URLSearchParams(new FormData(form));
      document.querySelectorAll(form.dataset.resultsWith).forEach(function (other) {
        new FormData(other).forEach(function (value, key) { params.append(key, value); });
      });
      return "/?" + params.toString();
    }
    function failed(message) {
      var notice = document.getElementById("results-error");
      if (!notice) {
        notice = document.createElement("p");
        notice.id = "results-error";
        notice.className = "notice error";
        notice.setAttribute("role", "alert");
        document.getElementById("results").before(notice);
      }
      notice.textContent = message + " The figures below are for the last values the server answered.";
    }
    function show(html) {
      var template = document.createElement("template");
      template.innerHTML = html;
      var results = template.content.getElementById("results");
      if (!results) return failed("The server's answer had no results in it.");
      var notice = document.getElementById("results-error");
      if (notice) notice.remove();
      document.getElementById("results").replaceWith(results);
      document.dispatchEvent(new CustomEvent("specscope:results"));
    }
    function send() {
      if (out) { again = true; return; }
      out = true;
      fetch(link(), {headers: {"HX-Request": "true", "HX-Target": "results"}})
        .then(function (response) {
          if (!response.ok) throw new Error("The server answered " + response.status + ".");
          return response.text();
        })
        .then(show, function (error) {
          failed(error.message.indexOf("The server") === 0 ? error.message
                 : "The server did not answer (" + error.message + ").");
        })
        .finally(function () {
          out = false;
          if (again) { again = false; send(); }
        });
    }
    form.addEventListener("input", send);
    form.addEventListener("submit", function (event) { event.preventDefault(); send(); });
  });

  // The address bar and the tab's title follow the results once the sliders rest (the server
  // puts both on the fragment): each history.replaceState is a same-document navigation, after
  // which the browser fetches and decodes the favicon again, and on a drag that cost more than
  // the step itself. Anything else that writes the address bar flushes the pending state first,
  // so the writes keep the order of the requests.
  var pendingState = null;
  var stateTimer = null;
  var shownResults = null;
  function showState() {
    clearTimeout(stateTimer);
    if (!pendingState) return;
    history.replaceState(null, "", pendingState.url + window.location.hash);
    if (pendingState.title) document.title = pendingState.title;
    pendingState = null;
  }
  window.specscopeShowState = showState;
  document.addEventListener("specscope:results", function () {
    var results = document.getElementById("results");
    if (!results || results === shownResults) return;
    shownResults = results;
    pendingState = {url: results.dataset.canonical, title: results.dataset.title};
    clearTimeout(stateTimer);
    stateTimer = setTimeout(showState, 250);
  });
  document.addEventListener("htmx:beforeRequest", showState);
  window.addEventListener("pagehide", showState);

  // Screen readers hear a one-line summary once the sliders rest, not the whole results
  // region on every step.
  var announceTimer = null;
  document.addEventListener("specscope:results", function () {
    var results = document.getElementById("results");
    var announcer = document.getElementById("results-announcer");
    if (!results || !announcer) return;
    clearTimeout(announceTimer);
    announceTimer = setTimeout(function () { announcer.textContent = results.dataset.announce; }, 700);
  });

  // On a phone the answer stays in view while a slider moves (.pocket); once the sliders are
  // scrolled away it steps aside, so it never covers the live run or the panels below.
  document.addEventListener("DOMContentLoaded", function () {
    var controls = document.getElementById("controls");
    if (!controls || !("IntersectionObserver" in window)) return;
    new IntersectionObserver(function (entries) {
      document.body.classList.toggle("controls-away", !entries[0].isIntersecting);
    }).observe(controls);
  });

  // Copy link: the address bar is the state.
  document.addEventListener("DOMContentLoaded", function () {
    // The server names the state it shows, bad values clamped (the results carry it as
    // data-canonical, htmx answers in HX-Replace-Url): the address bar follows, so a shared link never carries refused values
    // (the #fragment stays: a link to a section still lands on it).
    var results = document.getElementById("results");
    shownResults = results;
    if (results && results.dataset.canonical) history.replaceState(null, "", results.dataset.canonical + window.location.hash);
    var button = document.getElementById("copy-link");
    var status = document.getElementById("copy-status");
    if (!button) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      showState();
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

// Run live: POST the panel's settings to /runs and render the Server-Sent Events as they come.
(function () {
  var running = null;

  function $(id) { return document.getElementById(id); }

  function syncUrl() {
    window.specscopeShowState();
    var params = new URLSearchParams(new FormData($("controls")));
    new FormData($("live-form")).forEach(function (value, key) {
      if (value !== "") params.set(key, value);  // an empty tree is a chain: not in the link
    });
    // The traffic panel's choices (several values per name) are kept as they are.
    new URLSearchParams(window.location.search).forEach(function (value, key) {
      if (key.indexOf("probe_") === 0) params.append(key, value);
    });
    history.replaceState(null, "", "/?" + params.toString());
  }

  function setStatus(text, isError) {
    var status = $("live-status");
    status.textContent = text;
    status.classList.toggle("error", !!isError);
  }

  function body() {
    var form = new FormData($("live-form"));
    return JSON.stringify({
      prompt: form.get("prompt"), pair: form.get("pair"), drafter: form.get("drafter") || "model",
      k: Number(form.get("run_k")), temperature: Number(form.get("temperature")),
      top_p: Number(form.get("top_p")), max_new_tokens: Number(form.get("max_new_tokens")),
      seed: Number(form.get("run_seed")), repeats: Number(form.get("repeats")),
      tree: form.get("run_tree") || ""
    });
  }

  var handlers = {
    queued: function (d) { setStatus("Waiting for the engine: place " + d.position + " in the queue."); },
    cycle: function (d, max) {
      var list = $("live-cycles");
      // Follow the newest cycle unless the reader has scrolled up to look at older ones.
      var following = list.scrollHeight - list.scrollTop - list.clientHeight < 24;
      list.insertAdjacentHTML("beforeend", d.chips);
      if (following) list.scrollTop = list.scrollHeight;
      $("live-text").insertAdjacentHTML("beforeend", d.text_html);
      $("live-figures").innerHTML = d.running_html;
      $("live-progress").value = d.generated;
      setStatus("Generating: " + d.generated + " of " + max + " tokens.");
    },
    repeat: function (d) {
      setStatus("Timing the run again, off screen, for the speedup: pass " + d.repeat + " of " + d.repeats + "…");
    },
    summary: function (d, max) {
      $("live-summary").innerHTML = d.html;
      // A run that ends before max new tokens ended at the model's end-of-sequence token (a
      // prompt too long for the context is refused before it starts): say so, and fill the bar.
      var made = $("live-progress").value;
      if (made < max) {
        $("live-progress").max = made;
        setStatus("Done: the model ended its answer (end of sequence) at " + made + " of " + max + " tokens.");
      } else {
        setStatus("Done.");
      }
    },
    saved: function (d) {
      $("live-share").innerHTML = d.html;
      var link = $("share-run");
      if (link) $("share-url").value = link.href;
    },
    error: function (d) { setStatus("The run stopped: " + d.message, true); }
  };

  // Slow motion paces the display only: events wait in a queue and each cycle holds the
  // screen for SLOW_MS; the run itself, and what it measures, go at full speed.
  var SLOW_MS = 150;
  var shown = [], pacing = null;

  function show() {
    while (shown.length) {
      var next = shown.shift();
      handlers[next[0]](next[1], next[2]);
      if (next[0] === "cycle" && $("slow").checked) {
        pacing = setTimeout(function () { pacing = null; show(); }, SLOW_MS);
        return;
      }
    }
  }

  function resetPacing() {
    clearTimeout(pacing);
    pacing = null;
    shown = [];
  }

  function dispatch(block, max) {
    var kind = "message", data = "";
    block.split("\n").forEach(function (line) {
      if (line.indexOf("event: ") === 0) kind = line.slice(7);
      else if (line.indexOf("data: ") === 0) data += line.slice(6);
    });
    if (!data || !handlers[kind]) return;
    shown.push([kind, JSON.parse(data), max]);
    if (!pacing) show();
  }

  async function start(event) {
    event.preventDefault();
    if (running) return;
    resetPacing();
    var max = Number($("max_new_tokens").value);
    $("live-output").hidden = false;
    $("live-cycles").innerHTML = "";
    var prompt = document.createElement("span");
    prompt.className = "prompt-text";
    prompt.textContent = $("prompt").value;
    $("live-text").replaceChildren(prompt);
    $("live-figures").innerHTML = "";
    $("live-summary").innerHTML = "";
    $("live-share").innerHTML = "";
    $("live-progress").max = max;
    $("live-progress").value = 0;
    setStatus("Starting…");
    running = new AbortController();
    // The run button is disabled while the run goes: keyboard focus moves to Stop (not to
    // the page's body) and comes back when the run ends.
    var keyboard = document.activeElement === $("run-live");
    $("run-live").disabled = true;
    $("stop-live").disabled = false;
    if (keyboard) $("stop-live").focus();
    try {
      var response = await fetch("/runs", {
        method: "POST", body: body(), signal: running.signal,
        headers: {"Content-Type": "application/json", "Accept": "text/event-stream"}
      });
      if (!response.ok) {
        var problem = await response.json().catch(function () { return {}; });
        setStatus(problem.message || ("The server answered " + response.status + "."), true);
        return;
      }
      var reader = response.body.getReader();
      var decoder = new TextDecoder();
      var buffer = "";
      for (;;) {
        var chunk = await reader.read();
        if (chunk.done) break;
        buffer += decoder.decode(chunk.value, {stream: true});
        var blocks = buffer.split("\n\n");
        buffer = blocks.pop();
        blocks.forEach(function (block) { dispatch(block, max); });
      }
    } catch (error) {
      if (error.name === "AbortError") { resetPacing(); setStatus("Stopped."); }
      else setStatus("The connection to the server was lost.", true);
    } finally {
      running = null;
      $("run-live").disabled = false;
      var focus = document.activeElement;
      if (keyboard && (focus === $("stop-live") || focus === document.body)) $("run-live").focus();
      $("stop-live").disabled = true;
    }
  }

  // Share a run or a probe: copy its permalink into the clipboard (the link itself still opens
  // it); the link names the box that shows the URL and the line that says what happened. A link
  // with data-copy-text copies that text instead (the plan's vLLM config).
  function shareLink(event, link) {
    event.preventDefault();
    var status = $(link.dataset.shareStatus);
    var text = link.dataset.copyText || link.href;
    var done = function () { status.textContent = link.dataset.copied || "Link copied: paste it anywhere."; };
    var fallback = function () { $(link.dataset.shareUrl).select(); status.textContent = link.dataset.copyText ? "Copy the selected text." : "Copy the selected link."; };
    if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text).then(done, fallback);
    else fallback();
  }

  // "Use these numbers" (a live run's button, a probe's or a calibration's links): the values
  // it carries go into the sliders in place; false when the page cannot (then a link navigates).
  function useNumbers(source) {
    var controls = $("controls");
    if (!controls || !window.htmx) return false;
    var preset = $("preset");
    if (preset && source.dataset.preset) {
      preset.value = source.dataset.preset;
      controls.querySelectorAll(".lookup-only").forEach(function (el) {
        el.hidden = preset.value !== "ngram";
        el.querySelectorAll("input").forEach(function (input) { input.disabled = el.hidden; });
      });
    }
    ["alpha", "k", "c", "v", "step_ms", "pi"].forEach(function (name) {
      if (source.dataset[name] === undefined) return;
      var input = $(name);
      input.value = source.dataset[name];
      var output = $(name + "-value");
      if (output) output.value = Number(input.value).toFixed(name === "k" ? 0 : 2);
    });
    // a run's acceptance by position, as survival rates (empty: one alpha)
    var rates = $("positions");
    if (rates) {
      rates.value = source.dataset.positions || "";
      if (source.dataset.positions) $("rates").value = "survival";
    }
    // a run's token tree (empty: a chain)
    if ($("tree")) $("tree").value = source.dataset.tree || "";
    controls.dispatchEvent(new Event("submit", {bubbles: true, cancelable: true}));
    controls.scrollIntoView({behavior: "smooth"});
    return true;
  }

  document.addEventListener("click", function (event) {
    var numbers = event.target.closest("#use-numbers, a.use-numbers");
    if (numbers && useNumbers(numbers)) event.preventDefault();
    var share = event.target.closest("a[data-share-url]");
    if (share) shareLink(event, share);
  });

  document.addEventListener("DOMContentLoaded", function () {
    var form = $("live-form");
    if (!form) return;
    form.addEventListener("submit", start);
    form.addEventListener("input", syncUrl);
    // Prompt lookup drafts no tree: the field takes part with every other drafter.
    $("drafter").addEventListener("change", function () {
      $("run_tree").disabled = $("drafter").value === "ngram";
      syncUrl();
    });
    $("stop-live").addEventListener("click", function () { if (running) running.abort(); });
    form.querySelectorAll(".preset").forEach(function (button) {
      button.addEventListener("click", function () { $("prompt").value = button.dataset.prompt; syncUrl(); });
    });
  });
})();
