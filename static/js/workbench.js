// Keyboard-first labeling. Listeners sit on the document, so they keep working after
// htmx swaps in the next comparison. No inline script anywhere: the CSP forbids it.
//
// Keys (the help dialog lists them): 1-5 scale; Enter activates the focused control (a button,
// a fold, a link) and submits when the focus is on none (or on the verdict's radios and box);
// Ctrl/Cmd+Enter submits from anywhere; g the rating menus (digits rate, Enter the next menu);
// b both bad, r rationale, s skip, x correct a side, ←/→ or h/l the side the step keys work on (the side shown on a phone),
// [ / ] or k / j move the step cursor, w marks the cursor's step as the first wrong one,
// Esc clears that side's mark, d first difference, o observations, c identical runs,
// a alignment (what is typed is kept), p revise the previous judgement, ? help.
(function () {
  "use strict";
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));
  const FORM = "#judgement-form";

  // Fields where keys are text: the rationale and any text input.
  function isText(el) {
    return el && (el.tagName === "TEXTAREA" ||
      (el.tagName === "INPUT" && !["radio", "checkbox", "button", "submit", "hidden"].includes(el.type)));
  }
  // Controls Enter activates (their own action, never the submit): buttons, folds, links.
  function isControl(el) {
    return el && el.closest && Boolean(el.closest("a[href], button, summary, [role=button], input[type=button], input[type=submit]"));
  }
  function ratingMenus() { return $$(`${FORM} table.ratings select`); }

  function openHelp() { const d = $("#help"); if (d && !d.open) d.showModal(); }
  function openSkip(reason) {
    const f = $("#skip-form"); if (!f) return;
    f.hidden = false;
    const select = $("select", f);
    if (reason) select.value = reason;
    select.focus();
    f.scrollIntoView({ block: "nearest" });
  }
  function skipOpen() { const f = $("#skip-form"); return f && !f.hidden; }

  // The correction form (x): the side the step keys are on, from its marked first wrong step if any.
  const FIX = "#correction-form";
  function showCalls() {
    const f = $(FIX); if (!f) return;
    const calls = $(".correction-calls", f), kind = $("input[name=kind]:checked", f);
    if (calls) calls.hidden = !kind || kind.value !== "tool_call";
  }
  // The commonest fix starts from what the agent answered: the side's answer fills the answer
  // field, unless the person has typed their own there.
  function prefillAnswer() {
    const f = $(FIX); if (!f) return;
    const checked = $("input[name=side]:checked", f), area = $("textarea[name=answer]", f);
    if (!checked || !area) return;
    const original = checked.value === "left" ? f.dataset.answerLeft : f.dataset.answerRight;
    if (original === undefined) return;
    if (!area.value.trim() || area.value === area.dataset.prefilled) {
      area.value = original;
      area.dataset.prefilled = original;
    }
  }
  // Where a correction may start on each side, by step: the original call (prefilled) or the
  // answer (calls typed there go before it). From the form's data-correction-steps (JSON).
  function correctionStarts() {
    const f = $(FIX);
    try { return f && f.dataset.correctionSteps ? JSON.parse(f.dataset.correctionSteps) : {}; } catch (e) { return {}; }
  }
  function startAt(f) {
    const checked = $("input[name=side]:checked", f), step = $("input[name=step]", f);
    const starts = checked ? correctionStarts()[checked.value] || {} : {};
    return step ? starts[step.value.trim()] : undefined;
  }
  // The first call row starts as the call it replaces, unless the person has typed their own;
  // at the answer it starts empty and the note says the calls go before the answer.
  function prefillCall() {
    const f = $(FIX); if (!f) return;
    const start = startAt(f), row = $(".correction-call", f), note = $("[data-start-note]", f);
    if (note) {
      note.textContent = !start ? "" : start.kind === "answer"
        ? "This is the answer: your calls go before it, then the final answer below."
        : `This is a call to ${start.tool}: your calls replace it and what followed.`;
    }
    if (!row) return;
    const tool = $("input[name=tool]", row), args = $("textarea[name=arguments]", row);
    const untouched = [tool, args].every(el => !el.value.trim() || el.value === el.dataset.prefilled);
    if (!untouched) return;
    const values = start && start.kind === "action"
      ? [start.tool || "", JSON.stringify(start.arguments || {})] : ["", ""];
    [tool, args].forEach(function (el, i) { el.value = values[i]; el.dataset.prefilled = values[i]; });
  }
  function openCorrection() {
    const f = $(FIX); if (!f) return;
    const s = side(), marked = markedIndex(s);
    const sideRadio = $(`input[name=side][value="${s}"]`, f);
    if (sideRadio) sideRadio.checked = true;
    prefillAnswer();
    if (marked !== null) {
      $("input[name=step]", f).value = marked;
      // A wrong call: replace it. A wrong answer: fix the answer (or switch to calls, which go before it).
      const start = startAt(f);
      const kind = start && start.kind === "action" ? "tool_call" : "answer";
      $(`input[name=kind][value=${kind}]`, f).checked = true;
    }
    prefillCall();
    f.hidden = false;
    showCalls();
    const first = $("input[name=kind]:checked", f);
    if (first) first.focus();
    f.scrollIntoView({ block: "nearest" });
  }
  function correctionOpen() { const f = $(FIX); return f && !f.hidden; }
  function closeCorrection() { const f = $(FIX); if (f) { f.hidden = true; document.activeElement.blur(); } }
  function addCall() {
    const rows = $$(`${FIX} .correction-call`); if (!rows.length) return;
    const row = rows[rows.length - 1].cloneNode(true);
    $$("input, textarea", row).forEach(field => { field.value = ""; });
    rows[rows.length - 1].after(row);
    $("input[name=tool]", row).focus();
  }
  function closeSkip() { const f = $("#skip-form"); if (f) { f.hidden = true; document.activeElement.blur(); } }
  function submitJudgement() {
    const f = $(FORM);
    if (!f) return;
    // htmx wires swapped-in content after its settle delay: a key pressed in that moment
    // would post the form natively (a full page load). Wire it now; it is idempotent.
    if (window.htmx) window.htmx.process(f);
    f.requestSubmit();
  }

  // --- Sides, the step cursor and first-wrong marks -------------------------------------------

  function side() { const wb = $("#workbench"); return (wb && wb.dataset.side) || "left"; }
  function stepsOf(s) { return $$(`${FORM} .step[data-side="${s}"][data-index]`); }
  function cursorStep() { return $(`${FORM} .step.cursor`); }

  function markedIndex(s) {
    const radio = $(`${FORM} input[name=first_wrong_${s}]:checked`);
    return radio && radio.value !== "" ? radio.value : null;
  }

  function showStatus() {
    ["left", "right"].forEach(function (s) {
      const b = $(`#verdict-bar b[data-mark="${s}"]`);
      if (b) b.textContent = markedIndex(s) === null ? "–" : markedIndex(s);
    });
    const status = $("#step-status"); if (!status) return;
    const cursor = cursorStep();
    const where = $("[data-cursor]", status);
    if (where) where.textContent = cursor ? `Cursor: ${cursor.dataset.side} step ${cursor.dataset.index} · ` : "";
    hint("");
  }
  function hint(text) { const el = $("#step-status [data-hint]"); if (el) el.textContent = text; }

  function moveCursor(step) {
    $$(`${FORM} .step.cursor`).forEach(function (el) { el.classList.remove("cursor"); });
    if (!step) { showStatus(); return; }
    const fold = step.closest("details.same-run");
    if (fold) fold.open = true;
    step.classList.add("cursor");
    step.scrollIntoView({ block: "nearest" });
    showStatus();
  }

  // The step of side `s` in the row of `from`, else the nearest row below, else above.
  function stepNear(from, s) {
    const rows = $$(`${FORM} .pair-row`);
    const at = rows.indexOf(from.closest(".pair-row"));
    for (let k = at; k >= 0 && k < rows.length; k++) {
      const step = $(`.step[data-side="${s}"][data-index]`, rows[k]);
      if (step) return step;
    }
    for (let k = at - 1; k >= 0; k--) {
      const step = $(`.step[data-side="${s}"][data-index]`, rows[k]);
      if (step) return step;
    }
    return null;
  }

  function setSide(s) {
    const wb = $("#workbench");
    if (!wb || !$(FORM)) return;
    wb.dataset.side = s;
    $$("[data-side-tab]").forEach(function (tab) {
      tab.setAttribute("aria-pressed", String(tab.dataset.sideTab === s));
    });
    const cursor = cursorStep();
    if (cursor && cursor.dataset.side !== s) moveCursor(stepNear(cursor, s));
    showStatus();
  }

  function stepBy(delta) {
    const steps = stepsOf(side());
    if (!steps.length) return;
    const cursor = cursorStep();
    let i = cursor ? steps.indexOf(cursor) : -1;
    i = i < 0 ? (delta > 0 ? 0 : steps.length - 1) : Math.min(steps.length - 1, Math.max(0, i + delta));
    moveCursor(steps[i]);
  }

  function mark(s, value) {
    const radio = $(`${FORM} input[name=first_wrong_${s}][value="${value}"]`);
    if (!radio) return;
    radio.checked = true;
    radio.dispatchEvent(new Event("change", { bubbles: true }));
  }

  function markCursor() {
    const cursor = cursorStep();
    if (!cursor) { hint("No step under the cursor: press ] to move to a step first, then w."); return; }
    mark(cursor.dataset.side, cursor.dataset.index);
  }

  // --- Reading long trajectories ---------------------------------------------------------------

  function jumpToDifference() {
    const marker = $("#first-difference");
    if (!marker) return;
    const fold = marker.closest("details.same-run");
    if (fold) fold.open = true;
    const row = marker.nextElementSibling;
    if (row) moveCursor(stepNear(row, side()));
    marker.scrollIntoView({ block: "start" });
  }

  function toggleAll(selector, button, openText, closeText) {
    const all = $$(selector);
    if (!all.length) return;
    const open = all.some(function (d) { return !d.open; });
    all.forEach(function (d) { d.open = open; });
    if (button) button.firstChild.textContent = (open ? closeText : openText) + " ";
  }
  function toggleObservations() {
    toggleAll(`${FORM} .step details`, $("[data-toggle-observations]"), "Expand observations", "Collapse observations");
  }
  function toggleFolds() {
    toggleAll(`${FORM} details.same-run`, $("[data-toggle-folds]"), "Show identical steps", "Fold identical steps");
  }
  function toggleAlign() { const link = $("[data-align-toggle]"); if (link) link.click(); }

  // --- Keys ------------------------------------------------------------------------------------

  document.addEventListener("keydown", function (ev) {
    if (ev.defaultPrevented || ev.isComposing) return;
    const help = $("#help");
    if (help && help.open) return;  // the dialog handles Esc itself
    const t = ev.target;
    const skip = $("#skip-form");
    if (skip && !skip.hidden && skip.contains(t)) {
      if (ev.key === "Escape") { ev.preventDefault(); closeSkip(); }
      else if (ev.key === "Enter") { ev.preventDefault(); skip.requestSubmit(); }
      return;
    }
    const mod = ev.ctrlKey || ev.metaKey;
    const fix = $(FIX);
    if (fix && !fix.hidden && fix.contains(t)) {  // the correction form's keys are its own
      if (ev.key === "Escape" && !isText(t)) { ev.preventDefault(); closeCorrection(); }
      else if (ev.key === "Escape") t.blur();
      else if (ev.key === "Enter" && mod) { ev.preventDefault(); fix.requestSubmit(); }
      return;
    }
    const form = $(FORM);
    if (ev.key === "Enter" && mod && !ev.altKey) {  // Ctrl/Cmd+Enter: submit, wherever the focus is
      if (form) { ev.preventDefault(); submitJudgement(); }
      return;
    }
    if (isText(t)) {
      if (ev.key === "Escape") { t.blur(); }
      return;
    }
    if (ev.altKey || mod) return;  // browser shortcuts stay the browser's
    if (t.tagName === "SELECT") {  // a rating menu: digits and arrows choose the rating
      if (ev.key === "Escape") t.blur();
      else if (ev.key === "Enter") {  // on to the next menu; after the last one, focus on nothing
        ev.preventDefault();
        const menus = ratingMenus(), next = menus[menus.indexOf(t) + 1];
        if (next) next.focus(); else t.blur();
      }
      return;
    }
    if (ev.key === "Enter") {
      // Enter activates a focused button, fold or link (the browser does it); elsewhere it submits.
      if (!form || isControl(t)) return;
      ev.preventDefault(); submitJudgement(); return;
    }
    if (ev.key === "?") { ev.preventDefault(); openHelp(); return; }
    if (ev.key === "p" && $("[data-revise-last]")) { ev.preventDefault(); $("[data-revise-last]").click(); return; }
    if (!form) return;
    const radio = t.tagName === "INPUT" && t.type === "radio";
    let handled = true;
    if (/^[1-5]$/.test(ev.key)) {
      const point = $(`${FORM} input[name=choice][value="${ev.key}"]`);
      if (point) point.checked = true;
    } else if (ev.key === "s") openSkip();
    else if (ev.key === "x") openCorrection();
    else if (ev.key === "b") { const box = $(`${FORM} input[name=both_bad]`); if (box) box.checked = !box.checked; }
    else if (ev.key === "r") { const area = $(`${FORM} textarea[name=rationale]`); if (area) area.focus(); }
    else if (ev.key === "g") { const menu = ratingMenus()[0]; if (menu) { menu.focus(); menu.scrollIntoView({ block: "nearest" }); } }
    else if (ev.key === "h" || (ev.key === "ArrowLeft" && !radio)) setSide("left");
    else if (ev.key === "l" || (ev.key === "ArrowRight" && !radio)) setSide("right");
    else if (ev.key === "]" || ev.key === "j") stepBy(1);
    else if (ev.key === "[" || ev.key === "k") stepBy(-1);
    else if (ev.key === "w") markCursor();
    else if (ev.key === "Escape") {
      if (skipOpen()) closeSkip(); else if (correctionOpen()) closeCorrection(); else mark(side(), "");
    }
    else if (ev.key === "d") jumpToDifference();
    else if (ev.key === "o") toggleObservations();
    else if (ev.key === "c") toggleFolds();
    else if (ev.key === "a") toggleAlign();
    else handled = false;
    if (handled) ev.preventDefault();
  });

  // --- Clicks ----------------------------------------------------------------------------------

  document.addEventListener("click", function (ev) {
    const t = ev.target;
    // A pointer click leaves no focus on a tool button or a fold, so Enter still submits after it;
    // a keyboard user's focus (their Enter or Space is a click with detail 0) stays where it was.
    if (ev.detail > 0) {
      const control = t.closest(`${FORM} button[type=button], ${FORM} summary`);
      if (control) control.blur();
    }
    if (t.closest("[data-open-help]")) { openHelp(); return; }
    const skipper = t.closest("[data-open-skip]");
    if (skipper) { openSkip(skipper.dataset.reason); return; }
    if (t.closest("[data-close-skip]")) { closeSkip(); return; }
    if (t.closest("[data-open-correction]")) { openCorrection(); return; }
    if (t.closest("[data-close-correction]")) { closeCorrection(); return; }
    if (t.closest("[data-add-call]")) { addCall(); return; }
    const tab = t.closest("[data-side-tab]");
    if (tab) { setSide(tab.dataset.sideTab); return; }
    if (t.closest("[data-jump-diff]")) { jumpToDifference(); return; }
    if (t.closest("[data-toggle-observations]")) { toggleObservations(); return; }
    if (t.closest("[data-toggle-folds]")) { toggleFolds(); return; }
    // Clicking a step marks it as the first wrong step on its side; clicking it again clears the mark.
    const step = t.closest(`${FORM} .step[data-index]`);
    if (!step || t.closest("summary, details pre, label.wrong-mark")) return;
    const s = step.dataset.side;
    if (side() !== s) setSide(s);
    moveCursor(step);
    mark(s, markedIndex(s) === step.dataset.index ? "" : step.dataset.index);
  });

  document.addEventListener("input", function (ev) {
    if (ev.target.name === "step" && ev.target.closest && ev.target.closest(FIX)) prefillCall();
  });

  // Keep the marked step visible as marked, and the status line current.
  document.addEventListener("change", function (ev) {
    if (ev.target.name === "kind" && ev.target.closest(FIX)) { showCalls(); return; }
    if (ev.target.name === "side" && ev.target.closest(FIX)) { prefillAnswer(); prefillCall(); return; }
    if (ev.target.name === "step" && ev.target.closest(FIX)) { prefillCall(); return; }
    if (!ev.target.name || !ev.target.name.startsWith("first_wrong_")) return;
    const s = ev.target.name.slice("first_wrong_".length);
    $$(`${FORM} .step[data-side="${s}"]`).forEach(function (el) {
      el.classList.toggle("marked-wrong", el.dataset.index === ev.target.value);
    });
    showStatus();
  });

  // A judgement in progress is kept on the server (annotate/services/drafts.py) under its
  // assignment: saved a moment after each change to the verdict form, and brought back whenever
  // a page shows that comparison again (a reload, the alignment toggle, another tab, browser or
  // device), until it is submitted, skipped or its lease expires. A copy in this browser
  // (localStorage) covers a change the server has not acknowledged yet (offline, a page closed
  // mid-save); it is read and removed only for its own assignment, never another's, and copies
  // older than any lease (14 days) are dropped.
  const DRAFT = "arbiter-draft-";
  const POSTED = "arbiter-posted";
  const SAVE_AFTER_MS = 400, RETRY_MS = 5000, LOCAL_DAYS = 14;
  let pending = null;  // {id, fields}: typed here, not yet acknowledged by the server
  let saveTimer = null, applying = false;
  const typed = {};  // assignment id -> the fields last typed on this page (the align toggle comes back to them)
  const finished = new Set();  // assignments submitted or skipped from this page: no copy is kept for them

  function assignmentId() { const wb = $("#workbench"); return wb ? wb.dataset.assignment || "" : ""; }
  function draftUrl(id) { return `/api/v1/assignments/${encodeURIComponent(id)}/draft`; }
  function csrfToken() { const input = $(`${FORM} input[name=csrfmiddlewaretoken]`); return input ? input.value : ""; }
  function draftState(text) { const el = $("#draft-state"); if (el) el.textContent = text; }
  function localGet(id) {
    try {
      const entry = JSON.parse(localStorage.getItem(DRAFT + id) || "null");
      if (Array.isArray(entry)) return { fields: Object.fromEntries(entry), pending: true };  // kept by an older page
      return entry && typeof entry.fields === "object" ? entry : null;
    } catch (e) { return null; }
  }
  function localPut(id, fields, unsent) {
    try { localStorage.setItem(DRAFT + id, JSON.stringify({ fields: fields, pending: unsent, at: Date.now() })); } catch (e) { /* storage full or off */ }
  }
  function localDrop(id) { try { localStorage.removeItem(DRAFT + id); } catch (e) { /* nothing kept */ } }
  function localPrune() {
    try {
      const oldest = Date.now() - LOCAL_DAYS * 86400 * 1000;
      Object.keys(localStorage).forEach(function (key) {
        if (!key.startsWith(DRAFT)) return;
        const entry = JSON.parse(localStorage.getItem(key) || "null");
        if (entry && typeof entry.at === "number" && entry.at < oldest) localStorage.removeItem(key);
      });
    } catch (e) { /* storage off */ }
  }
  function formFields() {
    const fields = {};
    new FormData($(FORM)).forEach(function (value, name) {
      if (name !== "csrfmiddlewaretoken" && name !== "align" && typeof value === "string") fields[name] = value;
    });
    return fields;
  }

  function draftChanged() {
    const id = assignmentId();
    if (applying || !$(FORM) || !id) return;
    const fields = formFields();
    typed[id] = fields;
    pending = { id: id, fields: fields };
    localPut(id, fields, true);
    draftState("Saving…");
    clearTimeout(saveTimer);
    saveTimer = setTimeout(draftSend, SAVE_AFTER_MS);
  }
  function draftSend(keepalive) {
    clearTimeout(saveTimer);
    saveTimer = null;
    const sent = pending;
    if (!sent) return;
    fetch(draftUrl(sent.id), {
      method: "PUT", credentials: "same-origin", keepalive: keepalive === true,
      headers: { "Content-Type": "application/json", "Accept": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify({ fields: sent.fields }),
    }).then(function (response) {
      const here = sent.id === assignmentId();
      if (response.ok || response.status === 404 || response.status === 409) {
        if (pending === sent) pending = null;  // a newer change has its own save coming
        const newer = pending !== null && pending.id === sent.id;  // its copy here is already the newer one
        if (response.ok && !newer && !finished.has(sent.id)) { localPut(sent.id, sent.fields, false); if (here) draftState("Draft saved"); }
        else if (!response.ok) localDrop(sent.id);  // no longer held for this person: nothing to keep it for
        return;
      }
      return response.json().then(function (body) {
        if (here) draftState(`Not saved on the server (${body.detail || response.status}): kept in this browser`);
      }, function () { if (here) draftState("Not saved on the server: kept in this browser"); });
    }, function () {
      if (sent.id === assignmentId()) draftState("Offline: kept in this browser, saved when the server answers");
      if (pending === sent) saveTimer = setTimeout(draftSend, RETRY_MS);
    });
  }
  function draftApply(fields) {
    const form = $(FORM);
    if (!form || !fields) return;
    applying = true;
    try {
      Object.keys(fields).forEach(function (name) {
        $$(`${FORM} [name="${CSS.escape(name)}"]`).forEach(function (el) {
          if (el.type === "checkbox") return;  // below: a box is checked exactly when it was kept
          if (el.type === "radio") el.checked = el.value === fields[name];
          else el.value = fields[name];
          if (el.type === "radio" && el.checked) el.dispatchEvent(new Event("change", { bubbles: true }));
        });
      });
      $$(`${FORM} input[type=checkbox]`).forEach(function (box) { box.checked = box.name in fields; });
    } finally { applying = false; }
    const note = $("#draft-note"); if (note) note.hidden = false;
    showStatus();
  }
  function draftRestore() {
    const id = assignmentId();
    let posted = null;
    try { posted = sessionStorage.getItem(POSTED); sessionStorage.removeItem(POSTED); } catch (e) { posted = null; }
    if (posted && posted !== id) { finished.add(posted); localDrop(posted); delete typed[posted]; }  // submitted or skipped
    if (!$(FORM) || !id || posted === id) return;  // a refused submit shows what was posted, as posted
    localPrune();
    if (typed[id]) { draftApply(typed[id]); return; }
    const local = localGet(id);
    if (local && local.pending) {  // typed in this browser and never acknowledged: the newest there is
      draftApply(local.fields);
      pending = { id: id, fields: local.fields };
      draftSend();
      return;
    }
    fetch(draftUrl(id), { credentials: "same-origin", headers: { "Accept": "application/json" } })
      .then(function (response) { return response.ok ? response.json() : null; })
      .then(function (draft) {
        if (assignmentId() !== id || typed[id]) return;  // moved on, or started typing meanwhile
        const fields = draft && Object.keys(draft.fields || {}).length ? draft.fields : (local ? local.fields : null);
        if (fields) draftApply(fields);
      }, function () { if (local && assignmentId() === id && !typed[id]) draftApply(local.fields); });
  }
  // A submit carries the last change itself, and the server keeps a refused submit's form as the
  // draft (annotate/services/drafts.py draft_keep_refused): no save races the submit (one that
  // lost would be refused, the assignment done). Only a submit that never reached the server
  // leaves the change to be saved from here.
  function draftPosted(form) {
    if (form.id !== "judgement-form" && form.id !== "skip-form") return;
    try { sessionStorage.setItem(POSTED, assignmentId()); } catch (e) { /* storage off */ }
    clearTimeout(saveTimer);
    saveTimer = null;
    pending = null;
  }
  function draftUnsent(form) {
    if (form.id !== "judgement-form" || !assignmentId()) return;
    try { sessionStorage.removeItem(POSTED); } catch (e) { /* storage off */ }
    pending = { id: assignmentId(), fields: formFields() };
    draftSend();
  }
  // Only a change in the form on show counts: while htmx swaps in the next comparison, the old
  // form's focused field still fires its "change" (its focus moves), and that is no change to
  // the new one.
  function onTheFormShown(ev) { return Boolean(ev.target.closest && ev.target.closest(FORM) === $(FORM)); }
  document.addEventListener("input", function (ev) { if (onTheFormShown(ev)) draftChanged(); });
  document.addEventListener("change", function (ev) { if (onTheFormShown(ev)) draftChanged(); });
  document.body.addEventListener("htmx:beforeRequest", function (ev) {
    const elt = ev.detail && ev.detail.elt;
    if (elt && elt.tagName === "FORM") draftPosted(elt);
  });
  document.body.addEventListener("htmx:sendError", function (ev) {
    const elt = ev.detail && ev.detail.elt;
    if (elt && elt.tagName === "FORM") draftUnsent(elt);
  });
  document.addEventListener("submit", function (ev) { if (!window.htmx) draftPosted(ev.target); });
  window.addEventListener("pagehide", function () { if (pending) draftSend(true); });
  // Leaving asks first only while a change has not reached the server (or a correction is typed).
  window.addEventListener("beforeunload", function (ev) {
    if (!pending && !correctionTyped()) return;
    ev.preventDefault();
    ev.returnValue = "";  // the browser asks "Leave site? Changes you made may not be saved."
  });
  function correctionTyped() {
    const fix = $(FIX);
    return Boolean(fix && !fix.hidden && $$("textarea, input[type=text], input[type=number]", fix).some(function (el) {
      return el.value.trim() && el.value !== el.dataset.prefilled;  // a prefilled answer is not typed work
    }));
  }

  // The lease's time left, counted down from the server's figure at load.
  let leaseTimer = null;
  function leaseStart() {
    if (leaseTimer) clearInterval(leaseTimer);
    const wb = $("#workbench"), clock = $("[data-lease-clock]");
    if (!wb || !clock || wb.dataset.leaseLeft === undefined) return;
    const ends = Date.now() + 1000 * Number(wb.dataset.leaseLeft);
    function tick() {
      const left = Math.max(0, Math.round((ends - Date.now()) / 1000));
      const h = Math.floor(left / 3600), m = Math.floor((left % 3600) / 60), s = left % 60;
      clock.textContent = (h ? `${h}:${String(m).padStart(2, "0")}` : `${m}`) + `:${String(s).padStart(2, "0")}`;
      const box = $("#lease-left");
      if (box) {
        box.classList.toggle("warn", left > 0 && left <= 60);
        box.classList.toggle("expired", left === 0);
        if (left === 0) box.title = "The lease ran out: the comparison may go to someone else and a submit may be refused. What you typed stays on this page: submit it now.";
      }
      if (left === 0) clearInterval(leaseTimer);
    }
    tick();
    leaseTimer = setInterval(tick, 1000);
  }
  function workbenchLoaded() { draftRestore(); leaseStart(); }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", workbenchLoaded);
  else workbenchLoaded();

  // After htmx swaps in the next comparison (the whole workbench), give the keyboard back to
  // the page at its top. Any other swap (a correction's result) leaves scroll and focus where
  // the person is working: the result is shown where they look, and the focus stays in the
  // correction form, so Ctrl+Enter retries the correction instead of submitting the judgement.
  document.body.addEventListener("htmx:afterSwap", function (ev) {
    const target = ev.detail && ev.detail.target;
    if (target && target.id === "correction-result") {
      const fix = $(FIX);
      const shown = target.firstElementChild || target;
      shown.scrollIntoView({ block: "nearest" });
      if (fix && !fix.contains(document.activeElement)) {
        const field = $("textarea, input:not([type=hidden])", fix);
        if (field) field.focus({ preventScroll: true });
      }
      return;
    }
    if (!target || target.id !== "workbench") return;
    if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
    window.scrollTo(0, 0);
    workbenchLoaded();
  });
})();
