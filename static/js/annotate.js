// The annotate page: cards follow the checkboxes, episodes, ranked code search, one key per
// decision (numbers pick codes, f flag, s skip, u undo, n/p move, c cite the event under the log's
// cursor, ? lists them), the submit undo window, inline codebook guidance and "cite". Every shortcut
// is listed in the #shortcuts dialog.
(function () {
  "use strict";
  const form = document.getElementById("annotation-form");
  if (!form) return;
  const search = document.getElementById("code-search");
  const noFailure = document.getElementById("no-failure");
  const editable = !form.querySelector("fieldset[disabled]");
  const boxes = () => Array.from(form.querySelectorAll('input[name="code"]'));
  const options = () => Array.from(form.querySelectorAll(".mode-option"));
  const SUBMIT_DELAY = Number(form.dataset.submitDelay || 4);

  // The instance (episode) that "cite" adds evidence to: the one last focused.
  let activeInstance = null;

  function save() { htmx.trigger(form, "change"); }
  // The fields undo and the browser's draft keep: what is typed, chosen, and each episode's cited spans.
  const FIELDS = 'textarea, input[type=text], select, input[data-role="spans"]';

  // -- cards and episodes --------------------------------------------------------------------
  function showCard(box) {
    const card = document.getElementById(box.dataset.card) || (box.checked && newCard(box));
    if (!card) return;
    if (box.checked && !card.querySelector(".instance")) addInstance(card);
    card.hidden = !box.checked;
    box.closest(".mode-option").classList.toggle("picked", box.checked);
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

  // The page renders the cards of the modes already coded; a mode picked here gets a copy of the page's
  // blank card (#card-template: code 0), named for the mode, with its texts from the picker, placed in the
  // picker's order.
  const template = document.getElementById("card-template");
  function newCard(box) {
    const code = box.value;
    const option = box.closest(".mode-option");
    const card = template.content.querySelector(".label-card").cloneNode(true);
    card.id = box.dataset.card;
    card.dataset.code = code;
    card.querySelector('[data-role="name"]').textContent = option.querySelector('[data-g="name"]').textContent;
    const definition = option.querySelector('[data-g="definition"]')?.textContent;
    card.querySelector('[data-role="texts"]').textContent = option.dataset.path + (definition ? ` — ${definition}` : "");
    card.querySelector(".instance").remove();
    const later = boxes().slice(boxes().indexOf(box) + 1).map((b) => document.getElementById(b.dataset.card)).find(Boolean);
    form.querySelector(".cards").insertBefore(card, later || null);
    return card;
  }

  // A mode's first episode: the blank card's, its fields named for this mode, every other mode offered as the
  // nearest rejected one.
  function blankInstance(card) {
    const code = card.dataset.code;
    const copy = template.content.querySelector(".instance").cloneNode(true);
    copy.querySelectorAll("[name]").forEach((field) => { field.name = field.name.replace(/-0$/, `-${code}`); });
    copy.querySelector(`select option[value="${code}"]`)?.remove();
    return copy;
  }

  function addInstance(card) {
    const all = card.querySelectorAll(".instance");
    const copy = all.length ? all[all.length - 1].cloneNode(true) : blankInstance(card);
    copy.querySelectorAll('textarea, input[type=text], input[data-role="spans"]').forEach((field) => { field.value = ""; });
    copy.querySelectorAll("select").forEach((field) => { field.value = ""; });
    renderSpans(copy);
    copy.querySelector("details").open = false;
    card.querySelector("[data-add-instance]").before(copy);
    numberInstances(card);
    return copy;
  }

  function markImplied() {
    // A mode implies its subcategory and category: highlight them.
    form.querySelectorAll(".subcategory, .category").forEach((node) => {
      node.classList.toggle("implied", !!node.querySelector('input[name="code"]:checked'));
    });
  }

  function focusRationale(box) {
    const card = document.getElementById(box.dataset.card);
    const rationale = card && card.querySelector('[data-role="rationale"]');
    if (rationale) rationale.focus();
  }

  // "cite" goes to a mode just picked (a picked box's first episode), else to the episode last focused.
  function target(box) {
    const card = document.getElementById(box.dataset.card);
    if (box.checked && card) activeInstance = card.querySelector(".instance");
  }

  function toggle(box, checked) {
    remember();
    box.checked = checked;
    if (checked && noFailure.checked) noFailure.checked = false;
    showCard(box);
    target(box);
    markImplied();
    save();
  }

  // -- undo: the form as it was before each change --------------------------------------------
  const history = [];
  let typingSnapshotTaken = false;

  function state() {
    const values = {};
    form.querySelectorAll(FIELDS).forEach((field) => { values[field.name] = field.value; });
    const episodes = {};
    form.querySelectorAll(".label-card").forEach((card) => { episodes[card.id] = card.querySelectorAll(".instance").length; });
    const checked = {};
    form.querySelectorAll("input[type=checkbox]").forEach((box) => { checked[box.id || `${box.name}:${box.value}`] = box.checked; });
    return { values, episodes, checked };
  }

  function remember() {
    history.push(state());
    if (history.length > 100) history.shift();
  }

  function restore(snapshot) {
    form.querySelectorAll(".label-card").forEach((card) => {
      const want = snapshot.episodes[card.id] || 0;
      let have = card.querySelectorAll(".instance");
      while (have.length > want) { have[have.length - 1].remove(); have = card.querySelectorAll(".instance"); }
      while (have.length < want) { addInstance(card); have = card.querySelectorAll(".instance"); }
      numberInstances(card);
    });
    form.querySelectorAll("input[type=checkbox]").forEach((box) => {
      const key = box.id || `${box.name}:${box.value}`;
      if (key in snapshot.checked) box.checked = snapshot.checked[key];
    });
    form.querySelectorAll(FIELDS).forEach((field) => {
      if (field.name in snapshot.values) field.value = snapshot.values[field.name];
    });
    boxes().forEach(showCard);
    form.querySelectorAll(".instance").forEach(renderSpans);
    markImplied();
    showFlagNote();
  }

  function undo() {
    if (cancelSubmit()) return;
    const snapshot = history.pop();
    if (!snapshot) { say("Nothing to undo."); return; }
    restore(snapshot);
    typingSnapshotTaken = false;
    save();
    say("Undone.");
  }

  // A run of typing is one change: the state before its first keystroke is what undo goes back to.
  form.addEventListener("beforeinput", (event) => {
    if (event.target.matches("textarea, input[type=text]") && !typingSnapshotTaken) {
      remember();
      typingSnapshotTaken = true;
    }
  });
  form.addEventListener("focusout", () => { typingSnapshotTaken = false; });

  // What a key did, in the status line (keys.js, shared with the adjudication and discussion pages).
  function say(text) { window.Parallax.say(text); }

  // -- wiring the picker -----------------------------------------------------------------------
  boxes().forEach((box) => {
    showCard(box);
    box.addEventListener("click", () => {
      // the click has already changed it: remember the state before
      box.checked = !box.checked;
      remember();
      box.checked = !box.checked;
    });
    box.addEventListener("change", () => {
      if (box.checked && noFailure.checked) noFailure.checked = false;
      showCard(box);
      target(box);
      markImplied();
      if (box.checked && document.activeElement === search) focusRationale(box);
    });
  });
  markImplied();

  noFailure.addEventListener("click", () => { noFailure.checked = !noFailure.checked; remember(); noFailure.checked = !noFailure.checked; });
  noFailure.addEventListener("change", () => {
    if (noFailure.checked) boxes().forEach((box) => { box.checked = false; showCard(box); });
    markImplied();
  });

  form.addEventListener("click", (event) => {
    const add = event.target.closest("[data-add-instance]");
    const remove = event.target.closest("[data-remove-instance]");
    if (!add && !remove) return;
    event.preventDefault();
    const card = event.target.closest(".label-card");
    remember();
    if (add) {
      const copy = addInstance(card);
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

  // -- codebook guidance for the code in focus ----------------------------------------------------
  const guidance = document.getElementById("guidance");
  function guide(option) {
    if (!guidance || !option) return;
    for (const name of ["name", "path", "definition", "inclusion", "exclusion", "positive", "negative"]) {
      const value = name === "path" ? option.dataset.path : option.querySelector(`[data-g="${name}"]`)?.textContent || "";
      guidance.querySelector(`[data-g="${name}"]`).textContent = value;
      const row = guidance.querySelector(`[data-g="${name}-row"]`);
      if (row) row.hidden = !value;
    }
    guidance.hidden = false;
  }
  const optionOf = (codeId) => form.querySelector(`.mode-option input[value="${codeId}"]`)?.closest(".mode-option");
  form.addEventListener("focusin", (event) => {
    const instance = event.target.closest(".instance");
    if (instance) activeInstance = instance;
    const card = event.target.closest(".label-card");
    const option = event.target.closest(".mode-option") || (card && optionOf(card.dataset.code));
    if (option) guide(option);
  });
  form.addEventListener("mouseover", (event) => {
    const option = event.target.closest(".mode-option");
    if (option) guide(option);
  });

  // -- search: exact names first, then prefixes, then words, then anywhere, then definitions ----
  const rank = window.Parallax.rankCode;  // code-rank.js, shared with the adjudication form
  options().forEach((option) => {  // what rankCode reads: the definition in lower case
    option.dataset.definition = (option.querySelector('[data-g="definition"]')?.textContent || "").toLowerCase();
  });

  let ranked = [];  // the modes shown, best first: what Enter and the number keys act on
  function filter() {
    const query = search.value.trim().toLowerCase();
    const scored = [];
    options().forEach((li, order) => {
      const score = query === "" ? 0 : rank(li, query);
      li.hidden = score === null;
      li.classList.remove("best");
      if (score !== null) scored.push({ li, score, order });
    });
    scored.sort((a, b) => a.score - b.score || a.order - b.order);
    ranked = scored.map((s) => s.li);
    if (query !== "" && ranked[0]) ranked[0].classList.add("best");
    form.querySelectorAll(".subcategory, .category").forEach((node) => {
      node.hidden = query !== "" && !node.querySelector(".mode-option:not([hidden])");
    });
    options().forEach((li) => { li.querySelector(".hotkey").hidden = true; });
    ranked.slice(0, 9).forEach((li, index) => {
      const badge = li.querySelector(".hotkey");
      badge.textContent = String(index + 1);
      badge.hidden = false;
    });
    if (query !== "" && ranked[0]) guide(ranked[0]);
  }
  search.addEventListener("input", filter);
  filter();
  search.addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      // Enter only ever picks (never un-picks) the best match, then jumps to its rationale.
      const best = ranked.length && search.value.trim() ? ranked[0].querySelector("input") : null;
      search.value = "";
      filter();
      if (best) {
        if (!best.checked) toggle(best, true);
        focusRationale(best);
      }
    } else if (event.key === "Escape") {
      search.value = "";
      filter();
      search.blur();
    }
  });

  // -- flag, skip, submit with an undo window ---------------------------------------------------
  const flagged = document.getElementById("flagged");
  const flagNoteRow = document.getElementById("flag-note-row");
  function showFlagNote() { if (flagged && flagNoteRow) flagNoteRow.hidden = !flagged.checked; }
  if (flagged) {
    flagged.addEventListener("click", () => { flagged.checked = !flagged.checked; remember(); flagged.checked = !flagged.checked; });
    flagged.addEventListener("change", showFlagNote);
  }

  const skipPanel = document.getElementById("skip-panel");
  const skipReason = document.getElementById("skip-reason");
  function openSkip() {
    if (!skipPanel) return;
    if (history.length) save();  // what is typed stays saved; an untouched run is stored only by the skip itself
    skipPanel.hidden = false;
    skipReason.focus();
  }
  function closeSkip() { if (skipPanel) { skipPanel.hidden = true; skipReason.value = ""; } }
  document.getElementById("skip-button")?.addEventListener("click", openSkip);
  document.getElementById("skip-cancel")?.addEventListener("click", closeSkip);
  skipReason?.addEventListener("keydown", (event) => { if (event.key === "Escape") { event.preventDefault(); closeSkip(); } });

  const pending = document.getElementById("submit-pending");
  let submitTimer = null;
  let returnFocus = null;
  function refocus() {
    if (returnFocus && returnFocus.isConnected) returnFocus.focus();
    returnFocus = null;
  }
  // A refused submit (the page stays) hands the field back; an accepted one leaves the page.
  document.addEventListener("htmx:afterRequest", (event) => { if (event.detail.elt.id === "submit-now") refocus(); });
  function submitNow() {
    clearInterval(submitTimer);
    submitTimer = null;
    if (pending) pending.hidden = true;
    htmx.trigger(document.getElementById("submit-now"), "submit-now");
  }
  function submit() {
    if (!document.getElementById("submit-now")) return;
    if (submitTimer) { submitNow(); return; }  // pressed again: no need to wait
    save();
    // Out of the field: a key pressed during the countdown (u, Esc) acts; it is never typed into the coding.
    // The field gets the focus back when the submit is undone or refused.
    const focused = document.activeElement;
    if (focused && form.contains(focused) && /^(INPUT|TEXTAREA|SELECT)$/.test(focused.tagName)) {
      returnFocus = focused;
      focused.blur();
    }
    let left = SUBMIT_DELAY;
    pending.querySelector('[data-role="seconds"]').textContent = left;
    pending.hidden = false;
    submitTimer = setInterval(() => {
      left -= 1;
      pending.querySelector('[data-role="seconds"]').textContent = left;
      if (left <= 0) submitNow();
    }, 1000);
  }
  function cancelSubmit() {
    if (!submitTimer) return false;
    clearInterval(submitTimer);
    submitTimer = null;
    pending.hidden = true;
    say("Not submitted.");
    refocus();
    return true;
  }
  document.getElementById("submit-button")?.addEventListener("click", submit);
  document.getElementById("undo-submit")?.addEventListener("click", cancelSubmit);

  // A save that never reached the server, or that the server failed on, is said on the page: the
  // text stays where it is, and the next change tries again.
  function saveFailed(event) {
    if (!event.detail.elt.closest || !event.detail.elt.closest("#annotation-form, #submit-now, #skip-form")) return;
    const status = document.getElementById("save-status");
    const code = event.detail.xhr ? event.detail.xhr.status : 0;
    status.className = "save-status error";
    if (code === 401 || code === 403) {
      // The session ended (401), or this page's token is stale after a login elsewhere (403): the draft
      // is in this browser (keepDraft) and is restored and saved once the page is opened logged in.
      cancelSubmit();
      status.textContent = "Not saved: your session has ended. What you typed is kept in this browser; log in again and it is saved.";
      document.getElementById("session-expired").hidden = false;
      return;
    }
    status.textContent = code
      ? `Not saved: the server failed (${code}). What you typed is still here; keep this page open and try again.`
      : "Not saved: the server could not be reached. What you typed is still here; it is saved at your next change.";
  }
  document.addEventListener("htmx:responseError", saveFailed);
  document.addEventListener("htmx:sendError", saveFailed);

  // -- the draft in this browser: nothing typed is lost when the session ends ------------------------
  // Every change is kept in localStorage under this user and assignment; a save the server took (200)
  // drops it if nothing changed since it was sent. Opening the page with a draft left (the session had
  // ended, the tab was closed before the save) puts the draft back into the form and saves it.
  const draftKey = form.dataset.draftKey;
  const storage = (() => { try { return window.localStorage; } catch (e) { return null; } })();
  // The draft remembers the version it was based on: restored, it saves as that version, so that a
  // coding saved elsewhere in between is a conflict to choose from, never silently overwritten.
  const draftOf = () => JSON.stringify({ form: state(), version: document.getElementById("version").value });
  let sent = null;
  function keepDraft() {
    if (storage && editable) try { storage.setItem(draftKey, draftOf()); } catch (e) { /* storage full */ }
  }
  function dropDraft() { if (storage) storage.removeItem(draftKey); }
  if (editable) {
    form.addEventListener("input", keepDraft);
    form.addEventListener("change", keepDraft);
  }
  document.addEventListener("htmx:beforeRequest", (event) => { if (event.detail.elt === form) sent = draftOf(); });
  document.addEventListener("htmx:afterRequest", (event) => {
    if (event.detail.elt !== form || !storage || !event.detail.xhr || event.detail.xhr.status !== 200) return;
    if (storage.getItem(draftKey) === sent) dropDraft();
  });
  // "Take the saved one" after a conflict: what this page had is given up.
  document.addEventListener("click", (event) => { if (event.target.closest("[data-take-saved]")) dropDraft(); });
  function restoreDraft() {
    if (!storage) return;
    let kept;
    try { kept = JSON.parse(storage.getItem(draftKey)); } catch (e) { kept = null; }
    if (!kept || !kept.form) { dropDraft(); return; }
    // submitted or locked since, or nothing new in it: the server's is the coding
    if (!editable || JSON.stringify(kept.form) === JSON.stringify(state())) { dropDraft(); return; }
    remember();  // u goes back to what the server had
    boxes().forEach((box) => {
      const key = box.id || `${box.name}:${box.value}`;
      if (key in kept.form.checked) { box.checked = kept.form.checked[key]; showCard(box); }
    });
    restore(kept.form);
    document.getElementById("version").value = kept.version;
    save();
    say("Restored what you typed before the session ended; it is being saved.");
  }

  // After a conflict (saved elsewhere), "Keep mine" saves this page over the saved version: only
  // then does the form take the saved version's number. "Take the saved one" is a plain reload.
  document.addEventListener("click", (event) => {
    const keep = event.target.closest("[data-keep-mine]");
    if (!keep) return;
    document.getElementById("version").value = keep.dataset.keepMine;
    save();
  });

  // -- the picker folds away, leaving the pair the width; any picker key brings it back -----------
  const layout = document.getElementById("annotate-layout");
  const pickerToggle = document.getElementById("picker-toggle");
  // On a narrow screen the picker is a sheet over the pair (CSS), folded unless the annotator opened it.
  const narrow = window.matchMedia("(max-width: 700px)");
  const foldKey = () => (narrow.matches ? "parallax.sheetOpen" : "parallax.codesHidden");
  function foldPicker(folded, remembered = true) {
    const changed = layout.classList.contains("codes-hidden") !== folded;
    layout.classList.toggle("codes-hidden", folded);
    pickerToggle.firstChild.textContent = folded ? (narrow.matches ? "codes and coding ▲ " : "codes ") : (narrow.matches ? "hide the codes ▼ " : "hide the codes ");
    if (changed && !folded && narrow.matches) form.scrollTop = 0;
    if (!remembered) return;
    try { localStorage.setItem(foldKey(), folded === narrow.matches ? "" : "1"); } catch (e) { /* private mode */ }
  }
  function foldAsRemembered() {
    let flipped = false;
    try { flipped = localStorage.getItem(foldKey()) === "1"; } catch (e) { /* private mode */ }
    foldPicker(narrow.matches ? !flipped : flipped, false);
  }
  pickerToggle.addEventListener("click", () => foldPicker(!layout.classList.contains("codes-hidden")));
  narrow.addEventListener("change", foldAsRemembered);
  foldAsRemembered();

  // -- the keys -----------------------------------------------------------------------------------
  const shortcuts = document.getElementById("shortcuts");
  document.getElementById("show-shortcuts")?.addEventListener("click", () => shortcuts.showModal());
  // Leave for another run only once every save of this page has gone out (a change queued behind a
  // save in flight would otherwise never be sent); at most a few seconds.
  function follow(id) {
    const link = document.getElementById(id);
    if (!link) return;
    if (editable && history.length) save();  // only a changed page: opening and leaving a run writes nothing
    let waited = 0;
    const go = () => {
      if (form.classList.contains("htmx-request") && waited < 5000) { waited += 100; setTimeout(go, 100); }
      else window.location.href = link.href;
    };
    setTimeout(go, 100);
  }

  document.addEventListener("keydown", (event) => {
    const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement.tagName) || document.activeElement.isContentEditable;
    const mod = event.ctrlKey || event.metaKey;
    if (mod && event.key === "k") { event.preventDefault(); search.focus(); return; }
    if (mod && event.key === "s") { event.preventDefault(); save(); return; }
    if (mod && event.key === "Enter") { event.preventDefault(); if (editable) submit(); return; }
    if (event.altKey && event.key === "0") { event.preventDefault(); if (editable) toggleNoFailure(); return; }
    if (submitTimer && (event.key === "Escape" || event.key === "u")) { event.preventDefault(); cancelSubmit(); return; }
    // Tab from a selection in an event's text goes to its "Cite selection" control (Enter cites).
    if (event.key === "Tab" && !event.shiftKey && !citeButton.hidden && document.activeElement !== citeButton) {
      event.preventDefault();
      citeButton.focus();
      return;
    }
    if (event.key === "Escape") {
      if (typing && document.activeElement !== search) document.activeElement.blur();
      return;
    }
    if (typing || mod || event.altKey || shortcuts.open) return;
    const key = event.key;
    if (key === "[") { event.preventDefault(); foldPicker(!layout.classList.contains("codes-hidden")); return; }
    if (/^[0-9\/fsu]$/.test(key)) foldPicker(false);
    if (/^[jkJKor]$/.test(key) && narrow.matches) foldPicker(true);  // the sheet makes way for the log's cursor
    if (key === "?") { event.preventDefault(); shortcuts.showModal(); }
    else if (key === "/") { event.preventDefault(); search.focus(); }
    else if (key === "n") { event.preventDefault(); follow("next-item"); }
    else if (key === "p") { event.preventDefault(); follow("previous-item"); }
    else if (!editable) return;
    else if (/^[1-9]$/.test(key)) {
      const option = ranked[Number(key) - 1];
      if (!option) return;
      event.preventDefault();
      const box = option.querySelector("input");
      toggle(box, !box.checked);
      guide(option);
      if (box.checked) focusRationale(box);  // write why at once; Esc leaves the field for the next key
    } else if (key === "0") { event.preventDefault(); toggleNoFailure(); }
    else if (key === "u") { event.preventDefault(); undo(); }
    else if (key === "f" && flagged) {
      event.preventDefault();
      remember();
      flagged.checked = !flagged.checked;
      showFlagNote();
      save();
      if (flagged.checked) document.getElementById("flag-note").focus();
    } else if (key === "s") { event.preventDefault(); openSkip(); }
    else if (key === "c") { event.preventDefault(); if (!citeSelection()) citeFocused(); }
  });

  // c: the event under the log's cursor (pair.js: j / k / J / K / o / r) is cited into the episode last
  // edited, as its "cite" button does.
  function citeFocused() {
    const here = window.Parallax.log && window.Parallax.log.current();
    const button = here && here.matches("li.event") ? here.querySelector(".cite") : null;
    if (!button) { say(here ? "Only an event can be cited: j / k move to one, o opens an agent." : "Move to an event first: j / k, o opens an agent."); return; }
    button.click();
  }

  function toggleNoFailure() {
    remember();
    noFailure.checked = !noFailure.checked;
    noFailure.dispatchEvent(new Event("change", { bubbles: true }));
  }

  // "open the cited line": the anchor on the line of the field where the cursor is (else its first),
  // opened in a new tab: the file at that line, or for a log the events read from it.
  form.addEventListener("click", (event) => {
    const button = event.target.closest("[data-jump]");
    if (!button) return;
    const field = button.closest(".instance").querySelector(`[data-role="${button.dataset.jump}"]`);
    const upto = field.value.slice(0, field.selectionStart || 0);
    const lines = field.value.split("\n");
    const anchor = (lines[upto.split("\n").length - 1] || "").trim() || lines.map((l) => l.trim()).find(Boolean);
    if (!anchor) { say("No anchor to open: type file:line, or cite an event."); return; }
    const side = button.dataset.jump === "contrast" ? "&side=contrast" : "";
    window.open(`${form.dataset.anchorUrl}?a=${encodeURIComponent(anchor)}${side}`, "_blank", "noopener");
  });

  // -- a span of an event's text: select it, then c or "Cite selection" ---------------------------
  // The span keeps the characters, as Label Studio's span highlighting does: the event (its anchor,
  // agent and number), the offsets of the selection in the event's text (code points, as the server
  // counts them) and the quoted text. The server checks that the quote is those characters.
  const codePoints = (text) => Array.from(text).length;
  const eventText = (node) => node && (node.nodeType === 1 ? node : node.parentElement)?.closest("#pair pre.event-text");
  function selectedSpan() {
    const selection = window.getSelection();
    if (!selection || selection.isCollapsed || !selection.rangeCount) return null;
    const range = selection.getRangeAt(0).cloneRange();
    const pre = eventText(range.startContainer) || eventText(range.endContainer);
    if (!pre) return null;
    // a selection running past the event's text (a triple click) is cut at its ends
    const whole = document.createRange();
    whole.selectNodeContents(pre);
    if (range.compareBoundaryPoints(Range.START_TO_START, whole) < 0) range.setStart(whole.startContainer, whole.startOffset);
    if (range.compareBoundaryPoints(Range.END_TO_END, whole) > 0) range.setEnd(whole.endContainer, whole.endOffset);
    const quote = range.toString();
    const item = pre.closest("li.event");
    const cite = item && item.querySelector(":scope > .event-head .cite");
    if (!quote || !cite) return null;
    const before = document.createRange();
    before.setStart(whole.startContainer, whole.startOffset);
    before.setEnd(range.startContainer, range.startOffset);
    const start = codePoints(before.toString());
    return {
      span: {
        field: cite.dataset.mode === "sequential" ? "contrast" : "evidence", anchor: cite.dataset.anchor,
        agent: item.dataset.agent, seq: Number(item.dataset.seq), start, end: start + codePoints(quote), quote,
      },
      range, item,
    };
  }

  // The coding's cited spans, highlighted where they are in the log once their events are loaded (CSS Custom
  // Highlight API: the event's text is not changed, so offsets stay the event's).
  // (Looked up on each call, not kept in a constant: an episode added while the page starts lists its spans.)
  function highlightSpans() {
    if (!window.Highlight || !window.CSS || !CSS.highlights) return;
    if (!CSS.highlights.has("cited-span")) CSS.highlights.set("cited-span", new Highlight());
    const citedHighlight = CSS.highlights.get("cited-span");
    citedHighlight.clear();
    form.querySelectorAll('.label-card:not([hidden]) [data-role="spans"]').forEach((holder) => {
      readSpans(holder).forEach((span) => {
        const side = span.field === "contrast" ? "sequential" : "concurrent";
        const item = Array.from(document.querySelectorAll(`#pair section.side.${side} li.event[data-seq="${Number(span.seq)}"]`))
          .find((li) => li.dataset.agent === span.agent);
        const node = item && item.querySelector("pre.event-text")?.firstChild;
        if (!node || node.nodeType !== Node.TEXT_NODE) return;
        const chars = Array.from(node.data);  // code points → the text node's UTF-16 offsets
        if (span.end > chars.length) return;
        const range = document.createRange();
        range.setStart(node, chars.slice(0, span.start).join("").length);
        range.setEnd(node, chars.slice(0, span.end).join("").length);
        citedHighlight.add(range);
      });
    });
  }
  document.addEventListener("htmx:afterSwap", highlightSpans);

  function citeSelection() {
    const selected = selectedSpan();
    if (!selected) return false;
    hideCiteButton();
    if (!activeInstance || !activeInstance.isConnected || activeInstance.closest(".label-card").hidden) {
      say("Pick a failure mode (or click into its card) first; the selection is cited there.");
      return true;
    }
    const { span } = selected;
    const holder = activeInstance.querySelector('[data-role="spans"]');
    const spans = readSpans(holder);
    const same = (s) => s.field === span.field && s.agent === span.agent && s.seq === span.seq && s.start === span.start && s.end === span.end;
    remember();
    if (!spans.some(same)) spans.push(span);
    holder.value = JSON.stringify(spans);
    const field = activeInstance.querySelector(`[data-role="${span.field}"]`);
    const lines = field.value.split("\n").map((l) => l.trim()).filter(Boolean);
    if (!lines.includes(span.anchor)) lines.push(span.anchor);
    field.value = lines.join("\n");
    renderSpans(activeInstance);
    field.dispatchEvent(new Event("change", { bubbles: true }));
    highlightSpans();
    window.getSelection().removeAllRanges();
    const shown = span.quote.length > 60 ? `${span.quote.slice(0, 60)}…` : span.quote;
    say(`Cited “${shown}” (characters ${span.start}–${span.end} of event #${span.seq}) as ${span.field}.`);
    return true;
  }

  // "Cite selection": shown beside a selection inside an event's text, placed after that text in the page's
  // order so that Tab reaches it from the selection.
  const citeButton = document.createElement("button");
  citeButton.type = "button";
  citeButton.id = "cite-selection";
  citeButton.className = "cite-selection";
  citeButton.innerHTML = "Cite selection <kbd>c</kbd>";
  citeButton.hidden = true;
  citeButton.addEventListener("mousedown", (event) => event.preventDefault());  // keep the selection
  citeButton.addEventListener("click", (event) => { event.preventDefault(); citeSelection(); });
  function hideCiteButton() { citeButton.hidden = true; }
  function placeCiteButton() {
    if (!editable) return;
    const selected = selectedSpan();
    if (!selected) { if (document.activeElement !== citeButton) hideCiteButton(); return; }
    const pre = selected.range.startContainer.nodeType === 1 ? selected.range.startContainer : selected.range.startContainer.parentElement;
    const text = pre.closest("pre.event-text");
    if (citeButton.previousElementSibling !== text) text.after(citeButton);
    const rects = selected.range.getClientRects();
    const rect = rects.length ? rects[rects.length - 1] : selected.range.getBoundingClientRect();
    citeButton.hidden = false;
    const width = citeButton.offsetWidth || 130;
    citeButton.style.left = `${Math.max(4, Math.min(rect.right - width / 2, window.innerWidth - width - 4))}px`;
    citeButton.style.top = `${Math.min(rect.bottom + 6, window.innerHeight - 40)}px`;
  }
  document.addEventListener("selectionchange", placeCiteButton);
  document.addEventListener("scroll", () => { if (!citeButton.hidden) placeCiteButton(); }, { capture: true, passive: true });

  // Each episode's cited spans, listed under its anchors: the quote, where it is, a link that opens the event
  // with the span highlighted, and "remove".
  function readSpans(holder) {
    try { const spans = JSON.parse(holder.value || "[]"); return Array.isArray(spans) ? spans : []; } catch (e) { return []; }
  }
  function renderSpans(instance) {
    const holder = instance.querySelector('[data-role="spans"]');
    const box = instance.querySelector('[data-role="span-list"]');
    if (!holder || !box) return;
    const list = box.querySelector("ul");
    list.replaceChildren();
    readSpans(holder).forEach((span, index) => {
      const li = document.createElement("li");
      const quote = document.createElement("q");
      quote.textContent = span.quote.length > 160 ? `${span.quote.slice(0, 160)}…` : span.quote;
      const where = document.createElement("span");
      where.className = "muted";
      where.textContent = ` ${span.field} · ${span.agent} #${span.seq} · characters ${span.start}–${span.end} · `;
      const open = document.createElement("a");
      const side = span.field === "contrast" ? "&side=contrast" : "";
      open.href = `${form.dataset.anchorUrl}?a=${encodeURIComponent(span.anchor)}${side}&mark=${encodeURIComponent(`${span.agent}:${span.seq}:${span.start}:${span.end}`)}`;
      open.target = "_blank";
      open.rel = "noopener";
      open.textContent = "open ↗";
      const remove = document.createElement("button");
      remove.type = "button";
      remove.className = "linklike";
      remove.dataset.removeSpan = index;
      remove.textContent = "remove";
      li.append(quote, where, open, " · ", remove);
      list.append(li);
    });
    box.hidden = !list.children.length;
    highlightSpans();
  }
  form.querySelectorAll(".instance").forEach(renderSpans);
  form.addEventListener("click", (event) => {
    const remove = event.target.closest("[data-remove-span]");
    if (!remove) return;
    event.preventDefault();
    const instance = remove.closest(".instance");
    const holder = instance.querySelector('[data-role="spans"]');
    const spans = readSpans(holder);
    remember();
    spans.splice(Number(remove.dataset.removeSpan), 1);
    holder.value = spans.length ? JSON.stringify(spans) : "";
    renderSpans(instance);
    save();
  });

  // "cite" buttons on events (loaded later by htmx, hence the delegated listener).
  document.addEventListener("click", (event) => {
    const button = event.target.closest(".cite");
    if (!button) return;
    event.preventDefault();
    if (!activeInstance || !activeInstance.isConnected || activeInstance.closest(".label-card").hidden) {
      say("Pick a failure mode (or click into its card) first; the event is cited there.");
      return;
    }
    remember();
    const role = button.dataset.mode === "sequential" ? "contrast" : "evidence";
    const field = activeInstance.querySelector(`[data-role="${role}"]`);
    const lines = field.value.split("\n").map((l) => l.trim()).filter(Boolean);
    if (!lines.includes(button.dataset.anchor)) lines.push(button.dataset.anchor);
    field.value = lines.join("\n");
    field.dispatchEvent(new Event("change", { bubbles: true }));
    button.textContent = "cited";
  });
  // After htmx has bound the form's save: it does so on DOMContentLoaded, which fires after every
  // deferred script (this one too) and runs htmx's listener first.
  if (document.readyState === "complete") restoreDraft();
  else document.addEventListener("DOMContentLoaded", restoreDraft);
})();
