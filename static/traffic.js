// "Your traffic": send the probe's settings (query) and prompt file (body) to /probes and
// show the streamed progress. ("Use these numbers" and "Share this probe" are specscope.js's.)
// No figure is computed here: the server renders the table and the charts.
"use strict";

(function () {
  var running = null;

  function $(id) { return document.getElementById(id); }

  function setStatus(text, isError) {
    var status = $("probe-status");
    status.textContent = text;
    status.classList.toggle("error", !!isError);
  }

  function query(form, file) {
    var data = new FormData(form), params = new URLSearchParams();
    data.getAll("probe_set").forEach(function (s) { if (s) params.append("sets", s); });
    params.set("temperatures", data.getAll("probe_t").join(","));
    params.set("k", data.get("probe_k"));
    params.set("max_new_tokens", data.get("probe_tokens"));
    params.set("prompts_per_set", data.get("probe_prompts"));
    if (data.get("probe_pair")) params.set("pair", data.get("probe_pair"));
    if (data.get("probe_engine")) params.set("engine", data.get("probe_engine"));
    if (data.get("probe_drafter")) params.set("drafter", data.get("probe_drafter"));
    if (file) params.set("file_name", file.name);
    return params.toString();
  }

  var handlers = {
    queued: function (d) { setStatus("Waiting for the engine: place " + d.position + " in the queue."); },
    progress: function (d) {
      $("probe-progress").max = d.total;
      $("probe-progress").value = d.done;
      var engine = d.engine === "vllm" ? "vLLM: " : "";
      setStatus("Measured " + d.done + " of " + d.total + " prompt runs (" + engine + d.domain + ", T = " + d.temperature + ").");
    },
    probe: function (d) { $("probe-result").innerHTML = d.html; setStatus("Done."); },
    saved: function (d) {
      $("probe-share").innerHTML = d.html;
      var link = $("share-probe");
      if (link) $("share-probe-url").value = link.href;
    },
    error: function (d) { setStatus("The probe stopped: " + d.message, true); }
  };

  function dispatch(block) {
    var kind = "message", data = "";
    block.split("\n").forEach(function (line) {
      if (line.indexOf("event: ") === 0) kind = line.slice(7);
      else if (line.indexOf("data: ") === 0) data += line.slice(6);
    });
    if (data && handlers[kind]) handlers[kind](JSON.parse(data));
  }

  async function start(event) {
    event.preventDefault();
    if (running) return;
    var form = $("traffic-form");
    var file = $("probe-file").files[0] || null;
    $("probe-output").hidden = false;
    $("probe-result").innerHTML = "";
    $("probe-share").innerHTML = "";
    $("probe-progress").value = 0;
    setStatus("Starting…");
    running = new AbortController();
    $("run-probe").disabled = true;
    $("stop-probe").disabled = false;
    try {
      var response = await fetch("/probes?" + query(form, file), {
        method: "POST", body: file ? await file.arrayBuffer() : "", signal: running.signal,
        headers: {"Content-Type": "application/octet-stream", "Accept": "text/event-stream"}
      });
      if (!response.ok) {
        var problem = await response.json().catch(function () { return {}; });
        setStatus(problem.message || ("The server answered " + response.status + "."), true);
        return;
      }
      var reader = response.body.getReader(), decoder = new TextDecoder(), buffer = "";
      for (;;) {
        var chunk = await reader.read();
        if (chunk.done) break;
        buffer += decoder.decode(chunk.value, {stream: true});
        var blocks = buffer.split("\n\n");
        buffer = blocks.pop();
        blocks.forEach(dispatch);
      }
    } catch (error) {
      if (error.name === "AbortError") setStatus("Stopped.");
      else if (error.name === "NotReadableError") setStatus("The file could not be read.", true);
      else setStatus("The connection to the server was lost.", true);
    } finally {
      running = null;
      $("run-probe").disabled = false;
      $("stop-probe").disabled = true;
    }
  }

  // The panel's choices follow the address bar like every other control.
  function syncUrl() {
    if (window.specscopeShowState) window.specscopeShowState();
    var params = new URLSearchParams(window.location.search);
    ["probe_set", "probe_t", "probe_k", "probe_tokens", "probe_prompts"].forEach(function (key) { params.delete(key); });
    var data = new FormData($("traffic-form"));
    data.getAll("probe_set").forEach(function (s) { params.append("probe_set", s); });
    data.getAll("probe_t").forEach(function (t) { params.append("probe_t", t); });
    ["probe_k", "probe_tokens", "probe_prompts"].forEach(function (key) { params.set(key, data.get(key)); });
    params.delete("probe_engine");
    var engine = data.get("probe_engine");
    if (engine && engine !== "specscope") params.set("probe_engine", engine);  // as the server writes it
    params.delete("probe_drafter");
    var drafter = data.get("probe_drafter");
    if (drafter && drafter !== "model") params.set("probe_drafter", drafter);
    history.replaceState(null, "", "/?" + params.toString());
  }

  document.addEventListener("DOMContentLoaded", function () {
    var form = $("traffic-form");
    if (!form) return;
    form.addEventListener("submit", start);
    form.addEventListener("change", syncUrl);
    $("stop-probe").addEventListener("click", function () { if (running) running.abort(); });
  });
})();
