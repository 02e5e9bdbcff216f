// A new password: the one-time password (or the current one) and the new one, twice.
(function () {
  var main = document.getElementById("main");
  var next = GQ.query("next") || "/";
  if (!/^\/(?![\/\\])/.test(next)) next = "/";   // a page of this app only: not //host, not /\host
  GQ.api("GET", "/api/me").then(function (r) {
    if (r.status !== 200) { location.href = "/login"; return; }
    var me = r.body;
    var old = GQ.el("input", {id: "old", type: "password", autocomplete: "current-password"});
    var a = GQ.el("input", {id: "new", type: "password", autocomplete: "new-password"});
    var b = GQ.el("input", {id: "again", type: "password", autocomplete: "new-password"});
    var form = GQ.el("form", {id: "password-form"}, [
      GQ.el("h1", {text: "Your password, " + me.name}),
      GQ.el("p", {text: me.must_change_password ? "The password you were given signs in once: choose your own (10 characters or more)." :
                         "Choose a new password (10 characters or more)."}),
      GQ.el("p", {}, [GQ.el("label", {text: "current password "}, [old])]),
      GQ.el("p", {}, [GQ.el("label", {text: "new password "}, [a])]),
      GQ.el("p", {}, [GQ.el("label", {text: "the new one again "}, [b])]),
      GQ.el("button", {type: "submit", id: "save-password", text: "save"})]);
    main.appendChild(form);
    old.focus();
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      if (a.value !== b.value) { GQ.notice("the two new passwords differ", "bad"); return; }
      fetch("/api/password", {method: "POST", credentials: "same-origin",
                              headers: {"Content-Type": "application/json", "X-CSRF-Token": me.csrf_token},
                              body: JSON.stringify({old: old.value, "new": a.value})}).then(function (res) {
        return res.json().then(function (body) {
          if (res.status !== 200) { GQ.notice(body.error || "not changed", "bad"); return; }
          location.href = next;
        });
      }, function () { GQ.notice("the server cannot be reached", "bad"); });
    });
  });
})();
