// The discussion page's keys, as on the coding and adjudication pages (keys.js): m writes a comment, Esc leaves a
// text box, Ctrl+Enter posts the comment, ? lists the keys; the log's keys (pair.js: j / k / J / K / o / r) move
// through the pair shown below the comments.
(function () {
  "use strict";
  const P = window.Parallax;
  P.shortcutList();
  const box = () => document.querySelector("#comments form textarea[name=text]");

  document.addEventListener("keydown", (event) => {
    const active = document.activeElement;
    const mod = event.ctrlKey || event.metaKey;
    if (mod && event.key === "Enter") {
      const form = active && active.closest ? active.closest("#comments form") : null;
      if (!form) {
        if (box()) { event.preventDefault(); P.say("m writes a comment; Ctrl+Enter in it posts it."); }
        return;
      }
      event.preventDefault();
      if (!box().value.trim()) { P.say("Nothing to post: write the comment first."); return; }
      form.requestSubmit();  // htmx posts it and puts the comments back, this one with them
      return;
    }
    if (event.key === "Escape") { if (P.typing()) active.blur(); return; }
    if (P.typing() || mod || event.altKey || document.querySelector("dialog[open]")) return;
    if (event.key === "m" && box()) {
      event.preventDefault();
      box().focus();
    }
  });

  // After a post the comments are new: say so, and leave the keys to the page.
  document.addEventListener("htmx:afterSwap", (event) => {
    if (event.detail.target && event.detail.target.id === "comments" && !document.getElementById("comment-error")) {
      P.say("Posted.");
    }
  });
})();
