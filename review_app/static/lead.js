// The reviewer lead's page: each day's queues (reassign one when someone is ill), the reviewer table, the escapes
// waiting for a second person, the conflicts to settle (with a reason), a search by group id, and whether every
// stored decision has reached the labels.
(function () {
  var main = document.getElementById("main");
  var me = null;
  function section(title, id) { var s = GQ.el("section", {id: id}, [GQ.el("h2", {text: title})]); main.appendChild(s); return s; }
  function cardLink(c, text) {
    return GQ.el("a", {href: "/review?day=" + encodeURIComponent(c.day) + "&card=" + c.card, text: text || c.day});
  }
  function links(cards) {
    var span = GQ.el("span");
    (cards || []).forEach(function (c) { span.appendChild(cardLink(c)); span.appendChild(document.createTextNode(" ")); });
    return span;
  }
  function days(box) {
    return GQ.api("GET", "/api/days").then(function (r) {
      (r.body.days || []).forEach(function (d) {
        var part = GQ.el("div", {className: "panel", "data-day": d.day}, [GQ.el("h3", {text: d.day + (d.open_queue ? " (one queue open to every reviewer)" : "")})]);
        box.appendChild(part);
        (d.problems || []).forEach(function (p) { part.appendChild(GQ.el("p", {className: "message", text: p})); });
        GQ.api("GET", "/api/queues?day=" + encodeURIComponent(d.day)).then(function (q) {
          var rows = (q.body.queues || []).map(function (x) {
            return [GQ.el("a", {href: "/review?day=" + encodeURIComponent(d.day) + "&reviewer=" + encodeURIComponent(x.reviewer), text: x.reviewer}),
                    x.account ? "yes" : "no account", x.cards, x.decided, x.cards - x.decided];
          });
          part.appendChild(GQ.table(["reviewer", "account", "cards", "decided", "left"], rows));
          if (q.body.open_queue) return;
          var from = GQ.el("select", {name: "from"}, (q.body.queues || []).map(function (x) { return GQ.el("option", {value: x.reviewer, text: x.reviewer}); }));
          var to = GQ.el("input", {name: "to", placeholder: "to reviewer", size: "14"});
          var form = GQ.el("form", {className: "inline reassign"}, [GQ.el("span", {text: "reassign the undecided cards of "}), from,
            GQ.el("span", {text: " to "}), to, GQ.el("button", {type: "submit", text: "reassign"})]);
          form.addEventListener("submit", function (e) {
            e.preventDefault();
            GQ.api("POST", "/api/reassign", {day: d.day, from: from.value, to: to.value}).then(function (res) {
              GQ.notice(res.status === 200 ? res.body.moved + " card(s) moved to " + to.value + (res.body.why_kept ? "; " + res.body.why_kept : "")
                                           : res.body.error, res.status === 200 ? "" : "bad");
              if (res.status === 200) setTimeout(function () { location.reload(); }, 800);
            });
          });
          part.appendChild(form);
        });
      });
    });
  }
  function reviewers(table, waiting, conflicts, sync) {
    return GQ.api("GET", "/api/reviewers").then(function (r) {
      var v = r.body;
      if (v.log_problem) table.appendChild(GQ.el("p", {className: "message", text: v.log_problem}));
      table.appendChild(GQ.table(["reviewer", "decided", "gold answered", "gold wrong", "overlaps", "disagreed", "error rate", "bounds", "verdict", "median on screen"],
        v.rows.map(function (x) {
          return [x.reviewer, x.decided, x.gold_answered, x.gold_wrong, x.overlaps, x.disagreed, GQ.pct(x.error_rate),
                  "[" + GQ.pct(x.lower) + ", " + GQ.pct(x.upper) + "]", x.verdict + (x.more_gold_to_decide ? " (" + x.more_gold_to_decide + " more gold)" : ""),
                  (x.median_seconds == null ? "-" : x.median_seconds.toPrecision(2) + " s") + (x.pace_note ? ": " + x.pace_note : "")];
        })));
      if (!v.rows.length) table.appendChild(GQ.el("p", {text: "No decision in the labels yet."}));
      waiting.appendChild(v.escapes_waiting.length ? GQ.table(["mission", "group", "found by", "cards (decide it as the second person)"],
        v.escapes_waiting.map(function (x) { return [x.mission, x.group_id, x.reviewer, links(x.cards)]; }))
        : GQ.el("p", {text: "No escape waits for a second person."}));
      if (!v.conflicts.length) conflicts.appendChild(GQ.el("p", {text: "No conflict to settle."}));
      v.conflicts.forEach(function (x) {
        var reason = GQ.el("input", {name: "reason", size: "40", placeholder: "the reason, in words (8 characters or more)"});
        var choice = GQ.el("select", {name: "decision"}, ["不通过", "通过"].map(function (d) { return GQ.el("option", {value: d, text: d}); }));
        var form = GQ.el("form", {className: "inline adjudicate", "data-group": x.group_id}, [
          GQ.el("b", {text: x.mission + " " + x.group_id + ": "}),
          GQ.el("span", {text: x.decisions.map(function (d) { return d.reviewer + " " + d.decision + (d.note ? " (" + d.note + ")" : ""); }).join("; ") + " "}),
          links(x.cards), GQ.el("br"), GQ.el("span", {text: "settle as "}), choice, reason,
          GQ.el("button", {type: "submit", text: "settle"})]);
        form.addEventListener("submit", function (e) {
          e.preventDefault();
          var card = x.cards[0];
          if (!card) { GQ.notice("this group's card is in no day of this project", "bad"); return; }
          GQ.api("POST", "/api/adjudications", {id: GQ.newId(), day: card.day, card: card.card, decision: choice.value,
                                                reason: reason.value, base: 0}).then(function (res) {
            GQ.notice(res.status < 300 ? "settled: " + x.group_id + " is " + choice.value + " (logged as your adjudication)" : res.body.error,
                      res.status < 300 ? "" : "bad");
          });
        });
        conflicts.appendChild(form);
      });
      var s = v.sync;
      sync.appendChild(GQ.el("p", {id: "sync-state", text: s.stored + " decision(s) stored; " + s.waiting + " not yet in the labels (" + v.labels + ")" +
                                   (s.error ? "; the labels folder fails: " + s.error : "")}));
      (s.problems || []).forEach(function (p) { sync.appendChild(GQ.el("p", {className: "message", text: p.day + " " + p.group_id + ": " + p.why})); });
    });
  }
  function searchBox(box) {
    var input = GQ.el("input", {id: "search", placeholder: "group id", size: "24"});
    var out = GQ.el("div", {id: "search-results"});
    var form = GQ.el("form", {className: "inline"}, [input, GQ.el("button", {type: "submit", text: "find"})]);
    form.addEventListener("submit", function (e) {
      e.preventDefault();
      GQ.api("GET", "/api/search?group=" + encodeURIComponent(input.value)).then(function (r) {
        GQ.clear(out);
        if (r.status !== 200) { out.appendChild(GQ.el("p", {className: "message", text: r.body.error})); return; }
        out.appendChild(r.body.cards.length ? GQ.table(["day", "mission", "group", "card"], r.body.cards.map(function (c) {
          return [c.day, c.mission, c.group_id, cardLink(c, "open")];
        })) : GQ.el("p", {text: "no card holds " + input.value}));
      });
    });
    box.appendChild(form);
    box.appendChild(out);
  }
  GQ.whoAmI().then(function (who) {
    if (!who) return;
    me = who;
    main.appendChild(GQ.el("h1", {text: "Reviewer lead"}));
    searchBox(section("Find a group", "find"));
    var q = section("Queues by day", "queues");
    var t = section("Reviewers, over every mission and day in the labels", "reviewer-table");
    var w = section("Escapes waiting for a second person", "escapes");
    var c = section("Conflicts to settle", "conflicts");
    var s = section("Decisions and labels", "sync");
    days(q);
    reviewers(t, w, c, s);
  });
})();
