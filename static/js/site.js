// Site-wide behaviour; a static file because the Content-Security-Policy forbids inline script.
// - The top bar's Menu button folds the navigation on small screens (arbiter.css shows the button
//   only on narrow screens, and only once this file has marked <html> with the "js" class).
// - A list of checkboxes marked data-filterable gets a filter box: type to narrow the list, tick
//   as many as needed, no Ctrl-click.
// - A form marked data-confirm="question" asks it before it submits (revoking a token, cancelling
//   a run): Cancel in the dialog sends nothing.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  function setMenu(button, open) {
    var menu = document.getElementById(button.getAttribute("aria-controls"));
    button.setAttribute("aria-expanded", String(open));
    if (menu) menu.classList.toggle("open", open);
  }

  document.addEventListener("click", function (event) {
    var button = event.target.closest(".menu-button");
    if (button) setMenu(button, button.getAttribute("aria-expanded") !== "true");
  });
  document.addEventListener("keydown", function (event) {
    if (event.key !== "Escape") return;
    var button = document.querySelector(".menu-button[aria-expanded=true]");
    if (button) {
      setMenu(button, false);
      button.focus();
    }
  });

  function addFilters(root) {
    root.querySelectorAll("[data-filterable]:not([data-filter-ready])").forEach(function (list) {
      list.setAttribute("data-filter-ready", "");
      var options = Array.prototype.slice.call(list.querySelectorAll("label.check, label.inline"));
      if (!options.length) return; // nothing to pick yet: no filter box
      var legend = list.querySelector("legend");
      var bar = document.createElement("div");
      var input = document.createElement("input");
      var count = document.createElement("span");
      bar.className = "pick-bar";
      input.type = "search";
      input.className = "pick-filter";
      input.placeholder = "Filter…";
      input.setAttribute("aria-label", "Filter " + (legend ? legend.textContent.trim() : "the list"));
      count.className = "pick-count help";
      count.setAttribute("aria-live", "polite");
      bar.appendChild(input);
      bar.appendChild(count);
      if (legend) legend.insertAdjacentElement("afterend", bar);
      else list.insertBefore(bar, list.firstChild);

      function update() {
        var query = input.value.trim().toLowerCase();
        var shown = 0;
        var ticked = 0;
        options.forEach(function (option) {
          var match = !query || option.textContent.toLowerCase().indexOf(query) !== -1;
          option.hidden = !match;
          if (match) shown += 1;
          var box = option.querySelector("input");
          if (box && box.checked) ticked += 1;
        });
        count.textContent = ticked + " selected" + (query ? ", " + shown + " of " + options.length + " shown" : "");
      }

      input.addEventListener("input", update);
      input.addEventListener("keydown", function (event) {
        if (event.key === "Enter") event.preventDefault(); // filtering never submits the form
      });
      list.addEventListener("change", update);
      update();
    });
  }

  document.addEventListener("submit", function (event) {
    var question = event.target.getAttribute && event.target.getAttribute("data-confirm");
    if (question && !window.confirm(question)) {
      event.preventDefault();
      event.stopImmediatePropagation();
    }
  }, true);

  // A refused htmx request (a 4xx or 5xx: a body over its route's limit, a lost session) swaps
  // nothing, so what the person typed stays; say why beside the form or button that sent it.
  function refusalMessage(xhr) {
    var text = xhr.responseText || "";
    try {
      var body = JSON.parse(text);
      if (body && typeof body.detail === "string") return body.detail;
    } catch (e) { /* a page, not JSON */ }
    var shown = new DOMParser().parseFromString(text, "text/html").querySelector(".error[role=alert]");
    return shown ? shown.textContent.trim() : "";
  }
  function sayRefused(elt, message) {
    var anchor = (elt && elt.closest && elt.closest("form")) || elt;
    if (!anchor || !anchor.parentNode) return;
    var note = anchor.nextElementSibling;
    if (!note || !note.classList.contains("request-refused")) {
      note = document.createElement("p");
      note.className = "error request-refused";
      note.setAttribute("role", "alert");
      anchor.parentNode.insertBefore(note, anchor.nextSibling);
    }
    note.textContent = message + " Nothing was changed; what you typed is still here.";
  }
  document.addEventListener("htmx:responseError", function (event) {
    var xhr = event.detail.xhr;
    sayRefused(event.detail.elt, refusalMessage(xhr) || ("The server refused the request (" + xhr.status + ")."));
  });
  document.addEventListener("htmx:sendError", function (event) {
    sayRefused(event.detail.elt, "The server could not be reached.");
  });
  document.addEventListener("htmx:afterRequest", function (event) {
    var anchor = event.detail.elt && event.detail.elt.closest ? event.detail.elt.closest("form") || event.detail.elt : null;
    var note = anchor && anchor.nextElementSibling;
    if (event.detail.successful && note && note.classList.contains("request-refused")) note.remove();
  });

  document.addEventListener("DOMContentLoaded", function () { addFilters(document); });
  document.addEventListener("htmx:load", function (event) { addFilters(event.target); });
})();
