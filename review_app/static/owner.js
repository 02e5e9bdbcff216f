// The QC owner's page: each operating point's promises in words, each mission's state, status and next audit share
// from its monitor, a weaker re-certified promise to accept in words, the monitor's days and detectors, and a day's
// workload and its price.
(function () {
  var main = document.getElementById("main");
  function section(title, id) { var s = GQ.el("section", {id: id}, [GQ.el("h2", {text: title})]); main.appendChild(s); return s; }
  function promises(box) {
    return GQ.api("GET", "/api/promises").then(function (r) {
      var points = r.body.points || [];
      if (!points.length) box.appendChild(GQ.el("p", {text: "No operating_point.json in this project yet."}));
      points.forEach(function (p) {
        var part = GQ.el("div", {className: "panel", "data-point": p.point}, [GQ.el("h3", {text: p.point})]);
        box.appendChild(part);
        if (p.error) { part.appendChild(GQ.el("p", {className: "message", text: p.error})); return; }
        if (p.replaces) part.appendChild(GQ.el("p", {text: "replaces " + p.replaces}));
        // the line an owner repeats, first: one per mission (stage_b.monitoring.owner_status)
        part.appendChild(GQ.el("ul", {className: "status-lines"}, Object.keys(p.missions).map(function (m) {
          var x = p.missions[m];
          return GQ.el("li", {className: "status-" + (x.status || "none")}, [GQ.el("b", {text: m + ": "}), x.status_line]);
        })));
        part.appendChild(GQ.el("p", {className: "keys", text: p.monitor ? "live state from " + p.monitor : "no monitor of this operating point yet: its promises are not checked on live work"}));
        part.appendChild(GQ.table(["mission", "the promise", "state", "status", "next audit share"],
          Object.keys(p.missions).map(function (m) {
            var x = p.missions[m];
            return [m, x.promise, x.state || "-", GQ.el("span", {className: "status-" + (x.status || "none"), text: (x.status || "-") + (x.why ? ": " + x.why : "")}),
                    GQ.pct(x.next_audit_share)];
          })));
        var weaker = Object.keys(p.weaker || {});
        if (!weaker.length) return;
        if (p.acceptance) {
          part.appendChild(GQ.el("p", {className: "accepted", text: "weaker promise accepted by " + p.acceptance.by + " at " + p.acceptance.at + ": " + p.acceptance.words}));
          return;
        }
        part.appendChild(GQ.el("p", {className: "message", text: "WEAKER than the point it replaces, so it decides nothing without review until you accept it: " +
          weaker.map(function (m) { return m + ": " + p.weaker[m]; }).join("; ")}));
        var words = GQ.el("textarea", {name: "words", rows: "2", cols: "70", placeholder: "why you accept it, in your words (recorded with your name and the time)"});
        var form = GQ.el("form", {className: "accept"}, [words, GQ.el("br"), GQ.el("button", {type: "submit", text: "accept the weaker promise"})]);
        form.addEventListener("submit", function (e) {
          e.preventDefault();
          GQ.api("POST", "/api/acceptances", {point: p.point, words: words.value}).then(function (res) {
            GQ.notice(res.status === 200 ? "accepted: recorded beside " + p.point + " for every judge at it" : res.body.error, res.status === 200 ? "" : "bad");
            if (res.status === 200) setTimeout(function () { location.reload(); }, 800);
          });
        });
        part.appendChild(form);
      });
    });
  }
  function monitors(box) {
    return GQ.api("GET", "/api/monitor").then(function (r) {
      var list = r.body.monitors || [];
      if (!list.length) box.appendChild(GQ.el("p", {text: "No monitor.json in this project yet."}));
      list.forEach(function (m) {
        var part = GQ.el("div", {className: "panel"}, [GQ.el("h3", {text: m.file + (m.created_at ? " (" + m.created_at + ")" : "")})]);
        box.appendChild(part);
        if (m.error) { part.appendChild(GQ.el("p", {className: "message", text: m.error})); return; }
        var rows = [];
        Object.keys(m.missions).forEach(function (name) {
          m.missions[name].days.forEach(function (d) {
            rows.push([name, d.day, d.judged, GQ.pct(d.automation_share), d.state, GQ.pct(d.audit_share), d.audited,
                       d.escapes + " / " + d.audited_auto_passed + (d.escapes_unconfirmed ? " (+" + d.escapes_unconfirmed + " waiting)" : ""),
                       GQ.num(d.miss_detector), GQ.num(d.escape_detector), d.status, GQ.pct(d.next_audit_share)]);
          });
        });
        part.appendChild(GQ.table(["mission", "day", "judged", "automation", "inspection", "audit share", "audited",
                                   "escapes / auto-passed audited", "miss detector", "escape detector", "status", "next share"], rows));
        if (m.plot) part.appendChild(GQ.el("img", {className: "plot", alt: "the monitor's plot", src: "/api/monitor/plot?file=" + encodeURIComponent(m.plot)}));
      });
    });
  }
  function workload(box) {
    return GQ.api("GET", "/api/days").then(function (r) {
      (r.body.days || []).forEach(function (d) {
        GQ.api("GET", "/api/workload?day=" + encodeURIComponent(d.day)).then(function (w) {
          if (w.status !== 200) return;
          var v = w.body;
          box.appendChild(GQ.el("h3", {text: d.day + ": " + v.person_hours.toFixed(2) + " person-hours" + (v.cost !== null ? ", cost " + v.cost : "") + " at " + v.pace}));
          box.appendChild(GQ.table(v.columns, v.rows));
        });
      });
    });
  }
  GQ.whoAmI().then(function (who) {
    if (!who) return;
    main.appendChild(GQ.el("h1", {text: "Promises, live state and the day's work"}));
    promises(section("The promises, in words", "promises"));
    monitors(section("The monitor: each mission's days, detectors and next audit share", "monitor"));
    workload(section("Each day's work and its price", "workload"));
  });
})();
