"""The reviewer closes the loop, in headless Chromium: a judge's review page (written by stage_b.judging.judge from real
verdict files over real photos), decisions by keyboard and mouse, kept across a reload, exported as decisions.jsonl
by the page itself, imported by stage_b.labels.decisions into labelled Stage-A files. Also: filters and counts over
every
page, a browser that keeps nothing, and 2,000 groups."""
from __future__ import annotations

import json
import time


from qc_core.jsonl import write_jsonl_atomic
from stage_b.data.dataset import load_records
from stage_b.labels.decisions import import_decisions
from stage_b.data.settings import Selection
from tests.helpers import MISSIONS, decided_badges, export_decisions, fresh_page, judged_day, send_keys, wait_for_page















def test_decide_reload_export_import(browser, tmp_path, synthetic):
    out, verdicts = judged_day(tmp_path, synthetic)
    page = out / "review" / "index.html"
    browser.get(page.as_uri())
    browser.execute_script("localStorage.clear()")
    browser.refresh()
    browser.find_element("id", "reviewer").send_keys("王工")
    browser.find_element("tag name", "h1").click()          # focus back on the page, off the name field
    ids = browser.execute_script("return Array.from(document.querySelectorAll('.card')).map(c => c.dataset.groupId)")
    # three by keyboard, one key each: deciding moves on to the next undecided card; a note before the third
    send_keys(browser, "f")
    send_keys(browser, "p")
    send_keys(browser, "n")
    send_keys(browser, "螺丝看不清\n")
    send_keys(browser, "f")
    # one by mouse, on the fifth card
    browser.find_element("css selector", f'.card[data-group-id="{ids[4]}"] [data-decision="通过"]').click()
    expected = {ids[0]: "不通过", ids[1]: "通过", ids[2]: "不通过", ids[4]: "通过"}
    assert decided_badges(browser) == {g: f"decided: {d}" for g, d in expected.items()}
    assert browser.find_element("id", "decided-count").text == "4"
    browser.refresh()                                          # kept in the browser across a reload
    assert decided_badges(browser) == {g: f"decided: {d}" for g, d in expected.items()}
    assert browser.find_element("id", "reviewer").get_attribute("value") == "王工"
    # the reload's current card is the first one still to decide, not the first (decided) card
    assert browser.find_element("css selector", ".card.current").get_attribute("data-group-id") == ids[3]
    # export: the page's own download
    exported = export_decisions(browser, tmp_path / "downloads")
    lines = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert {d["group_id"]: d["decision"] for d in lines} == expected
    assert all(d["reviewer"] == "王工" and d["source"]["file"].endswith("_verdicts.jsonl") for d in lines)
    assert next(d for d in lines if d["group_id"] == ids[2])["note"] == "螺丝看不清"
    shown = {v["group_id"]: v for v in verdicts}
    assert all(d["verdict"] == shown[d["group_id"]]["verdict"] and d["p_fail"] == shown[d["group_id"]]["p_fail"]
               for d in lines)
    # import: four labels in the missions' Stage-A files; again: nothing added
    labels = tmp_path / "labels"
    first = import_decisions([exported], labels)
    assert first["added"] == 4
    records = load_records(Selection(stage_a_dir=str(labels)))
    assert {r["group_id"]: r["label"] for r in records} == {g: "fail" if d == "不通过" else "pass"
                                                              for g, d in expected.items()}
    assert import_decisions([exported], labels)["added"] == 0


def test_filters_and_counts_cover_every_page(browser, tmp_path, synthetic, monkeypatch):
    """A mission whose groups are all on page 2 is counted from page 1 and linked there; a flagged 不通过 group is
    under 不通过 too; long unbroken text wraps inside its card."""
    from review import page as review_page
    from stage_b.pages.cards import JUDGE_OUTCOMES, judge_cards
    _, verdicts = judged_day(tmp_path, synthetic)
    verdicts = sorted(verdicts, key=lambda v: v["mission"] != MISSIONS[0])   # mission 2 only on the last pages
    verdicts[0] = {**verdicts[0], "reason": "x" * 400, "reply": "不通过\n理由: " + "x" * 400, "verdict": "不通过",
                   "needs_review": True}
    result = review_page.render_review(tmp_path / "paged", title="t", cards=judge_cards(verdicts),
                                       outcomes=JUDGE_OUTCOMES, input_dirs=[tmp_path / "photos"], per_page=3)
    browser.get(result["index"].as_uri())
    browser.execute_script("var s = document.getElementById('mission-filter'); s.value = '挡风板安装检查';"
                           "s.dispatchEvent(new Event('change'))")
    n_second = sum(v["mission"] == MISSIONS[1] for v in verdicts)
    assert browser.find_element("id", "visible-count").text == "0"
    assert browser.find_element("id", "matching-count").text == str(n_second)
    links = browser.find_elements("css selector", "#other-pages a")
    assert links and all("mission=" in a.get_attribute("href") for a in links)
    target = links[0].get_attribute("href").split("#")[0]
    links[0].click()                                           # the filter goes along to the other page
    wait_for_page(browser, target)
    assert int(browser.find_element("id", "visible-count").text) > 0
    assert browser.find_element("id", "mission-filter").get_attribute("value") == "挡风板安装检查"
    browser.get(result["index"].as_uri())
    fails = sum(v["verdict"] == "不通过" for v in verdicts)
    assert browser.find_element("css selector", '[data-count="fail"]').text == str(fails)
    first = browser.find_element("css selector", ".card")
    assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth + 1", first)


