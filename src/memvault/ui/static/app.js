// memvault inspector: the only script. Asks before a rollback; nothing else.
"use strict";
document.addEventListener("submit", function (event) {
  var form = event.target;
  if (form.classList.contains("confirm") && !window.confirm(form.getAttribute("data-confirm"))) {
    event.preventDefault();
  }
});
