// The campaign form's dimension editor: add and remove rows (no inline script: the CSP forbids it).
(function () {
  "use strict";
  const rows = document.getElementById("dimension-rows");
  const template = document.getElementById("dimension-template");
  const add = document.getElementById("add-dimension");
  if (!rows || !template || !add) return;
  add.addEventListener("click", function () {
    rows.appendChild(template.content.cloneNode(true));
    rows.lastElementChild.querySelector("input").focus();
  });
  rows.addEventListener("click", function (event) {
    const button = event.target.closest("[data-remove-dimension]");
    if (button) button.closest(".dimension-row").remove();
  });
})();
