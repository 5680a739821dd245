// /watch: replace a deployment's section with the one the server renders after each scrape.
// Without JavaScript the page is a snapshot with a Reload link.
(() => {
  "use strict";
  const page = document.querySelector(".watch-page");
  if (!page || !window.EventSource || !page.querySelector(".watch-deployment")) return;
  const status = document.getElementById("watch-live");
  const events = new EventSource(page.dataset.events);
  events.addEventListener("update", (event) => {
    const template = document.createElement("template");
    template.innerHTML = event.data;
    const fresh = template.content.firstElementChild;
    const old = fresh && document.getElementById(fresh.id);
    if (old) old.replaceWith(fresh);
    // UTC, as every other time on the page
    const utc = new Date().toISOString().slice(11, 19);
    status.textContent = `Live: updated ${utc} UTC after a scrape.`;
  });
  // After a shutdown the browser keeps reconnecting: the server's reason stays shown until
  // it answers again.
  let shutDown = false;
  events.addEventListener("shutdown", (event) => {
    shutDown = true;
    status.textContent = event.data;
  });
  events.addEventListener("open", () => {
    shutDown = false;
    status.textContent = "Live: the page updates after every scrape.";
  });
  events.addEventListener("error", () => {
    if (shutDown) return;
    status.textContent = "The live updates stopped; trying again. Reload for a snapshot.";
  });
})();
