// The queue page's keys: n opens the next run, ? lists the keys (the coding page has its own).
(function () {
  "use strict";
  const dialog = document.getElementById("shortcuts");
  const typing = () => /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName) || document.activeElement.isContentEditable;
  document.getElementById("show-shortcuts")?.addEventListener("click", () => dialog.showModal());
  document.addEventListener("keydown", (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing() || dialog.open) return;
    if (event.key === "?") {
      event.preventDefault();
      dialog.showModal();
    } else if (event.key === "n") {
      const next = document.getElementById("next-run");
      if (next) { event.preventDefault(); window.location.assign(next.href); }
    }
  });
})();
