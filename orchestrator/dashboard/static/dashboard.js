// nexo dashboard: local times and the live feed. Every page works without this file.
"use strict";

function localTimes(root) {
  for (const el of root.querySelectorAll("time[datetime]")) {
    const at = new Date(el.getAttribute("datetime"));
    if (!isNaN(at)) {
      el.textContent = at.toLocaleString();
      el.title = el.getAttribute("datetime");
    }
  }
}

function feed(list) {
  const base = list.dataset.stream;
  let last = Number(new URL(base, location.href).searchParams.get("after") || 0);
  const state = { source: null, last: () => last };

  function add(html) {
    const holder = document.createElement("template");
    holder.innerHTML = html; // escaped by the server; the CSP forbids inline script either way
    const item = holder.content.firstElementChild;
    if (!item) return;
    const seq = Number(item.dataset.seq);
    if (seq <= last || document.getElementById(item.id)) return;
    last = seq;
    localTimes(item);
    list.prepend(item);
    const empty = document.querySelector("p.empty");
    if (empty) empty.remove();
  }

  function header(html) {
    const holder = document.createElement("template");
    holder.innerHTML = html; // escaped by the server, as the entries are
    const fresh = holder.content.firstElementChild;
    const shown = document.getElementById("goal-status");
    if (!fresh || !shown || fresh.id !== "goal-status") return;
    localTimes(fresh);
    shown.replaceWith(fresh);
  }

  state.connect = function () {
    const url = new URL(base, location.href);
    url.searchParams.set("after", String(last));
    state.source = new EventSource(url.pathname + url.search);
    state.source.addEventListener("entry", (event) => add(event.data));
    state.source.addEventListener("goal", (event) => header(event.data));
    state.source.addEventListener("open", () => { list.dataset.connected = "yes"; });
    // The browser reconnects by itself, sending Last-Event-ID; until then the page shows it is behind.
    state.source.addEventListener("error", () => { list.dataset.connected = "no"; });
  };
  state.drop = function () {
    if (state.source) state.source.close();
    list.dataset.connected = "no";
  };
  state.connect();
  // A browser opens at most six connections to one host over HTTP/1.1: a hidden tab gives its
  // stream back and picks up after the last entry it has when shown again.
  document.addEventListener("visibilitychange", () => {
    if (document.hidden) state.drop();
    else if (!state.source || state.source.readyState === EventSource.CLOSED) state.connect();
  });
  return state;
}

document.addEventListener("DOMContentLoaded", () => {
  localTimes(document);
  const list = document.getElementById("feed");
  if (list && list.dataset.stream) window.nexoFeed = feed(list);
});
