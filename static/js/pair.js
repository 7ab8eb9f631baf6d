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
