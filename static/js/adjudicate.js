// Adjudication form: search over the codebook's modes (exact name or key first, then prefixes, then
// words of the name, then anywhere in the name, then the definition), Enter picks the best match and
// goes to its rationale; "no failure mode" and the modes exclude each other. The coding page's keys:
// 1–9 pick or drop the numbered modes shown, 0 no failure mode, Esc leaves a field, Ctrl+Enter records,
// c cites the event under the log's cursor (pair.js: j / k / J / K / o / r) into the mode last edited.
(function () {
  "use strict";
  window.Parallax.shortcutList();  // ? lists the keys (keys.js), on a case ruled or not
  const form = document.getElementById("adjudication-form");
  if (!form) return;
  const search = document.getElementById("mode-search");
  const noFailure = document.getElementById("no-failure");
  const lists = Array.from(form.querySelectorAll(".ruling-list"));
  const items = Array.from(form.querySelectorAll(".ruling-mode"));
  const noMatch = form.querySelector(".no-match");
  const boxes = () => Array.from(form.querySelectorAll('input[name="code"]'));

  // the shared ranking (code-rank.js); -1 for no match
  function rank(item, query) {
    const r = window.Parallax.rankCode(item, query);
    return r === null ? -1 : r;
  }

  let best = null;
  function filter() {
    const query = search.value.trim().toLowerCase().replace(/\s+/g, " ");
    best = null;
    let bestRank = Infinity;
    lists.forEach((list) => {
      const ranked = Array.from(list.querySelectorAll(":scope > .ruling-mode")).map((item) => ({
        item, r: query ? rank(item, query) : 0, order: items.indexOf(item),
      }));
      // Shown in rank order while searching, in codebook order otherwise.
      ranked.sort((a, b) => (a.r - b.r) || (a.order - b.order));
      ranked.forEach(({ item, r }) => {
        item.hidden = r < 0;
        item.classList.remove("best");
        list.appendChild(item);
        if (query && r >= 0 && r < bestRank) { bestRank = r; best = item; }
      });
      const head = list.previousElementSibling;
      const shown = !query || ranked.some(({ r }) => r >= 0);
      if (head && head.classList.contains("group-head")) head.hidden = !shown;
      list.hidden = !shown;
    });
    if (best) best.classList.add("best");
    noMatch.hidden = !query || best !== null;
    number();
  }

  // The first nine modes shown, in the order shown (the proposed ones first), carry their number key.
  let numbered = [];
  function number() {
    numbered = Array.from(form.querySelectorAll(".ruling-mode")).filter((item) => !item.hidden && !item.closest(".ruling-list").hidden).slice(0, 9);
    items.forEach((item) => { item.querySelector(".hotkey").hidden = true; });
    numbered.forEach((item, index) => {
      const badge = item.querySelector(".hotkey");
      badge.textContent = String(index + 1);
      badge.hidden = false;
    });
  }

  function pick(item) {
    const box = item.querySelector('input[name="code"]');
    if (!box.checked) {
      box.checked = true;
      box.dispatchEvent(new Event("change", { bubbles: true }));
    }
    item.querySelector('[data-role="rationale"]').focus();
  }

  search.addEventListener("input", filter);
  search.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();  // never submits the ruling
      const target = best;
      search.value = "";
      filter();
      if (target) pick(target);
    } else if (event.key === "Escape") {
      search.value = "";
      filter();
    }
  });

  form.addEventListener("change", (event) => {
    if (event.target === noFailure && noFailure.checked) {
      boxes().forEach((box) => { box.checked = false; });
    } else if (event.target.name === "code" && event.target.checked) {
      noFailure.checked = false;
    }
  });

  // What a key did, beside the form (keys.js, shared with the coding and discussion pages).
  const say = window.Parallax.say;

  // "cite" (an event's button, or c on the event under the log's cursor) adds the event's anchor to the
  // mode last edited: evidence from the concurrent run, contrast from the sequential one.
  let activeMode = null;
  form.addEventListener("focusin", (event) => {
    const item = event.target.closest(".ruling-mode");
    if (item) activeMode = item;
  });
  function cite(button) {
    if (!activeMode || !activeMode.querySelector('input[name="code"]').checked) {
      say("Pick a mode (or click into its fields) first; the event is cited there.");
      return;
    }
    const field = activeMode.querySelector(`textarea[name^="${button.dataset.mode === "sequential" ? "contrast" : "evidence"}-"]`);
    const lines = field.value.split("\n").map((l) => l.trim()).filter(Boolean);
    if (!lines.includes(button.dataset.anchor)) lines.push(button.dataset.anchor);
    field.value = lines.join("\n");
    button.textContent = "cited";
    say(`Cited ${button.dataset.anchor}.`);
  }
  document.addEventListener("click", (event) => {
    const button = event.target.closest(".cite");
    if (!button) return;
    event.preventDefault();
    cite(button);
  });

  function toggleMode(item) {
    const box = item.querySelector('input[name="code"]');
    box.checked = !box.checked;
    box.dispatchEvent(new Event("change", { bubbles: true }));
    if (box.checked) { activeMode = item; item.querySelector('[data-role="rationale"]').focus(); }
  }

  document.addEventListener("keydown", (event) => {
    const active = document.activeElement;
    const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName) || active.isContentEditable;
    const mod = event.ctrlKey || event.metaKey;
    if (mod && event.key === "Enter") { event.preventDefault(); form.requestSubmit(); return; }
    if (event.key === "Escape") { if (typing && active !== search) active.blur(); return; }
    if (typing || mod || event.altKey || document.querySelector("dialog[open]")) return;
    const key = event.key;
    if (key === "/") { event.preventDefault(); search.focus(); }
    else if (/^[1-9]$/.test(key)) {
      const item = numbered[Number(key) - 1];
      if (!item) return;
      event.preventDefault();
      toggleMode(item);
    } else if (key === "0") {
      event.preventDefault();
      noFailure.checked = !noFailure.checked;
      noFailure.dispatchEvent(new Event("change", { bubbles: true }));
    } else if (key === "c") {
      event.preventDefault();
      const here = window.Parallax.log && window.Parallax.log.current();
      const button = here && here.matches("li.event") ? here.querySelector(".cite") : null;
      if (button) cite(button);
      else say(here ? "Only an event can be cited: j / k move to one, o opens an agent." : "Move to an event first: j / k, o opens an agent.");
    }
  });
  number();
})();
