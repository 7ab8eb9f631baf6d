// What the pages with keys share (coding, adjudication, discussion): the key-feedback line that says what a key
// did (say), whether a key is typed into a field (typing), and the `?` list of a page's keys (#shortcuts, a
// <dialog>, also opened by its #show-shortcuts button). Loaded before the page's own script.
(function () {
  "use strict";
  window.Parallax = window.Parallax || {};
  let timer = null;

  // A short note on what a key did ("Undone.", "Cited …"), gone after a few seconds.
  window.Parallax.say = function (text) {
    const feedback = document.getElementById("key-feedback");
    if (!feedback) return;
    feedback.textContent = text;
    feedback.hidden = false;
    clearTimeout(timer);
    timer = setTimeout(() => { feedback.hidden = true; }, 3000);
  };

  window.Parallax.typing = function () {
    const active = document.activeElement;
    return !!active && (/^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName) || active.isContentEditable);
  };

  // `?` (out of a field) and the page's "shortcuts ?" button open its list; Esc closes it (the dialog's own).
  window.Parallax.shortcutList = function () {
    const dialog = document.getElementById("shortcuts");
    if (!dialog) return;
    document.getElementById("show-shortcuts")?.addEventListener("click", () => dialog.showModal());
    document.addEventListener("keydown", (event) => {
      if (event.key !== "?" || event.ctrlKey || event.metaKey || event.altKey || dialog.open) return;
      if (window.Parallax.typing()) return;
      event.preventDefault();
      dialog.showModal();
    });
  };
})();
