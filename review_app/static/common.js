// group-qc review app: what every page shares. The JSON API with the session's CSRF token, and DOM helpers that
// put text on the page only as text (names, notes and reasons are typed by people: never HTML).
"use strict";
var GQ = (function () {
  var me = null;
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "className") node.className = attrs[k];
      else if (k.indexOf("on") === 0) node.addEventListener(k.slice(2), attrs[k]);
      else node.setAttribute(k, attrs[k]);
    });
    (children || []).forEach(function (c) {
      if (c !== null && c !== undefined) node.appendChild(typeof c === "string" ? document.createTextNode(c) : c);
    });
    return node;
  }
  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
  function notice(text, kind) {
    var n = document.getElementById("notice");
    n.textContent = text || "";
    n.className = kind || "";
    n.hidden = !text;
  }
  function query(name) { return new URLSearchParams(location.search).get(name); }
  // One request: {status, body}. A network failure is status 0 (the caller keeps what it was sending).
  function api(method, path, body) {
    var headers = {"Accept": "application/json"};
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (method !== "GET" && me) headers["X-CSRF-Token"] = me.csrf_token;
    return fetch(path, {method: method, headers: headers, credentials: "same-origin",
                        body: body === undefined ? undefined : JSON.stringify(body)})
      .then(function (r) {
        return r.text().then(function (t) {
          var parsed = null;
          try { parsed = t ? JSON.parse(t) : null; } catch (e) { parsed = {error: t}; }
          return {status: r.status, body: parsed};
        });
      }, function () { return {status: 0, body: {error: "the server cannot be reached"}}; });
  }
  // The signed-in account, or off to the sign-in page (and back here after it).
  function whoAmI() {
    return api("GET", "/api/me").then(function (r) {
      if (r.status === 401 || (r.body && r.body.must_change_password)) {
        location.href = "/login?next=" + encodeURIComponent(location.pathname + location.search);
        return new Promise(function () {});
      }
      if (r.status !== 200) { notice("The server answered " + r.status + ": " + (r.body && r.body.error), "bad"); return null; }
      me = r.body;
      header();
      return me;
    });
  }
  function header() {
    var nav = clear(document.getElementById("nav"));
    var links = {reviewer: [["/review", "my queue"]], lead: [["/lead", "lead"], ["/review", "decide a card"], ["/owner", "promises"]],
                 owner: [["/owner", "promises"], ["/lead", "reviewers"]]}[me.role] || [];
    links.forEach(function (l) { nav.appendChild(el("a", {href: l[0], text: l[1]})); });
    var who = clear(document.getElementById("who"));
    who.appendChild(el("span", {text: me.name + " (" + me.role + ")"}));
    who.appendChild(el("a", {href: "/password", text: "password"}));
    who.appendChild(el("button", {type: "button", id: "sign-out", text: "sign out", onclick: function () {
      api("POST", "/api/logout").then(function () { location.href = "/login"; });
    }}));
  }
  function refreshToken() {
    return api("GET", "/api/me").then(function (r) { if (r.status === 200) me = r.body; return r.status === 200; });
  }
  function pct(x) { return x === null || x === undefined ? "-" : (100 * x).toFixed(1) + "%"; }
  function num(x) { return x === null || x === undefined ? "-" : (Math.abs(x) >= 1000 || (x !== 0 && Math.abs(x) < 0.001) ? x.toExponential(2) : String(Math.round(x * 1000) / 1000)); }
  function table(columns, rows) {
    var t = el("table", {}, [el("tr", {}, columns.map(function (c) { return el("th", {text: c}); }))]);
    rows.forEach(function (r) {
      t.appendChild(el("tr", {}, r.map(function (v) { return v instanceof Node ? el("td", {}, [v]) : el("td", {text: v === null || v === undefined ? "-" : String(v)}); })));
    });
    return t;
  }
  function newId() {
    if (window.crypto && crypto.randomUUID) return crypto.randomUUID().replace(/-/g, "");
    var a = new Uint8Array(16);
    crypto.getRandomValues(a);
    return Array.prototype.map.call(a, function (b) { return ("0" + b.toString(16)).slice(-2); }).join("");
  }
  return {el: el, clear: clear, notice: notice, query: query, api: api, whoAmI: whoAmI, me: function () { return me; },
          refreshToken: refreshToken, pct: pct, num: num, table: table, newId: newId};
})();
