// Sign in: name and password; a one-time password must be replaced before anything else.
(function () {
  var main = document.getElementById("main");
  var next = GQ.query("next") || "/";
  if (!/^\/(?![\/\\])/.test(next)) next = "/";   // a page of this app only: not //host, not /\host
  var name = GQ.el("input", {id: "name", autocomplete: "username", size: "24"});
  var password = GQ.el("input", {id: "password", type: "password", autocomplete: "current-password", size: "24"});
  var form = GQ.el("form", {id: "login-form"}, [
    GQ.el("h1", {text: "Sign in"}),
    GQ.el("p", {}, [GQ.el("label", {text: "name "}, [name])]),
    GQ.el("p", {}, [GQ.el("label", {text: "password "}, [password])]),
    GQ.el("button", {type: "submit", id: "sign-in", text: "sign in"})]);
  main.appendChild(form);
  name.focus();
  form.addEventListener("submit", function (e) {
    e.preventDefault();
    GQ.api("POST", "/api/login", {name: name.value, password: password.value}).then(function (r) {
      if (r.status !== 200) { GQ.notice(r.body && r.body.error || ("sign-in failed (" + r.status + ")"), "bad"); return; }
      if (r.body.must_change_password) { location.href = "/password?next=" + encodeURIComponent(next); return; }
      location.href = next;
    });
  });
})();
