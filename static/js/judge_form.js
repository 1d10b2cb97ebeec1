// The judge form shows the settings of the kind chosen; every field stays in the form (the server reads only the kind's own).
(function () {
  const form = document.getElementById("judge-form");
  if (!form) return;
  const kind = form.querySelector("[name=kind]");
  function show() {
    form.querySelectorAll(".judge-kind").forEach(function (part) {
      part.hidden = part.dataset.kind !== kind.value;
    });
  }
  kind.addEventListener("change", show);
  show();
})();
