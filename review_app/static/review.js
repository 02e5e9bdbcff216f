// The reviewer's page: their queue of one day, one key per decision (p 通过, f 不通过, u unsure; each moves on), saved
// as it is made. Each decision gets an id made here and goes to an outbox kept in this browser (localStorage) until
// the server acknowledges it: a network drop, a reload, a closed tab or a stopped server loses nothing, and a resend
// is stored once (the same id). `base` is the version of this account's decision the page last saw: a decision made
// in another tab meanwhile is answered 409 and shown here. In a day's shared queue the card on screen is leased to
// this reviewer; a card someone else has open is skipped.
(function () {
  var main = document.getElementById("main");
  var me = null, day = null, cards = [], byId = {}, current = -1, since = Date.now(), leaseTimer = null;
  var status = {}, messages = {}, answers = {}, undo = [], sending = false, retryTimer = null, retryDelay = 1000;
  var viewing = GQ.query("reviewer");   // a lead's look at a reviewer's queue: read-only
  var outboxKey = function () { return "gq-outbox:" + location.host + ":" + me.name; };

  function loadOutbox() { try { return JSON.parse(localStorage.getItem(outboxKey()) || "[]"); } catch (e) { return []; } }
  function saveOutbox(box) {
    try { localStorage.setItem(outboxKey(), JSON.stringify(box)); }
    catch (e) { GQ.notice("This browser cannot keep unsent decisions (storage full or off): keep this tab open until they are sent.", "warn"); }
  }
  var outbox = [];
  var draftsKey = function () { return "gq-drafts:" + location.host + ":" + me.name; };
  var drafts = {};   // notes typed on cards not decided yet, kept in this browser until they go with the decision
  function saveDrafts() { try { localStorage.setItem(draftsKey(), JSON.stringify(drafts)); } catch (e) { /* memory keeps them */ } }

  function pendingFor(cardId) { return outbox.filter(function (op) { return op.card === cardId && op.day === day; }); }
  function shownDecision(c) { var p = pendingFor(c.card); return p.length ? p[p.length - 1].decision : c.decision; }
  function shownNote(c) {
    if (drafts[day + "|" + c.card] !== undefined) return drafts[day + "|" + c.card];
    var p = pendingFor(c.card); return p.length ? p[p.length - 1].note : c.note;
  }
  function nextBase(c) { var p = pendingFor(c.card); return p.length ? p[p.length - 1].base + 1 : c.version; }

  // -- the header and the list ------------------------------------------------------------------------------------
  function counts() {
    var decided = cards.filter(function (c) { return shownDecision(c); }).length;
    var waiting = outbox.length;
    document.getElementById("decided-count").textContent = decided;
    document.getElementById("total-count").textContent = cards.length;
    var conn = document.getElementById("connection");
    conn.textContent = waiting ? waiting + " decision(s) waiting to be sent" + (retryTimer ? ": the server cannot be reached; they are kept in this browser and sent when it is back" : "")
                               : "every decision saved";
    conn.className = "state " + (waiting ? "state-waiting" : "state-saved");
  }
  function rowState(c) {
    if (pendingFor(c.card).length) return "waiting";
    return status[c.card] || (c.decision ? "saved" : "");
  }
  function drawRow(i) {
    var c = cards[i], row = document.getElementById("row-" + c.card);
    if (!row) return;
    GQ.clear(row);
    var st = rowState(c), d = shownDecision(c);
    row.className = "row" + (i === current ? " current" : "");
    row.dataset.state = st;
    row.appendChild(GQ.el("span", {className: "gid", text: c.group_id + " · " + c.mission}));
    row.appendChild(GQ.el("span", {className: "state state-" + (st || "none"), text: (d ? d + " " : "") + (st === "saved" ? "✓ saved" : st)}));
  }
  function drawList() {
    var list = GQ.clear(document.getElementById("list"));
    cards.forEach(function (c, i) {
      list.appendChild(GQ.el("div", {id: "row-" + c.card, className: "row", "data-card": c.card,
                                     onclick: function () { show(i); }}));
      drawRow(i);
    });
  }

  // -- the current card -----------------------------------------------------------------------------------------------
  function show(i) {
    if (i < 0 || i >= cards.length) return;
    var before = current;
    current = i;
    since = Date.now();
    if (before >= 0) drawRow(before);
    drawRow(i);
    drawCard();
    var row = document.getElementById("row-" + cards[i].card);
    if (row && row.scrollIntoView) row.scrollIntoView({block: "nearest"});
    takeLease();
  }
  function drawCard() {
    var box = GQ.clear(document.getElementById("card"));
    if (current < 0) { box.appendChild(GQ.el("p", {text: cards.length ? "" : "Nothing in your queue for this day."})); return; }
    var c = cards[current], d = shownDecision(c);
    box.className = c.blind ? "blind" : "";
    box.dataset.card = c.card;
    box.appendChild(GQ.el("h2", {}, [c.group_id, GQ.el("span", {className: "badge", text: c.mission}),
      GQ.el("span", {className: "badge", text: c.blind ? "blind audit" : "review"}),
      d ? GQ.el("span", {className: "badge decision-badge", text: "decided: " + d}) : null]));
    box.appendChild(GQ.el("div", {className: "facts"}, c.facts.map(function (f) {
      return GQ.el("span", {}, [f[0] + ": ", GQ.el("b", {text: f[1]})]);
    })));
    if (c.reason !== null) box.appendChild(GQ.el("div", {className: "reason", text: "理由: " + c.reason}));
    if (c.reply) box.appendChild(GQ.el("div", {className: "reason", text: "reply (not the two-line contract): " + c.reply}));
    if (c.blind && answers[c.card]) {
      var a = answers[c.card];
      box.appendChild(GQ.el("div", {className: "unsealed"}, [
        GQ.el("div", {className: "facts"}, a.facts.map(function (f) { return GQ.el("span", {}, [f[0] + ": ", GQ.el("b", {text: f[1]})]); })),
        a.reason !== null ? GQ.el("div", {className: "reason", text: "理由: " + a.reason}) : null]));
    }
    if (messages[c.card]) box.appendChild(GQ.el("div", {className: "message", id: "card-message", text: messages[c.card]}));
    if (c.decided_by && c.decided_by.length) box.appendChild(GQ.el("p", {className: "keys", text: "decided by: " + c.decided_by.join(", ")}));
    if (!viewing) {
      var buttons = ["通过", "不通过", "unsure"].map(function (x, k) {
        return GQ.el("button", {type: "button", "data-decision": x, className: d === x ? "chosen" : "",
                                text: x + " (" + "pfu".charAt(k) + ")", onclick: function () { decide(current, x); }});
      });
      var note = GQ.el("textarea", {id: "note", rows: "2", placeholder: "a note for this group (n)"});
      note.value = shownNote(c) || "";
      note.addEventListener("change", function () { noteChanged(current, note.value); });
      box.appendChild(GQ.el("div", {className: "decide"}, buttons.concat([note])));
    }
    var cited = (answers[c.card] && answers[c.card].cited) || [];
    box.appendChild(GQ.el("div", {className: "photos"}, c.photos.map(function (p, k) {
      var img = GQ.el("img", {src: p.url, alt: p.key, loading: "lazy"});
      return GQ.el("div", {className: "photo" + (p.cited || cited.indexOf(k + 1) >= 0 ? " cited" : "")}, [
        GQ.el("a", {href: p.url, target: "_blank", rel: "noopener"}, [img]),
        p.defect ? GQ.el("span", {className: "mark", text: "summary shows a defect"}) : null,
        GQ.el("div", {}, [GQ.el("b", {text: p.key + " "}), p.summary])]);
    })));
  }

  // -- deciding -------------------------------------------------------------------------------------------------------
  function decide(i, decision, note, fromUndo) {
    if (viewing || i < 0) return;
    var c = cards[i], before = shownDecision(c);
    if (status[c.card] === "taken") { GQ.notice(messages[c.card] || "another reviewer has this card", "warn"); return; }
    var op = {id: GQ.newId(), day: day, card: c.card, decision: decision,
              note: note === undefined ? (shownNote(c) || "") : note, base: nextBase(c),
              on_screen_ms: Math.max(0, Date.now() - since)};
    if (!fromUndo) undo.push({card: c.card, before: before || null});
    outbox.push(op);
    saveOutbox(outbox);
    delete drafts[day + "|" + c.card];
    saveDrafts();
    delete messages[c.card];
    status[c.card] = "waiting";
    drawRow(i);
    if (i === current) drawCard();
    counts();
    flush();
    if (i === current && note === undefined && !fromUndo) nextUndecided();
  }
  function noteChanged(i, text) {
    var c = cards[i], d = shownDecision(c);
    if (text === (shownNote(c) || "")) return;
    if (d) { decide(i, d, text, true); return; }   // a note is part of the decision: stored with it
    drafts[day + "|" + c.card] = text;              // kept until the card is decided
    saveDrafts();
    GQ.notice("note kept: it is saved with your decision on " + c.group_id);
  }
  function undoLast() {
    var last = undo.pop();
    if (!last) { GQ.notice("nothing to undo", "warn"); return; }
    var i = cards.findIndex(function (c) { return c.card === last.card; });
    show(i);
    if (!last.before) { GQ.notice("A saved decision can be changed, not taken back: press p, f or u for this card.", "warn"); return; }
    decide(i, last.before, undefined, true);
    GQ.notice("undone: " + cards[i].group_id + " is " + last.before + " again");
  }
  function nextUndecided() {
    for (var step = 1; step <= cards.length; step++) {
      var k = (current + step) % cards.length;
      if (!shownDecision(cards[k]) && status[cards[k].card] !== "taken") { show(k); return; }
    }
    GQ.notice("Every card in your queue is decided." + (outbox.length ? " Some are still being sent." : ""));
  }

  // -- sending --------------------------------------------------------------------------------------------------------
  function applyStored(c, body) {
    c.version = body.version; c.decision = body.decision; c.note = body.note || "";
  }
  function flush() {
    if (sending || !outbox.length) { counts(); return; }
    sending = true;
    var op = outbox[0];
    GQ.api("POST", "/api/decisions", op).then(function (r) {
      sending = false;
      var c = cards.find(function (x) { return x.card === op.card && op.day === day; });
      if (r.status === 200 || r.status === 201) {
        outbox.shift(); saveOutbox(outbox);
        retryDelay = 1000;
        if (c) { applyStored(c, r.body); if (!pendingFor(c.card).length) status[c.card] = "saved"; revealIfBlind(c); }
      } else if (r.status === 409) {
        // decided in another tab or window (or by another reviewer in a shared queue): the stored one stands
        outbox = outbox.filter(function (x) { return !(x.card === op.card && x.day === op.day); }); saveOutbox(outbox);
        if (c) {
          if (r.body.version !== undefined) applyStored(c, r.body);
          status[c.card] = r.body.leased_to || r.body.decided_by ? "taken" : "conflict";
          messages[c.card] = r.body.error;
        }
      } else if (r.status === 401) {
        GQ.notice("Your session ended: sign in again (" + outbox.length + " unsent decision(s) are kept in this browser and sent after you sign in).", "bad");
        counts();
        return;
      } else if (r.status === 403 && /CSRF/.test(r.body && r.body.error)) {
        GQ.refreshToken().then(flush);
        return;
      } else if (r.status === 0 || r.status >= 500 || r.status === 429) {
        retryTimer = setTimeout(function () { retryTimer = null; flush(); }, retryDelay);
        retryDelay = Math.min(10000, retryDelay * 2);
        counts();
        return;
      } else {   // refused for good (a card no longer in the queue, a day gone): said on the card
        outbox.shift(); saveOutbox(outbox);
        if (c) { status[c.card] = "error"; messages[c.card] = r.body && r.body.error || ("refused (" + r.status + ")"); }
      }
      if (c) { var i = cards.indexOf(c); drawRow(i); if (i === current) drawCard(); }
      counts();
      flush();
    });
  }
  function revealIfBlind(c) {
    if (!c.blind || answers[c.card]) return;
    GQ.api("GET", "/api/answer?day=" + encodeURIComponent(day) + "&card=" + c.card).then(function (r) {
      if (r.status === 200) { answers[c.card] = r.body; if (cards[current] === c) drawCard(); }
    });
  }
  function takeLease() {
    clearTimeout(leaseTimer);
    var c = cards[current];
    if (!c || viewing || !openQueue || shownDecision(c) || me.role !== "reviewer") return;
    GQ.api("POST", "/api/lease", {day: day, card: c.card}).then(function (r) {
      if (r.status === 409) {
        status[c.card] = "taken"; messages[c.card] = r.body.error;
        drawRow(cards.indexOf(c));
        if (cards[current] === c) nextUndecided();
      } else if (r.status === 200 && cards[current] === c) {
        leaseTimer = setTimeout(takeLease, (r.body.lease || 300) * 500);
      }
    });
  }
  window.addEventListener("online", flush);

  // -- keys -----------------------------------------------------------------------------------------------------------
  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    var t = e.target;
    if (t && (t.tagName === "TEXTAREA" || t.tagName === "INPUT" || t.tagName === "SELECT")) {
      if (e.key === "Escape" || (e.key === "Enter" && t.tagName === "TEXTAREA" && !e.shiftKey)) {
        e.preventDefault();
        if (t.id === "note") noteChanged(current, t.value);
        t.blur();
      }
      return;
    }
    var actions = {p: function () { decide(current, "通过"); }, f: function () { decide(current, "不通过"); },
                   u: function () { decide(current, "unsure"); }, j: function () { show(Math.min(cards.length - 1, current + 1)); },
                   k: function () { show(Math.max(0, current - 1)); }, g: nextUndecided, z: undoLast,
                   n: function () { var n = document.getElementById("note"); if (n) n.focus(); },
                   "?": function () { var h = document.getElementById("keys-help"); h.hidden = !h.hidden; }};
    if (!(e.key in actions)) return;
    e.preventDefault();
    actions[e.key]();
  });

  // -- start ----------------------------------------------------------------------------------------------------------
  var openQueue = false;
  function load(days) {
    var select = GQ.el("select", {id: "day"}, days.map(function (d) {
      return GQ.el("option", {value: d.day, text: d.day + " (" + d.decided + "/" + d.cards + ")"});
    }));
    select.value = day;
    select.addEventListener("change", function () {
      location.href = "/review?day=" + encodeURIComponent(select.value) + (viewing ? "&reviewer=" + encodeURIComponent(viewing) : "");
    });
    main.appendChild(GQ.el("div", {className: "bar"}, [
      GQ.el("label", {text: "day "}, [select]),
      viewing ? GQ.el("b", {text: "the queue of " + viewing + " (read-only)"}) : null,
      GQ.el("span", {}, ["decided ", GQ.el("b", {id: "decided-count", text: "0"}), " of ", GQ.el("b", {id: "total-count", text: "…"})]),   // a number only once the queue is loaded
      GQ.el("span", {id: "connection", className: "state"}),
      GQ.el("span", {className: "keys", text: "keys: p 通过 · f 不通过 · u unsure (each moves on) · z undo · g next undecided · j/k · n note · ? help"})]));
    main.appendChild(GQ.el("div", {id: "keys-help", hidden: "hidden", className: "keys",
      text: "p/f/u decide the card on screen and move to the next undecided one; z puts back your previous decision on the last card you decided; g the next undecided card; j/k next/previous; n a note (Enter saves it with the decision, Esc leaves it)."}));
    main.appendChild(GQ.el("div", {className: "layout"}, [GQ.el("div", {id: "list"}), GQ.el("div", {id: "card"})]));
    var path = "/api/queue?day=" + encodeURIComponent(day) + (viewing ? "&reviewer=" + encodeURIComponent(viewing) : "");
    return GQ.api("GET", path).then(function (r) {
      if (r.status !== 200) { GQ.notice(r.body && r.body.error || "cannot load the queue", "bad"); return; }
      cards = r.body.cards; openQueue = r.body.open_queue;
      cards.forEach(function (c) { byId[c.card] = c; if (c.decision) status[c.card] = "saved"; });
      drawList();
      var wanted = GQ.query("card"), at = wanted ? cards.findIndex(function (c) { return c.card === wanted; }) : -1;
      if (at < 0) at = cards.findIndex(function (c) { return !shownDecision(c); });
      show(at < 0 ? (cards.length ? 0 : -1) : at);
      if (current < 0) drawCard();
      cards.forEach(function (c) { if (c.decision) revealIfBlind(c); });
      counts();
      flush();
    });
  }
  GQ.whoAmI().then(function (who) {
    if (!who) return;
    me = who;
    outbox = loadOutbox();
    try { drafts = JSON.parse(localStorage.getItem(draftsKey()) || "{}") || {}; } catch (e) { drafts = {}; }
    return GQ.api("GET", "/api/days").then(function (r) {
      var days = (r.body && r.body.days) || [];
      day = GQ.query("day") || (days.find(function (d) { return d.decided < d.cards; }) || days[0] || {}).day;
      if (!day) { main.appendChild(GQ.el("p", {text: "No judged day has cards for you yet."})); flush(); return; }
      return load(days);
    });
  });
  window.groupQcOutbox = function () { return outbox.slice(); };   // for tests: what is still to send
})();
