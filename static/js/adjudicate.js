// Adjudication form: search over the codebook's modes (exact name or key first, then prefixes, then
// words of the name, then anywhere in the name, then the definition), Enter picks the best match and
// goes to its rationale; "no failure mode" and the modes exclude each other.
(function () {
  "use strict";
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

  document.addEventListener("keydown", (event) => {
    const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
    if (event.key === "/" && !typing) {
      event.preventDefault();
      search.focus();
    }
  });
})();