def test_a_browser_that_keeps_nothing_says_so_and_still_exports(browser, tmp_path, synthetic):
    out, _ = judged_day(tmp_path, synthetic, per_label=1)
    script = browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": """
        Object.defineProperty(window, 'localStorage', {get: function () {
          throw new DOMException('The operation is insecure.', 'SecurityError'); }});"""})
    try:
        browser.get((out / "review" / "index.html").as_uri())
        assert browser.find_element("id", "storage-warning").is_displayed()
        assert "private window" in browser.find_element("id", "storage-warning").text
        send_keys(browser, "f")   # no name yet: nothing decided, the page asks for one and puts the cursor there
        assert browser.execute_script("return window.groupQcDecisionsJsonl()") == ""
        assert browser.find_element("id", "name-needed").is_displayed()
        assert browser.switch_to.active_element.get_attribute("id") == "reviewer"
        browser.switch_to.active_element.send_keys("李工f\ue00c")   # the name, then Escape back to the cards
        send_keys(browser, "f")
        lines = browser.execute_script("return window.groupQcDecisionsJsonl()").splitlines()
        assert len(lines) == 1 and json.loads(lines[0])["decision"] == "不通过"
        assert json.loads(lines[0])["reviewer"] == "李工f"
    finally:
        browser.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", {"identifier": script["identifier"]})


FILL_STORAGE = """
    // localStorage[key] grown until not one more character fits (the store every file:// page shares is full)
    var key = arguments[0], value = "", chunk = 1 << 22;
    while (chunk >= 1) {
      try { localStorage.setItem(key, value + "x".repeat(chunk)); value += "x".repeat(chunk); }
      catch (e) { chunk = chunk >> 1; }
    }
    return value.length;"""


def test_a_full_store_frees_exported_pages_first_then_says_it_is_full(browser, tmp_path, synthetic):
    """Every file:// page shares one localStorage. Full of an exported page's decisions: they are removed (the export
    holds them) and the new decision is kept. Full of decisions never exported: nothing is removed, the page says the
    store is full (not "a private window") and the export still has every decision."""
    out, _ = judged_day(tmp_path, synthetic, per_label=1)
    fresh_page(browser, out / "review" / "index.html")
    browser.execute_script("""
        localStorage.setItem("group-qc:decisions:kept", '{"x": {"decision": "通过"}}');
        localStorage.setItem("group-qc:pages", JSON.stringify({
          "old": {"saved": "2026-11-01T00:00:00Z", "exported": "2026-11-02T00:00:00Z"},
          "kept": {"saved": "2026-11-03T00:00:00Z", "exported": "2026-11-02T00:00:00Z"}}));""")
    assert browser.execute_script(FILL_STORAGE, "group-qc:decisions:old") > 100_000
    send_keys(browser, "f")
    stored = browser.execute_script("return [localStorage.getItem('group-qc:decisions:old'), "
                                    "localStorage.getItem('group-qc:decisions:kept')]")
    assert stored == [None, '{"x": {"decision": "通过"}}']   # the exported page went, the unexported one stayed
    assert not browser.find_element("id", "storage-warning").is_displayed()
    browser.refresh()   # the decision was saved: a reload keeps it
    assert len(browser.execute_script("return window.groupQcDecisionsJsonl()").splitlines()) == 1

    assert browser.execute_script(FILL_STORAGE, "group-qc:decisions:never-exported") > 100_000
    send_keys(browser, "jf")
    warning = browser.find_element("id", "storage-warning")
    assert warning.is_displayed() and "is full" in warning.text and "private window" not in warning.text
    assert "2 other review page(s)" in warning.text
    assert len(browser.execute_script("return window.groupQcDecisionsJsonl()").splitlines()) == 2   # kept in the tab
    browser.execute_script("localStorage.clear()")


def test_two_thousand_groups_keep_the_keyboard_responsive(browser, tmp_path):
    """2,000 groups on 10 pages (no photos: the cards and the index are what is measured). Moving and deciding by
    keyboard: the time per key is printed, and must stay far below what a reviewer would notice."""
    from review import page as review_page
    from stage_b.pages.cards import JUDGE_OUTCOMES, judge_cards
    verdicts = [{"group_id": f"QC-BIG-{k}", "mission": MISSIONS[k % 2], "verdict": "不通过" if k % 3 else "通过",
                 "p_fail": (k % 97) / 97, "threshold": 0.5, "needs_review": k % 5 == 0, "review_why": [],
                 "label": None, "reply": "通过\n理由: 图片_1 依据", "images": [], "summaries": []} for k in range(2000)]
    result = review_page.render_review(tmp_path, title="big", cards=judge_cards(verdicts, {m: 0 for m in MISSIONS}),
                                       outcomes=JUDGE_OUTCOMES, input_dirs=[tmp_path],
                                       sources=[{"file": "/day/verdicts.jsonl", "sha256": "s"}])
    assert len(result["pages"]) == 10
    fresh_page(browser, result["index"])
    started = time.perf_counter()
    send_keys(browser, "jf" * 25)
    per_key = (time.perf_counter() - started) / 50
    assert browser.find_element("id", "decided-count").text == "25"
    print(f"\n2,000 groups, 10 pages: {1000 * per_key:.1f} ms per key (j, f)")
    assert per_key < 0.25


def test_the_demos_reviewer_writes_what_the_page_exports_and_the_import_labels_the_truth(tmp_path, synthetic):
    """group_qc_dev.play_reviewer writes decisions through stage_b.labels.decision_lines.decision_line, the line the
    page's export mirrors: imported, every flagged group gets the generator's label."""
    from group_qc_dev.play_reviewer import decide
    out, verdicts = judged_day(tmp_path, synthetic)
    lines = decide(tmp_path / "photos", out)
    assert {d["group_id"] for d in lines} == {v["group_id"] for v in verdicts if v["needs_review"]}
    path = tmp_path / "decisions.jsonl"
    write_jsonl_atomic(path, lines)
    import_decisions([path], tmp_path / "labels")
    truth = {g["group_id"]: g["label"] for g in synthetic.groups_of(synthetic.read_truth(tmp_path / "photos"))}
    records = load_records(Selection(stage_a_dir=str(tmp_path / "labels")))
    assert records and all(r["label"] == truth[r["group_id"]] for r in records)


# --------------------------------------------------------------------------------------------------------------
# Decisions stay with their page and their mission
# --------------------------------------------------------------------------------------------------------------
# planted-bug test (issue 36)
M, N = "BBU接地线检查", "挡风板安装检查"


def one_group_page(tmp_path, name, sha, missions=(M,)):
    """A page of one work order (the same id in each of `missions`) made from a source of content `sha`."""
    from stage_b.pages.cards import JUDGE_OUTCOMES
    from review.page import render_review
    cards = [{"group_id": "QC-SAME", "mission": m, "outcome": "needs_review", "facts": [], "reason": None,
              "reply": None, "error": None, "images": [], "summaries": [], "tags": ["needs_review"],
              "verdict": "通过", "p_fail": 0.1, "source": 0} for m in missions]
    return render_review(tmp_path / name, title=name, cards=cards, outcomes=JUDGE_OUTCOMES, input_dirs=[tmp_path],
                         sources=[{"file": f"/{name}.jsonl", "sha256": sha}])["index"]


def test_decisions_stay_with_their_page_and_their_mission(browser, tmp_path):
    from tests.helpers import send_keys
    first = one_group_page(tmp_path, "day1", "aaa", missions=(M, N))
    other = one_group_page(tmp_path, "day2", "bbb")
    fresh_page(browser, first)
    send_keys(browser, "f")   # the first card: QC-SAME of M
    lines = browser.execute_script("return window.groupQcDecisionsJsonl()").splitlines()
    assert [(json.loads(x)["mission"], json.loads(x)["decision"]) for x in lines] == [(M, "不通过")]   # not N's too
    browser.get(other.as_uri())   # another page (other sources) with the same group: nothing decided there
    assert browser.execute_script("return window.groupQcDecisionsJsonl()") == ""
