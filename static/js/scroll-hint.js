// A table or chart wider than its box scrolls inside it (never the page): say so above it, and shade
// the edge that has more to see. Re-measured when the window changes size and when htmx brings content.
(function () {
  "use strict";
  const SELECTOR = ".table-scroll, table.data, .chart-box";
  const scrolling = (el) => /^(auto|scroll)$/.test(getComputedStyle(el).overflowX);

  function edges(el) {
    el.classList.toggle("more-left", el.scrollLeft > 1);
    el.classList.toggle("more-right", el.scrollLeft + el.clientWidth < el.scrollWidth - 1);
  }

  function mark(el) {
    const wide = scrolling(el) && el.scrollWidth > el.clientWidth + 1;
    const hint = el.previousElementSibling && el.previousElementSibling.matches(".scroll-hint") ? el.previousElementSibling : null;
    el.classList.toggle("scrolls-x", wide);
    if (wide && !hint) {
      const note = document.createElement("p");
      note.className = "scroll-hint small muted";
      note.textContent = "⇆ wider than the screen: scroll it sideways for the rest";
      el.before(note);
    } else if (!wide && hint) hint.remove();
    if (wide) edges(el);
    if (!el.dataset.scrollHint) {
      el.dataset.scrollHint = "1";
      el.addEventListener("scroll", () => edges(el), { passive: true });
    }
  }

  function markAll() { document.querySelectorAll(SELECTOR).forEach(mark); }
  let timer = null;
  window.addEventListener("resize", () => { clearTimeout(timer); timer = setTimeout(markAll, 150); });
  document.addEventListener("htmx:afterSettle", markAll);
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", markAll);
  else markAll();
})();
