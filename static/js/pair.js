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
