// Keyboard-first labeling. Listeners sit on the document, so they keep working after
// htmx swaps in the next comparison. No inline script anywhere: the CSP forbids it.
(function () {
  "use strict";
  const $ = (sel, root) => (root || document).querySelector(sel);

  function typing(el) {
    return el && (el.tagName === "TEXTAREA" || el.tagName === "SELECT" ||
      (el.tagName === "INPUT" && !["radio", "checkbox"].includes(el.type)));
  }

  function openHelp() { const d = $("#help"); if (d && !d.open) d.showModal(); }
  function openSkip() {
    const f = $("#skip-form"); if (!f) return;
    f.hidden = false; $("select", f).focus();
  }
  function closeSkip() { const f = $("#skip-form"); if (f) { f.hidden = true; document.activeElement.blur(); } }
  function submitJudgement() { const f = $("#judgement-form"); if (f) f.requestSubmit(); }

  document.addEventListener("keydown", function (ev) {
    if (ev.altKey || ev.metaKey) return;
    const skip = $("#skip-form");
    const inSkip = skip && !skip.hidden && skip.contains(ev.target);
    if (inSkip) {
      if (ev.key === "Escape") { ev.preventDefault(); closeSkip(); }
      else if (ev.key === "Enter") { ev.preventDefault(); skip.requestSubmit(); }
      return;
    }
    if (typing(ev.target)) {
      if (ev.key === "Enter" && ev.ctrlKey) { ev.preventDefault(); submitJudgement(); }
      else if (ev.key === "Escape") { ev.target.blur(); }
      return;
    }
    if ($("#help") && $("#help").open) return;  // the dialog handles Esc itself
    if (ev.ctrlKey) return;
    if (/^[1-5]$/.test(ev.key)) {
      const radio = $(`#judgement-form input[name=choice][value="${ev.key}"]`);
      if (radio) { radio.checked = true; ev.preventDefault(); }
    } else if (ev.key === "Enter") {
      if (ev.target.tagName === "BUTTON" || ev.target.tagName === "SUMMARY" || ev.target.tagName === "A") return;
      ev.preventDefault(); submitJudgement();
    } else if (ev.key === "s") { ev.preventDefault(); openSkip(); }
    else if (ev.key === "?") { ev.preventDefault(); openHelp(); }
    else if (ev.key === "b") {
      const box = $("#judgement-form input[name=both_bad]");
      if (box) { box.checked = !box.checked; ev.preventDefault(); }
    } else if (ev.key === "r") {
      const area = $("#judgement-form textarea[name=rationale]");
      if (area) { area.focus(); ev.preventDefault(); }
    }
  });

  // Clicking a step marks it as the first wrong step on its side; clicking it again clears the mark.
  document.addEventListener("click", function (ev) {
    if (ev.target.closest("[data-open-help]")) { openHelp(); return; }
    if (ev.target.closest("[data-open-skip]")) { openSkip(); return; }
    if (ev.target.closest("[data-close-skip]")) { closeSkip(); return; }
    const step = ev.target.closest("#judgement-form .step[data-index]");
    if (!step || ev.target.closest("summary, details pre, label.wrong-mark")) return;
    const radio = $(`input[name=first_wrong_${step.dataset.side}][value="${step.dataset.index}"]`, step);
    if (!radio) return;
    if (radio.checked) {
      const none = $(`#judgement-form input[name=first_wrong_${step.dataset.side}][value=""]`);
      if (none) none.checked = true;
    } else {
      radio.checked = true;
    }
    radio.dispatchEvent(new Event("change", { bubbles: true }));
  });

  // Keep the marked step visible as marked.
  document.addEventListener("change", function (ev) {
    if (!ev.target.name || !ev.target.name.startsWith("first_wrong_")) return;
    const side = ev.target.name.slice("first_wrong_".length);
    document.querySelectorAll(`#judgement-form .step[data-side="${side}"]`).forEach(function (el) {
      el.classList.toggle("marked-wrong", el.dataset.index === ev.target.value);
    });
  });

  // After htmx swaps in the next comparison, give the keyboard back to the page.
  document.body.addEventListener("htmx:afterSwap", function () {
    if (document.activeElement && document.activeElement !== document.body) document.activeElement.blur();
    window.scrollTo(0, 0);
  });
})();
