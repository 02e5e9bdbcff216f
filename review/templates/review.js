// group-qc review page (stage_a/review_page.py): filters and counts over every page, a reviewer's decisions with the
// mouse or the keyboard, kept in this browser and exported as decisions.jsonl (group-qc decisions imports
// it). No network, no framework: it runs from file://. groups.js (window.GROUP_QC_REVIEW) indexes every group.
(function () {
  "use strict";
  var DATA = window.GROUP_QC_REVIEW || {groups: [], pages: ["index.html"], sources: [], outcomes: [], page_id: "none"};
  var STORE_KEY = "group-qc:decisions:" + DATA.page_id, NAME_KEY = "group-qc:reviewer", SEP = "\u241f";
  var byKey = {};
  DATA.groups.forEach(function (g) { byKey[g.key] = g; });
  var here = decodeURIComponent(location.pathname.split("/").pop() || "index.html");
  var pageNumber = Math.max(1, DATA.pages.indexOf(here) + 1);
  var cards = Array.prototype.slice.call(document.querySelectorAll(".card"));
  // A person looks at the groups the judge routed to review and the blind audits; pages without routes (evaluation,
  // Stage-A) at every group, or the flagged ones.
  // With named reviewers (judge --reviewers), each reviewer's queue holds the groups assigned to them.
  function forPerson(g) {
    var me = reviewer ? myName() : "";
    if (g.assigned && g.assigned.length && me && g.assigned.indexOf(me) < 0) return false;
    if (g.route) return g.route === "review" || g.route === "audit";
    return !flagged || g.tags.indexOf("needs_review") >= 0;
  }
  var flagged = DATA.groups.some(function (g) { return g.tags.indexOf("needs_review") >= 0; });

  // Decisions: localStorage under the page's identity, or memory when the browser keeps nothing (a private window).
  // Every page opened from file:// shares one store, so PAGES_KEY records when each page last saved and exported:
  // when the store is full, the decisions of other pages that were exported since they last changed are removed
  // (their export holds them), oldest first; if that is not enough the page says so and keeps this tab's decisions
  // in memory for the export, never blaming a private window.
  var PAGES_KEY = "group-qc:pages", STORE_PREFIX = "group-qc:decisions:", UNDO_PREFIX = "group-qc:undo:";
  var storage = null;
  try {
    localStorage.setItem("group-qc:probe", "1");
    localStorage.removeItem("group-qc:probe");
    storage = localStorage;
  } catch (e) { storage = null; }
  var warning = document.getElementById("storage-warning");
  function warn(text) { if (warning) { warning.textContent = text; warning.hidden = false; } }
  if (!storage) warn("This browser does not keep data for this page (a private window?): decisions will not " +
                     "persist after a reload. Export them before you close it.");
  // One store entry per group (STORE_KEY + "|" + the group's key): a tab writes only the groups it changed, so a tab
  // busy with other work, whose view of the store is stale, never writes that stale view over another tab's decisions.
  // A page saved before (one entry for the whole page, STORE_KEY) is split into entries the first time it loads.
  var decisions = {}, GROUP_PREFIX = STORE_KEY + "|";
  function parse(text) { try { return JSON.parse(text || "null"); } catch (e) { return null; } }
  function load() {
    if (!storage) return decisions;
    var out = {}, old = parse(storage.getItem(STORE_KEY));
    for (var i = 0; i < storage.length; i++) {
      var key = storage.key(i);
      if (key && key.indexOf(GROUP_PREFIX) === 0) {
        var d = parse(storage.getItem(key));
        if (d) out[key.slice(GROUP_PREFIX.length)] = d;
      }
    }
    if (old && typeof old === "object") {   // the whole-page entry of an earlier version: into per-group entries
      Object.keys(old).forEach(function (k) {
        out[k] = out[k] ? newer(out[k], old[k]) : old[k];
        try { storage.setItem(GROUP_PREFIX + k, JSON.stringify(out[k])); } catch (e) { /* kept in memory */ }
      });
      storage.removeItem(STORE_KEY);
    }
    return out;
  }
  function pagesMeta() {
    try { return JSON.parse(storage.getItem(PAGES_KEY) || "{}") || {}; } catch (e) { return {}; }
  }
  function touch(field) {   // best effort: the meta is tiny, and losing it only makes eviction more careful
    var meta = pagesMeta();
    meta[DATA.page_id] = meta[DATA.page_id] || {};
    meta[DATA.page_id][field] = new Date().toISOString();
    try { storage.setItem(PAGES_KEY, JSON.stringify(meta)); } catch (e) { /* full: eviction below frees room */ }
  }
  function evictExported() {   // other pages whose every decision was exported after it last changed
    var meta = pagesMeta(), freed = 0;
    Object.keys(meta).filter(function (id) {
      var m = meta[id] || {};
      return id !== DATA.page_id && m.exported && (!m.saved || m.exported >= m.saved);
    }).sort(function (a, b) { return (meta[a].saved || "") < (meta[b].saved || "") ? -1 : 1; }).forEach(function (id) {
      var gone = [];
      for (var i = 0; i < storage.length; i++) {
        var key = storage.key(i);
        if (key === STORE_PREFIX + id || (key && key.indexOf(STORE_PREFIX + id + "|") === 0)) gone.push(key);
      }
      gone.forEach(function (key) { storage.removeItem(key); });
      freed += gone.length ? 1 : 0;
      storage.removeItem(UNDO_PREFIX + id);
      delete meta[id];
    });
    try { storage.setItem(PAGES_KEY, JSON.stringify(meta)); } catch (e) { /* nothing more to free */ }
    return freed;
  }
  // Two tabs of one page share the store: a save reads the group's own entry, merges and writes that entry only (the
  // storage event below refreshes a tab when it can, but is not relied on). The entry whose history continues the
  // other's wins (it was made after it), else the later change.
  function continues(longer, shorter) {
    if (!shorter.length || longer.length <= shorter.length) return false;
    var last = JSON.stringify(shorter[shorter.length - 1]);
    for (var i = longer.length - 2; i >= 0; i--) if (JSON.stringify(longer[i]) === last) return true;
    return false;
  }
  function lastAt(d) { var h = d.history || []; return h.length ? String(h[h.length - 1].at) : ""; }
  function newer(a, b) {
    var ha = a.history || [], hb = b.history || [];
    if (continues(ha, hb)) return a;
    if (continues(hb, ha)) return b;
    return lastAt(a) >= lastAt(b) ? a : b;
  }
  function save(k) {   // the group k's entry, merged with what the store holds for it now
    if (!storage) return;
    var stored = parse(storage.getItem(GROUP_PREFIX + k));
    if (stored && decisions[k]) decisions[k] = newer(decisions[k], stored);
    else if (stored && !decisions[k]) decisions[k] = stored;
    var text = JSON.stringify(decisions[k] || null);
    try { storage.setItem(GROUP_PREFIX + k, text); touch("saved"); return; } catch (e) { /* full: free room, retry */ }
    var freed = evictExported();
    try { storage.setItem(GROUP_PREFIX + k, text); touch("saved"); return; } catch (e) { /* still full */ }
    var pages = {};
    for (var i = 0; i < storage.length; i++) {
      var key = storage.key(i);
      if (key && key.indexOf(STORE_PREFIX) === 0 && key.indexOf(STORE_KEY) !== 0) pages[key.split("|")[0]] = 1;
    }
    var others = Object.keys(pages).length;
    warn("This browser's storage for pages opened from files is full (" + others + " other review page(s) keep " +
         "decisions there that were never exported" + (freed ? "; " + freed + " exported page(s) were cleared" : "") +
         "): your decisions are kept in this tab only. Export them now, then export and import the other pages' " +
         "decisions so their space can be reused.");
  }
  decisions = load();

  var reviewer = document.getElementById("reviewer"), nameNeeded = document.getElementById("name-needed");
  var nameNeededText = nameNeeded ? nameNeeded.textContent : "";
  // A reviewer's name by qc_core/names.py's rule, step for step (the import applies the same one): NFC; refused when it
  // holds a character that shows nothing or moves text; each run of spaces of any width one space (an IME's full-width
  // space too); a letter or digit; at most RULE.max characters.
  var RULE = DATA.name_rule || {max: 80, refused: ["Cc", "Cf", "Co", "Cs", "Zl", "Zp"]};
  var REFUSED = new RegExp("[" + RULE.refused.map(function (c) { return "\\p{" + c + "}"; }).join("") + "]", "u");
  function nameOf(raw) {
    var name = String(raw || "").normalize("NFC");
    if (REFUSED.test(name)) return {name: "", problem: "holds a character that shows nothing or moves the text " +
                                                       "around it (a control or text-direction mark)"};
    name = name.replace(/\p{Zs}+/gu, " ").replace(/^ +| +$/g, "");
    if (!name) return {name: "", problem: ""};
    if (!/[\p{L}\p{N}]/u.test(name)) return {name: "", problem: "holds no letter or digit"};
    if (Array.from(name).length > RULE.max) return {name: "", problem: "is over " + RULE.max + " characters"};
    return {name: name, problem: ""};
  }
  function myName() { return nameOf(reviewer.value).name; }
  if (storage) reviewer.value = storage.getItem(NAME_KEY) || "";
  reviewer.addEventListener("input", function () {
    if (storage) { try { storage.setItem(NAME_KEY, reviewer.value); } catch (e) { /* kept in the field */ } }
    if (nameNeeded && myName()) nameNeeded.hidden = true;
    counters();   // the queue is this reviewer's
  });

  // Filters live in the address (#outcome=…&mission=…), so they carry over from page to page.
  var state = {outcome: "", mission: ""};
  location.hash.slice(1).split("&").forEach(function (part) {
    var kv = part.split("=");
    if (kv.length !== 2 || !(kv[0] in state)) return;
    try { state[kv[0]] = decodeURIComponent(kv[1]); } catch (e) { /* a malformed address: that filter stays off */ }
  });
  // arriving from another page: by j/k (first, last) or at a given card (the next undecided one, an undone one)
  var at = /(?:^#|&)at=(first|last|card-[0-9]+)/.exec(location.hash);
  function hashOf(extra) {
    var parts = [];
    Object.keys(state).forEach(function (k) { if (state[k]) parts.push(k + "=" + encodeURIComponent(state[k])); });
    if (extra) parts.push(extra);
    return parts.length ? "#" + parts.join("&") : "";
  }
  function matches(g) {
    return (!state.outcome || g.tags.indexOf(state.outcome) >= 0) && (!state.mission || g.mission === state.mission);
  }
  function keyOf(card) { return card.dataset.mission + SEP + card.dataset.groupId; }
  function text(id, value) { var el = document.getElementById(id); if (el) el.textContent = value; }

  function counters() {
    var decided = 0, left = 0, perMission = {}, times = [];
    DATA.groups.forEach(function (g) {
      var d = decisions[g.key];
      var m = perMission[g.mission] = perMission[g.mission] || {decided: 0, left: 0};
      if (d && d.decision) { decided++; m.decided++; times.push(Date.parse(d.decided_at)); }
      else if (forPerson(g)) { left++; m.left++; }
    });
    text("decided-count", decided);
    text("total-count", DATA.groups.length);
    text("to-review-count", left);
    text("mission-left", Object.keys(perMission).sort().map(function (m) {
      return m + " " + perMission[m].decided + " decided, " + perMission[m].left + " left";
    }).join("; "));
    // the reviewer's pace, by the page's own clock: the latest 50 decisions, first to last, once they span a minute
    times = times.filter(function (t) { return !isNaN(t); }).sort(function (a, b) { return a - b; }).slice(-50);
    var hours = times.length > 1 ? (times[times.length - 1] - times[0]) / 3600000 : 0;
    text("pace", hours >= 1 / 60 ? Math.round((times.length - 1) / hours) + " groups/hour" : "… (after a minute)");
  }

  function apply() {
    var counts = {"": 0};
    DATA.outcomes.forEach(function (o) { counts[o.key] = 0; });
    DATA.groups.forEach(function (g) {
      if (state.mission && g.mission !== state.mission) return;
      counts[""]++;
      g.tags.forEach(function (t) { if (t in counts) counts[t]++; });
    });
    document.querySelectorAll("[data-count]").forEach(function (el) { el.textContent = counts[el.dataset.count] || 0; });
    document.querySelectorAll("[data-outcome-filter]").forEach(function (b) {
      b.classList.toggle("active", b.dataset.outcomeFilter === state.outcome);
    });
    document.getElementById("mission-filter").value = state.mission;
    var shown = 0;
    cards.forEach(function (c) {
      var g = byKey[keyOf(c)];
      var ok = g ? matches(g) : true;
      c.style.display = ok ? "" : "none";
      if (ok) shown++;
    });
    text("visible-count", shown);
    var perPage = {};
    var matching = 0;
    DATA.groups.forEach(function (g) {
      if (!matches(g)) return;
      matching++;
      if (g.page !== pageNumber) perPage[g.page] = (perPage[g.page] || 0) + 1;
    });
    text("matching-count", matching);
    var others = document.getElementById("other-pages");
    others.textContent = "";
    var pages = Object.keys(perPage).map(Number).sort(function (a, b) { return a - b; });
    if (pages.length) {
      others.appendChild(document.createTextNode(" more on pages: "));
      pages.forEach(function (p) {
        var a = document.createElement("a");
        a.href = DATA.pages[p - 1] + hashOf();
        a.textContent = p + " (" + perPage[p] + ")";
        a.style.marginRight = ".5em";
        others.appendChild(a);
      });
    }
    document.querySelectorAll("[data-page-link]").forEach(function (a) {
      a.href = DATA.pages[Number(a.dataset.pageLink) - 1] + hashOf();
    });
    if (history.replaceState) history.replaceState(null, "", hashOf() || location.pathname);
    if (current && current.style.display === "none") setCurrent(visible()[0] || null, false);
    counters();
  }

  // A blind audit's card opens (the model's verdict, p_fail, reason, the photos it cites) once it is decided.
  function unseal(card) {
    if (!card.dataset.sealed || card.dataset.unsealed === "1") return;
    var hidden;
    try { hidden = JSON.parse(atob(card.dataset.sealed)); } catch (e) { return; }
    card.dataset.unsealed = "1";
    var box = document.createElement("div");
    box.className = "unsealed";
    var facts = document.createElement("div");
    facts.className = "facts";
    hidden.facts.forEach(function (f) {
      var span = document.createElement("span"), b = document.createElement("b");
      span.appendChild(document.createTextNode(f[0] + ": "));
      b.textContent = f[1];
      span.appendChild(b);
      facts.appendChild(span);
    });
    box.appendChild(facts);
    if (hidden.reason !== null) {
      var reason = document.createElement("div");
      reason.className = "reason";
      reason.textContent = "理由: " + hidden.reason;
      box.appendChild(reason);
    }
    if (hidden.reply) {
      var reply = document.createElement("div");
      reply.className = "reason";
      reply.textContent = "reply (not the two-line contract): " + hidden.reply;
      box.appendChild(reply);
    }
    card.insertBefore(box, card.querySelector(".decide"));
    card.querySelectorAll(".photo").forEach(function (photo, i) {
      if (hidden.cited.indexOf(i + 1) >= 0) photo.dataset.cited = "1";
    });
  }

  // What each card shows of its decision.
  function show(card) {
    var d = decisions[keyOf(card)] || {};
    if (d.decision) unseal(card);
    card.dataset.decided = d.decision ? "1" : "0";
    var badge = card.querySelector(".decision-badge");
    badge.hidden = !d.decision;
    badge.textContent = d.decision ? "decided: " + d.decision : "";
    card.querySelectorAll("[data-decision]").forEach(function (b) {
      b.classList.toggle("chosen", b.dataset.decision === d.decision);
    });
    var note = card.querySelector("textarea.note");
    if (!note) return;
    if (document.activeElement !== note) note.value = d.note || "";
    if (d.note) note.hidden = false;
  }
  // A card without a source file (a Stage-A error) takes no decision: its label could come from nowhere.
  function decidable(card) { return Boolean(card && card.querySelector("[data-decision]")); }
  // Every change is kept: each group's `history` ({from, to, at, by, on_screen_ms}) goes into the export, and the
  // undo stack (z) lives beside the decisions, so an undo works after a reload or from another page.
  var UNDO_KEY = UNDO_PREFIX + DATA.page_id, MAX_UNDO = 500, undoStack = [];
  if (storage) { try { undoStack = JSON.parse(storage.getItem(UNDO_KEY) || "[]") || []; } catch (e) { undoStack = []; } }
  function saveUndo() {
    if (!storage) return;
    try { storage.setItem(UNDO_KEY, JSON.stringify(undoStack.slice(-MAX_UNDO))); } catch (e) { /* memory keeps it */ }
  }
  var currentSince = Date.now();
  function change(k, next, withUndo) {   // next: the decision object, or null for none (a note stays)
    var before = decisions[k] || {};
    var entry = {from: before.decision || null, to: next ? next.decision : null, at: new Date().toISOString(),
                 by: myName(), on_screen_ms: Math.max(0, Date.now() - currentSince)};
    if (withUndo) {
      undoStack.push({key: k, before: before.decision ? {decision: before.decision, reviewer: before.reviewer,
                                                         decided_at: before.decided_at} : null});
      saveUndo();
    }
    var after = next ? next : {};
    after.note = before.note || "";
    after.history = (before.history || []).concat([entry]).slice(-100);
    if (!after.decision && !after.note && !after.history.length) delete decisions[k]; else decisions[k] = after;
    save(k);
  }
  function decide(card, decision) {
    if (!decidable(card)) return;
    var who = nameOf(reviewer.value);
    if (!who.name) {   // two nameless reviewers could not be told apart: the later would silently win
      if (nameNeeded) {
        nameNeeded.textContent = who.problem ? "This name " + who.problem + ": type a name of letters, digits, " +
          "punctuation and spaces, at most " + RULE.max + " characters (e.g. 王工)." : nameNeededText;
        nameNeeded.hidden = false;
      }
      reviewer.focus();
      return;
    }
    change(keyOf(card), {decision: decision, reviewer: who.name, decided_at: new Date().toISOString()},
           true);
    show(card);
    counters();
    if (card === current) nextUndecided();   // one key per decision: on to the next group to decide
  }
  function undecide(card) {
    var k = keyOf(card);
    if (!decisions[k] || !decisions[k].decision) return;
    change(k, null, true);
    show(card);
    counters();
  }
  function undo() {   // the last change comes back: undecided, or the decision it replaced
    var last = undoStack.pop();
    if (!last) { flash("nothing to undo"); return; }
    saveUndo();
    change(last.key, last.before ? {decision: last.before.decision, reviewer: last.before.reviewer,
                                    decided_at: last.before.decided_at} : null, false);
    counters();   // the header counts what the store holds now (goTo may stay on this page)
    goTo(byKey[last.key]);
    flash("undone: " + (byKey[last.key] ? byKey[last.key].id : last.key));
  }
  function flash(message) {
    var el = document.getElementById("flash");
    if (!el) return;
    el.textContent = message;
    el.hidden = false;
    clearTimeout(flash.timer);
    flash.timer = setTimeout(function () { el.hidden = true; }, 2500);
  }
  function cardOf(g) { return g ? document.getElementById(g.anchor) : null; }
  function goTo(g) {   // the group's card: here, or on its page
    if (!g) return;
    var card = cardOf(g);
    if (card) {
      if (card.style.display === "none") { state.outcome = ""; state.mission = ""; apply(); }
      show(card);
      setCurrent(card, true);
      return;
    }
    location.href = DATA.pages[g.page - 1] + hashOf("at=" + g.anchor);
  }
  function nextUndecided() {   // after the current group, in page order across pages, wrapping round; filters hold
    var start = current ? DATA.groups.indexOf(byKey[keyOf(current)]) : -1;
    for (var step = 1; step <= DATA.groups.length; step++) {
      var g = DATA.groups[(start + step) % DATA.groups.length];
      var d = decisions[g.key];
      if (matches(g) && forPerson(g) && g.source !== null && g.source !== undefined && !(d && d.decision)) {
        goTo(g);
        return;
      }
    }
    flash("every group to review is decided: export your decisions");
  }
  function openNote(card) {
    if (!decidable(card)) return;
    var note = card.querySelector("textarea.note");
    note.hidden = false;
    note.focus();
  }

  // The current card: j/k move it (onto the next page when this one ends), p/f/u decide it.
  var current = null;
  function visible() { return cards.filter(function (c) { return c.style.display !== "none"; }); }
  function setCurrent(card, scroll) {
    if (current) current.classList.remove("current");
    if (card !== current) currentSince = Date.now();
    current = card;
    if (!card) return;
    card.classList.add("current");
    if (scroll) card.scrollIntoView({block: "center"});
  }
  function move(step) {
    var vis = visible(), i = vis.indexOf(current), next = vis[i + step];
    if (i < 0) next = vis[0];
    if (next) { setCurrent(next, true); return; }
    var target = null;
    DATA.groups.forEach(function (g) {
      if (!matches(g)) return;
      if (step > 0 && g.page > pageNumber && (target === null || g.page < target)) target = g.page;
      if (step < 0 && g.page < pageNumber && (target === null || g.page > target)) target = g.page;
    });
    if (target !== null) location.href = DATA.pages[target - 1] + hashOf(step > 0 ? "at=first" : "at=last");
  }

  document.addEventListener("keydown", function (e) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    var t = e.target;
    if (t && t.tagName === "TEXTAREA") {
      if (e.key === "Escape" || (e.key === "Enter" && !e.shiftKey)) { e.preventDefault(); t.blur(); }
      return;
    }
    if (t && (t.tagName === "INPUT" || t.tagName === "SELECT")) {   // typing a name: Escape or Enter goes back
      if (e.key === "Escape" || e.key === "Enter") { e.preventDefault(); t.blur(); }
      return;
    }
    var actions = {j: function () { move(1); }, k: function () { move(-1); },
                   p: function () { decide(current, "通过"); }, f: function () { decide(current, "不通过"); },
                   u: function () { decide(current, "unsure"); }, n: function () { openNote(current); },
                   z: undo, g: nextUndecided,
                   "?": function () { var h = document.getElementById("keys-help"); if (h) h.hidden = !h.hidden; }};
    if (!(e.key in actions)) return;
    e.preventDefault();
    if (!current && "pfun".indexOf(e.key) >= 0) setCurrent(visible()[0] || null, true);
    actions[e.key]();
  });

  cards.forEach(function (card) {
    card.addEventListener("click", function () { setCurrent(card, false); });
    card.querySelectorAll("[data-decision]").forEach(function (b) {
      b.addEventListener("click", function () {
        var d = decisions[keyOf(card)];
        if (d && d.decision === b.dataset.decision) undecide(card); else decide(card, b.dataset.decision);
      });
    });
    if (!decidable(card)) { show(card); return; }
    card.querySelector("[data-note-toggle]").addEventListener("click", function () { openNote(card); });
    var note = card.querySelector("textarea.note");
    note.addEventListener("input", function () {
      var k = keyOf(card), d = decisions[k] || {};
      d.note = note.value;
      decisions[k] = d;
      save(k);
    });
    note.addEventListener("blur", function () { show(card); });
    show(card);
  });

  document.querySelectorAll("[data-outcome-filter]").forEach(function (b) {
    b.addEventListener("click", function () { state.outcome = b.dataset.outcomeFilter; apply(); });
  });
  document.getElementById("mission-filter").addEventListener("change", function (e) {
    state.mission = e.target.value;
    apply();
  });
  window.addEventListener("storage", function (e) {   // another tab of the same page decided something
    if (!e.key || e.key.indexOf(GROUP_PREFIX) !== 0) return;
    var k = e.key.slice(GROUP_PREFIX.length), d = parse(e.newValue);
    if (d) decisions[k] = decisions[k] ? newer(decisions[k], d) : d; else delete decisions[k];
    cards.forEach(function (c) { if (keyOf(c) === k) show(c); });
    counters();
  });

  // Export: one line per decided group, as group-qc decisions reads it.
  function exportLines() {
    var lines = [];
    DATA.groups.forEach(function (g) {
      var d = decisions[g.key];
      if (!d || !d.decision) return;
      var source = g.source === null || g.source === undefined ? null : DATA.sources[g.source];
      if (source) source = {file: source.file, sha256: source.sha256, relative: source.relative, line_sha256: g.seen};
      lines.push(JSON.stringify({group_id: g.id, mission: g.mission, decision: d.decision, note: d.note || "",
                                 reviewer: d.reviewer || myName(), decided_at: d.decided_at,
                                 verdict: g.verdict, p_fail: g.p_fail, route: g.route || null, source: source,
                                 page: location.href.split("#")[0], history: d.history || []}));
    });
    return lines.length ? lines.join("\n") + "\n" : "";
  }
  window.groupQcDecisionsJsonl = exportLines;
  // decisions-<reviewer>-<day folder>-<date>.jsonl: two reviewers (or two days) sharing a download folder never
  // overwrite each other's export; the day folder is the one the page's review/ folder sits in.
  function exportName() {
    var parts = location.pathname.split("/").map(function (x) {
      try { return decodeURIComponent(x); } catch (e) { return x; }
    });
    var folder = parts.length >= 3 ? parts[parts.length - 3] : "page";
    var safe = function (text) {
      return String(text || "").replace(/[\\/:*?"<>|\s]+/g, "_").slice(0, 60) || "unnamed";
    };
    return "decisions-" + safe(myName()) + "-" + safe(folder) + "-" + new Date().toISOString().slice(0, 10) + ".jsonl";
  }
  window.groupQcExportName = exportName;
  window.groupQcReviewerName = function (raw) { return nameOf(raw); };   // the rule, for its tests
  document.getElementById("export-decisions").addEventListener("click", function () {
    var blob = new Blob([exportLines()], {type: "application/x-ndjson"});
    if (storage) touch("exported");
    var a = document.createElement("a");
    a.href = URL.createObjectURL(blob);
    a.download = exportName();
    document.body.appendChild(a);
    a.click();
    setTimeout(function () { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  });

  apply();
  var vis = visible(), arrived = at && at[1].indexOf("card-") === 0 ? document.getElementById(at[1]) : null;
  if (arrived && arrived.style.display === "none") arrived = null;
  // opened or reloaded without an address: the first card this reviewer still has to decide, not a decided one
  var open = vis.filter(function (c) {
    var g = byKey[keyOf(c)], d = decisions[keyOf(c)];
    return decidable(c) && g && forPerson(g) && !(d && d.decision);
  })[0];
  setCurrent(arrived || (at && at[1] === "last" ? vis[vis.length - 1] : (at ? vis[0] : open || vis[0]) || null),
             Boolean(at));
})();
