// Live refresh for the console's pages (server/console). Every element with a
// data-refresh attribute is fetched again from that URL, same origin, every
// data-interval milliseconds (the body's, or 2000), and its content replaced by the
// HTML fragment the server renders. Nothing here runs inline: the page's CSP allows
// this file only.
"use strict";
(function () {
  var interval = Number(document.body.getAttribute("data-interval")) || 2000;
  var status = document.getElementById("live-status");

  function say(text) {
    if (status) status.textContent = text;
  }

  function follow(el) {
    var url = el.getAttribute("data-refresh");
    var busy = false;
    var timer = setInterval(function () {
      if (busy || document.hidden) return;
      busy = true;
      fetch(url, { credentials: "same-origin", headers: { "Accept": "text/html" }, cache: "no-store" })
        .then(function (resp) {
          if (resp.status === 401) {
            clearInterval(timer);
            say("Your session has ended: sign in again to see live updates.");
            return null;
          }
          if (!resp.ok) {
            say("Refresh failed (" + resp.status + "); retrying.");
            return null;
          }
          return resp.text();
        })
        .then(function (html) {
          if (html !== null && html !== undefined) {
            el.innerHTML = html;
            say("Updated " + new Date().toLocaleTimeString() + ".");
          }
        })
        .catch(function () { say("The daemon did not answer; retrying."); })
        .then(function () { busy = false; });
    }, interval);
  }

  var live = document.querySelectorAll("[data-refresh]");
  for (var i = 0; i < live.length; i++) follow(live[i]);
})();
