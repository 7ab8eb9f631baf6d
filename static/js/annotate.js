// Code picker for the annotate page: cards follow the checkboxes, search, keyboard, "cite".
(function () {
  "use strict";
  const form = document.getElementById("annotation-form");
  if (!form) return;
  const search = document.getElementById("code-search");
  const noFailure = document.getElementById("no-failure");
  const boxes = () => Array.from(form.querySelectorAll('input[name="code"]'));
  // The instance (episode) that "cite" adds evidence to: the one last focused.
  let activeInstance = null;

  function showCard(box) {
    const card = document.getElementById(box.dataset.card);
    if (!card) return;
    card.hidden = !box.checked;
    box.closest(".mode-option").classList.toggle("picked", box.checked);
    if (box.checked) activeInstance = card.querySelector(".instance");
    numberInstances(card);
  }

  // A mode's episodes are numbered 1..n: the first one's fields are rationale-<id>, the k-th's
  // rationale-<id>-k (what the server reads); "remove" shows only when there are several.
  function numberInstances(card) {
    const instances = Array.from(card.querySelectorAll(".instance"));
    instances.forEach((node, index) => {
      const k = index + 1;
      node.dataset.instance = k;
      node.querySelector('[data-role="instance"]').value = k;
      node.querySelector('[data-role="number"]').textContent = k;
      node.querySelector("[data-remove-instance]").hidden = instances.length === 1;
      node.querySelectorAll("[name]").forEach((field) => {
        const match = field.name.match(/^([a-z]+)-(\d+)(-\d+)?$/);
        if (match && match[1] !== "instance") field.name = `${match[1]}-${match[2]}${k === 1 ? "" : "-" + k}`;
      });
    });
    card.classList.toggle("episodes", instances.length > 1);
  }

  form.addEventListener("click", (event) => {
    const add = event.target.closest("[data-add-instance]");
    const remove = event.target.closest("[data-remove-instance]");
    if (!add && !remove) return;
    event.preventDefault();
    const card = event.target.closest(".label-card");
    if (add) {
      const last = card.querySelectorAll(".instance");
      const copy = last[last.length - 1].cloneNode(true);
      copy.querySelectorAll("textarea, input[type=text]").forEach((field) => { field.value = ""; });
      copy.querySelectorAll("select").forEach((field) => { field.value = ""; });
      copy.querySelector("details").open = false;
      add.before(copy);
      numberInstances(card);
      activeInstance = copy;
      copy.querySelector('[data-role="rationale"]').focus();
    } else {
      const node = remove.closest(".instance");
      if (card.querySelectorAll(".instance").length === 1) return;
      node.remove();
      numberInstances(card);
      if (activeInstance === node) activeInstance = card.querySelector(".instance");
    }
    save();
  });

  function markImplied() {
    // A mode implies its subcategory and category: highlight them.
    form.querySelectorAll(".subcategory, .category").forEach((node) => {
      node.classList.toggle("implied", !!node.querySelector('input[name="code"]:checked'));
    });
  }

  boxes().forEach((box) => {
    showCard(box);
    box.addEventListener("change", () => {
      if (box.checked && noFailure.checked) noFailure.checked = false;
      showCard(box);
      markImplied();
      if (box.checked) {
        const rationale = document.getElementById(box.dataset.card).querySelector('[data-role="rationale"]');
        if (rationale && document.activeElement === search) rationale.focus();
      }
    });
  });
  markImplied();

  noFailure.addEventListener("change", () => {
    if (noFailure.checked) boxes().forEach((box) => { box.checked = false; showCard(box); });
    markImplied();
  });

  form.addEventListener("focusin", (event) => {
    const instance = event.target.closest(".instance");
    if (instance) activeInstance = instance;
  });

  function filter() {
    const query = search.value.trim().toLowerCase();
    form.querySelectorAll(".mode-option").forEach((li) => {
      li.hidden = query !== "" && !li.dataset.search.includes(query);
    });
    form.querySelectorAll(".subcategory, .category").forEach((node) => {
      node.hidden = query !== "" && !node.querySelector(".mode-option:not([hidden])");
    });
  }
  search.addEventListener("input", filter);
  search.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      // Enter only ever picks (never un-picks) the first match, then jumps to its rationale.
      const first = form.querySelector(".mode-option:not([hidden]) input");
      search.value = "";
      filter();
      if (first) {
        if (!first.checked) {
          first.checked = true;
          first.dispatchEvent(new Event("change", { bubbles: true }));
        }
        document.getElementById(first.dataset.card).querySelector('[data-role="rationale"]').focus();
      }
    } else if (event.key === "Escape") {
      search.value = "";
      filter();
    }
  });

  function save() { htmx.trigger(form, "change"); }

  // A save that never reached the server, or that the server failed on, is said on the page: the
  // text stays where it is, and the next change tries again.
  function saveFailed(event) {
    if (!event.detail.elt.closest || !event.detail.elt.closest("#annotation-form")) return;
    const status = document.getElementById("save-status");
    const code = event.detail.xhr ? event.detail.xhr.status : 0;
    status.className = "save-status error";
    status.textContent = code
      ? `Not saved: the server failed (${code}). What you typed is still here; keep this page open and try again.`
      : "Not saved: the server could not be reached. What you typed is still here; it is saved at your next change.";
  }
  document.addEventListener("htmx:responseError", saveFailed);
  document.addEventListener("htmx:sendError", saveFailed);

  // After a conflict (saved elsewhere), "Keep mine" saves this page over the saved version: only
  // then does the form take the saved version's number. "Take the saved one" is a plain reload.
  document.addEventListener("click", (event) => {
    const keep = event.target.closest("[data-keep-mine]");
    if (!keep) return;
    document.getElementById("version").value = keep.dataset.keepMine;
    save();
  });
  function submit() { const b = document.getElementById("submit-button"); if (b) b.click(); }

  document.addEventListener("keydown", (event) => {
    const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName);
    if ((event.key === "/" && !typing) || ((event.ctrlKey || event.metaKey) && event.key === "k")) {
      event.preventDefault();
      search.focus();
    }
    else if ((event.ctrlKey || event.metaKey) && event.key === "s") { event.preventDefault(); save(); }
    else if ((event.ctrlKey || event.metaKey) && event.key === "Enter") { event.preventDefault(); submit(); }
    else if (event.altKey && event.key === "0") {
      event.preventDefault();
      noFailure.checked = !noFailure.checked;
      noFailure.dispatchEvent(new Event("change", { bubbles: true }));
    }
  });

  // "cite" buttons on events (loaded later by htmx, hence the delegated listener).
  document.addEventListener("click", (event) => {
    const button = event.target.closest(".cite");
    if (!button) return;
    event.preventDefault();
    if (!activeInstance || !activeInstance.isConnected || activeInstance.closest(".label-card").hidden) {
      alert("Pick a failure mode (or click into its card) first; the event is cited there.");
      return;
    }
    const role = button.dataset.mode === "sequential" ? "contrast" : "evidence";
    const field = activeInstance.querySelector(`[data-role="${role}"]`);
    const lines = field.value.split("\n").map((l) => l.trim()).filter(Boolean);
    if (!lines.includes(button.dataset.anchor)) lines.push(button.dataset.anchor);
    field.value = lines.join("\n");
    field.dispatchEvent(new Event("change", { bubbles: true }));
    button.textContent = "cited";
  });
})();
