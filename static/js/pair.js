// The pair: "Scroll the two runs together" puts each run in a pane of the window's height and keeps
// both at the same fraction of their length while either is scrolled (the choice is remembered).
(function () {
  "use strict";
  const pair = document.getElementById("pair");
  const option = document.getElementById("scroll-together");
  if (!pair || !option) return;
  const panes = () => Array.from(pair.querySelectorAll("section.side"));
  let syncing = false;

  function follow(event) {
    if (syncing || !pair.classList.contains("together")) return;
    const source = event.currentTarget;
    const range = source.scrollHeight - source.clientHeight;
    const fraction = range > 0 ? source.scrollTop / range : 0;
    syncing = true;
    panes().forEach((pane) => {
      if (pane !== source) pane.scrollTop = fraction * (pane.scrollHeight - pane.clientHeight);
    });
    requestAnimationFrame(() => { syncing = false; });
  }

  function apply() {
    pair.classList.toggle("together", option.checked);
    try { localStorage.setItem("parallax.scrollTogether", option.checked ? "1" : ""); } catch (e) { /* private mode */ }
  }
  panes().forEach((pane) => pane.addEventListener("scroll", follow, { passive: true }));
  try { option.checked = localStorage.getItem("parallax.scrollTogether") === "1"; } catch (e) { /* private mode */ }
  option.addEventListener("change", apply);
  apply();
})();

// Each run's artifacts as tabs (final answer, patch, evaluation, test output, cell record): one shown
// at a time, opened. Without this script they are the plain list they are written as.
(function () {
  "use strict";
  document.querySelectorAll("ul.artifacts").forEach((list, n) => {
    const items = Array.from(list.children);
    if (items.length < 2) return;
    const bar = document.createElement("div");
    bar.className = "artifact-tabs";
    bar.setAttribute("role", "tablist");
    const tabs = items.map((item, i) => {
      const tab = document.createElement("button");
      tab.type = "button";
      tab.className = "artifact-tab";
      tab.setAttribute("role", "tab");
      tab.id = `artifact-tab-${n}-${i}`;
      tab.textContent = (item.querySelector("strong") || item).textContent.trim();
      item.setAttribute("role", "tabpanel");
      item.setAttribute("aria-labelledby", tab.id);
      const details = item.querySelector("details");
      if (details) details.open = true;
      tab.addEventListener("click", () => select(i));
      bar.append(tab);
      return tab;
    });
    function select(index) {
      items.forEach((item, i) => { item.hidden = i !== index; });
      tabs.forEach((tab, i) => tab.setAttribute("aria-selected", String(i === index)));
    }
    list.before(bar);
    list.classList.add("tabbed");
    select(0);
  });
})();

// The log under the keys, wherever a pair is shown: j / k the next / previous agent or event of the run
// in focus, J / K the next / previous agent, o open or close it (an agent opened puts the cursor on its
// first event once loaded), r the other run. The page's own script cites the event under the cursor (c),
// read from window.Parallax.log.current().
(function () {
  "use strict";
  const pair = document.getElementById("pair");
  if (!pair) return;
  const AGENT = 'ol.contexts > li[id^="agent-"] > details > summary';
  const sides = () => Array.from(pair.querySelectorAll("section.side:not(.missing)"));
  const shown = (el) => el.getClientRects().length > 0;
  const items = (side, agentsOnly) =>
    Array.from(side.querySelectorAll(agentsOnly ? AGENT : `${AGENT}, ol.contexts li.event`)).filter(shown);
  const agentOf = (el) => el.closest('li[id^="agent-"]').querySelector(":scope > details > summary");
  let cursor = null;
  let side = null;
  const last = new Map();  // each run's cursor, for r

  function put(el) {
    if (cursor) cursor.classList.remove("log-cursor");
    cursor = el;
    if (!el) return;
    side = el.closest("section.side");
    last.set(side, el);
    if (el.tagName !== "SUMMARY") el.tabIndex = -1;
    el.classList.add("log-cursor");
    el.focus({ preventScroll: true });
    el.scrollIntoView({ block: "nearest" });
  }

  function current() { return cursor && cursor.isConnected && shown(cursor) ? cursor : null; }

  function move(delta, agentsOnly) {
    if (!side || !side.isConnected) side = sides()[0];
    if (!side) return;
    const list = items(side, agentsOnly);
    if (!list.length) return;
    const here = current();
    if (!here) { put(delta > 0 ? list[0] : list[list.length - 1]); return; }
    const mark = agentsOnly ? agentOf(here) : here;
    let at = list.indexOf(mark);
    // K from inside an agent's events goes to that agent first
    if (agentsOnly && delta < 0 && mark !== here) at += 1;
    put(list[Math.min(Math.max(at + delta, 0), list.length - 1)]);
  }

  function toggle() {
    const here = current();
    if (!here) { move(1, true); return; }
    if (here.tagName !== "SUMMARY") {
      const text = here.querySelector(":scope > details");
      if (text) text.open = !text.open;
      return;
    }
    const details = here.parentElement;
    details.open = !details.open;
    if (!details.open) return;
    const first = () => details.querySelector("li.event");
    if (first()) { put(first()); return; }
    // the agent's events arrive by htmx: step into the first one when they do
    const arrived = () => {
      if (first() && cursor === here) put(first());
      if (first() || details.querySelector(".events p.muted")) details.removeEventListener("htmx:afterSwap", arrived);
    };
    details.addEventListener("htmx:afterSwap", arrived);
  }

  function otherRun() {
    const all = sides();
    const next = all.find((s) => s !== (side && side.isConnected ? side : all[0])) || null;
    if (!next) return;
    side = next;
    const kept = last.get(next);
    put(kept && kept.isConnected && shown(kept) ? kept : items(next, false)[0] || null);
  }

  window.Parallax = window.Parallax || {};
  window.Parallax.log = { current };

  document.addEventListener("keydown", (event) => {
    const active = document.activeElement;
    const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName) || active.isContentEditable;
    if (typing || event.ctrlKey || event.metaKey || event.altKey || document.querySelector("dialog[open]")) return;
    const act = { j: () => move(1, false), k: () => move(-1, false), J: () => move(1, true), K: () => move(-1, true), o: toggle, r: otherRun }[event.key];
    if (!act) return;
    event.preventDefault();
    act();
  });
})();
