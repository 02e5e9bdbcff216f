"""The reviewer's day (issue 35): one key per decision, undo across pages, the next undecided group, where the day
stands; decisions that survive the day's files growing and the day folder moving; every change kept. In headless
Chromium over real judge pages, and through stage_b.labels.decisions."""
from __future__ import annotations

import json
import time
import shutil

import pytest

from qc_core.jsonl import JsonlAppender, file_sha256, iter_jsonl, record_digest, write_jsonl_atomic
from stage_b.labels.decisions import import_decisions
from stage_b.labels.decision_lines import DecisionsError, decision_line
from tests.helpers import MISSIONS, fresh_page, judged_day, send_keys, wait_for_page
from stage_b.judging import day_review
from stage_b.judging import verdict_file
from stage_b.contract.verdict import FAIL


def _paged(tmp_path, synthetic, per_page: int = 3):
    """A judge's day over two missions, re-rendered three cards a page (every group goes to review)."""
    from review.page import render_review
    from stage_b.pages.cards import JUDGE_OUTCOMES, judge_cards
    out, verdicts = judged_day(tmp_path, synthetic)
    files = [verdict_file.verdicts_path(out, m) for m in MISSIONS]
    sources = [{"file": str(f.resolve()), "sha256": file_sha256(f)} for f in files]
    result = render_review(out, title="day", cards=judge_cards(verdicts, {m: k for k, m in enumerate(MISSIONS)}),
                           outcomes=JUDGE_OUTCOMES, input_dirs=[tmp_path / "photos"], sources=sources,
                           per_page=per_page)
    return out, verdicts, result


def _current(browser) -> str:
    return browser.execute_script("var c = document.querySelector('.card.current'); return c ? c.id : null")


STORE = "'group-qc:decisions:' + window.GROUP_QC_REVIEW.page_id + '|'"   # one store entry per group


def _state(browser) -> dict:
    return json.loads(browser.execute_script(f"""var prefix = {STORE}, out = {{}};
        for (var i = 0; i < localStorage.length; i++) {{ var k = localStorage.key(i);
          if (k.indexOf(prefix) === 0) out[k.slice(prefix.length)] = JSON.parse(localStorage.getItem(k)); }}
        return JSON.stringify(out);"""))


def test_one_key_decides_and_moves_on_across_pages_and_z_undoes_across_them(browser, tmp_path, synthetic):
    out, verdicts, result = _paged(tmp_path, synthetic)
    pages = [p.as_uri() for p in result["pages"]]
    fresh_page(browser, result["index"])
    assert _current(browser) == "card-1"
    send_keys(browser, "z")   # nothing to undo yet: said, nothing changes
    assert browser.find_element("id", "flash").text == "nothing to undo" and _state(browser) == {}
    send_keys(browser, "pf")
    assert _current(browser) == "card-3"   # each decision moved on by itself
    send_keys(browser, "p")                    # the page's last card: on to the next page's first undecided card
    wait_for_page(browser, pages[1])
    assert _current(browser) == "card-4"
    assert browser.find_element("id", "decided-count").text == "3"
    assert browser.find_element("id", "pace").text == "… (after a minute)"   # three decisions in a blink
    assert all(m in browser.find_element("id", "mission-left").text for m in MISSIONS if m in json.dumps(
        [v["mission"] for v in verdicts[:3]], ensure_ascii=False))
    send_keys(browser, "z")                    # undo across the page boundary: back to card 3, undecided again
    wait_for_page(browser, pages[0])
    assert _current(browser) == "card-3" and browser.find_element("id", "decided-count").text == "2"
    card3 = browser.find_element("id", "card-3")
    assert card3.get_attribute("data-decided") == "0"
    key3 = verdicts_key(card3)
    send_keys(browser, "f")                    # decided again, another way: the history keeps both changes
    wait_for_page(browser, pages[1])
    third = _state(browser)[key3]
    assert [(h["from"], h["to"]) for h in third["history"]] == [(None, "通过"), ("通过", None), (None, "不通过")]
    assert all(h["by"] == "王工" and h["on_screen_ms"] >= 0 for h in third["history"])
    send_keys(browser, "g")                    # the next undecided group: card 5 (card 4 is current and undecided)
    assert _current(browser) == "card-5"
    send_keys(browser, "?")
    assert browser.find_element("id", "keys-help").is_displayed()
    # the pace, by the decisions' own times: three decisions a minute apart are 60 groups an hour
    browser.execute_script(f"""var prefix = {STORE}, t = Date.parse('2026-11-27T09:00:00Z'), keys = [];
        for (var i = 0; i < localStorage.length; i++) if (localStorage.key(i).indexOf(prefix) === 0) keys.push(
          localStorage.key(i));
        keys.sort().forEach(function (k, i) {{ var d = JSON.parse(localStorage.getItem(k));
          if (d.decision) {{ d.decided_at = new Date(t + 60000 * i).toISOString();
                             localStorage.setItem(k, JSON.stringify(d)); }} }});""")
    browser.refresh()
    assert browser.find_element("id", "pace").text == "60 groups/hour"
    lines = [json.loads(x) for x in browser.execute_script("return window.groupQcDecisionsJsonl()").splitlines()]
    assert len(lines) == 3 and all(x["history"] and x["source"]["line_sha256"] for x in lines)


def verdicts_key(card) -> str:
    return f"{card.get_attribute('data-mission')}\u241f{card.get_attribute('data-group-id')}"


def test_undo_restores_the_decision_it_replaced(browser, tmp_path, synthetic):
    out, _, result = _paged(tmp_path, synthetic, per_page=200)
    fresh_page(browser, result["index"])
    send_keys(browser, "p")
    send_keys(browser, "k")   # back to the first card, decided 通过
    send_keys(browser, "f")   # changed to 不通过
    send_keys(browser, "z")   # undo: 通过 again, not undecided
    assert _current(browser) == "card-1"
    assert browser.find_element("id", "card-1").find_element("css selector", ".decision-badge").text == "decided: 通过"


def test_a_name_typed_with_decision_letters_stays_in_the_name(browser, tmp_path, synthetic):
    out, _, result = _paged(tmp_path, synthetic, per_page=200)
    fresh_page(browser, result["index"], reviewer="")
    name = browser.find_element("id", "reviewer")
    name.click()
    name.send_keys("fpz 陈工\ue00c")   # f, p and z go into the name; Escape leaves the field
    assert name.get_attribute("value") == "fpz 陈工" and _state(browser) == {}
    send_keys(browser, "f")
    assert browser.find_element("id", "decided-count").text == "1"


def test_decisions_survive_the_days_file_growing_and_a_rejudged_group_is_refused_by_name(browser, tmp_path, synthetic):
    out, verdicts, result = _paged(tmp_path, synthetic, per_page=200)
    fresh_page(browser, result["index"])
    send_keys(browser, "ff")
    morning = browser.execute_script("return window.groupQcDecisionsJsonl()")
    mission = MISSIONS[0]
    path = verdict_file.verdicts_path(out, mission)
    new = {**next(v for v in verdicts if v["mission"] == mission), "group_id": "QC-AFTERNOON-1"}
    with JsonlAppender(path) as f:   # the afternoon's work orders appended to the day's file
        f.write(new)
    day_review.write_day_review(out, list(MISSIONS), [tmp_path / "photos"])
    browser.refresh()                # the re-rendered page keeps the morning's decisions
    assert browser.find_element("id", "decided-count").text == "2"
    (tmp_path / "m.jsonl").write_text(morning, encoding="utf-8")
    assert import_decisions([tmp_path / "m.jsonl"], tmp_path / "labels")["added"] == 2   # the old export imports
    # one decided group re-judged since: its decision is refused by name, not applied to what it did not see
    decided = json.loads(morning.splitlines()[0])
    rows = [r for _, r in iter_jsonl(verdict_file.verdicts_path(out, decided["mission"]))]
    rows = [{**r, "p_fail": 0.77} if r["group_id"] == decided["group_id"] else r for r in rows]
    write_jsonl_atomic(verdict_file.verdicts_path(out, decided["mission"]), rows)
    with pytest.raises(DecisionsError, match=f"group {decided['group_id']} of .* has changed in") as err:
        import_decisions([tmp_path / "m.jsonl"], tmp_path / "labels2")
    assert "m.jsonl:1" in str(err.value) and "render the page again" in str(err.value)


def test_a_day_folder_moved_with_its_page_imports_as_it_did_in_place(tmp_path, synthetic):
    out, verdicts = judged_day(tmp_path, synthetic)
    v = verdicts[0]
    path = verdict_file.verdicts_path(out, v["mission"])
    source = {"file": str(path.resolve()), "sha256": file_sha256(path), "relative": f"../{path.name}"}
    moved = tmp_path / "archive" / "day1"
    shutil.copytree(out, moved)
    shutil.rmtree(out)
    line = decision_line(v, "不通过", "王工", source, seen=record_digest(v))
    write_jsonl_atomic(tmp_path / "d.jsonl", [line])
    with pytest.raises(DecisionsError, match="does not exist"):   # no page named: nowhere else to look
        import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels")
    write_jsonl_atomic(tmp_path / "d.jsonl", [{**line, "page": (moved / "review" / "index.html").as_uri()}])
    result = import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels")
    assert result["added"] == 1 and result["groups"][(v["mission"], v["group_id"])]["status"] == FAIL


@pytest.mark.parametrize("history, problem", [
    ("x", "must be a list"),
    ([{"from": None, "to": "maybe", "at": "2026-11-27T09:00:00+00:00", "by": "王工", "on_screen_ms": 5}], "from/to"),
    ([{"from": None, "to": "通过", "at": "yesterday", "by": "王工", "on_screen_ms": 5}], "ISO time"),
    # planted: every bad time called "not an ISO time" -> a change stamped in the future was misnamed
    ([{"from": None, "to": "通过", "at": "2099-01-01T00:00:00+00:00", "by": "王工", "on_screen_ms": 5}],
     "is in the future"),
    ([{"from": None, "to": "通过", "at": "2026-11-27T09:00:00+00:00", "by": "王工", "on_screen_ms": -1}],
     "milliseconds"),
    ([{"from": None, "to": "通过", "at": "2026-11-27T09:00:00+00:00", "by": "王工", "extra": 1}], "only"),
])
def test_a_history_that_is_not_the_pages_is_refused_naming_the_line(tmp_path, synthetic, history, problem):
    out, verdicts = judged_day(tmp_path, synthetic)
    v = verdicts[0]
    path = verdict_file.verdicts_path(out, v["mission"])
    line = decision_line(v, "通过", "王工", {"file": str(path.resolve()), "sha256": file_sha256(path)},
                         seen=record_digest(v), history=history)
    write_jsonl_atomic(tmp_path / "d.jsonl", [line])
    with pytest.raises(DecisionsError, match=problem) as err:
        import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels")
    assert "d.jsonl:1: history" in str(err.value) and not (tmp_path / "labels").exists()


def test_a_thousand_decisions_imported_twice_add_nothing_the_second_time(tmp_path):
    from qc_core.missions import load_registry
    mission = load_registry().select("all")[0].name
    records = [{"group_id": f"QC-K-{k}", "mission": mission, "label": None, "images": ["1.jpg"],
                "per_image": {"图片_1": "接地线×1/已捆扎"}, "model": "/sa", "created_at": "2026-11-27T00:00:00+00:00"}
               for k in range(1000)]
    write_jsonl_atomic(tmp_path / "sa.jsonl", records)
    source = {"file": str(tmp_path / "sa.jsonl"), "sha256": file_sha256(tmp_path / "sa.jsonl")}
    write_jsonl_atomic(tmp_path / "d.jsonl", [decision_line(r, "通过", "王工", source, seen=record_digest(r),
                                                            decided_at="2026-11-27T10:00:00+00:00") for r in records])
    assert import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels")["added"] == 1000
    again = import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels")
    assert (again["added"], again["already"]) == (0, 1000)


def test_two_exports_of_one_reviewer_with_a_decision_changed_between_them(tmp_path, synthetic):
    """The morning's export says 通过, the afternoon's 不通过 for the same group: both are kept in the log, the later
    one labels the group, and importing the morning's again changes nothing."""
    out, verdicts = judged_day(tmp_path, synthetic)
    v = verdicts[0]
    path = verdict_file.verdicts_path(out, v["mission"])
    source = {"file": str(path.resolve()), "sha256": file_sha256(path)}
    for name, decision, at in [("am", "通过", "2026-11-27T09:00:00+00:00"),
                               ("pm", "不通过", "2026-11-27T15:00:00+00:00")]:
        write_jsonl_atomic(tmp_path / f"{name}.jsonl",
                           [decision_line(v, decision, "王工", source, seen=record_digest(v), decided_at=at)])
    import_decisions([tmp_path / "am.jsonl"], tmp_path / "labels")
    import_decisions([tmp_path / "pm.jsonl"], tmp_path / "labels")
    again = import_decisions([tmp_path / "am.jsonl"], tmp_path / "labels")
    assert again["added"] == 0 and again["groups"][(v["mission"], v["group_id"])]["status"] == FAIL
    log = [r for _, r in iter_jsonl(tmp_path / "labels" / "decisions.jsonl")]
    assert [r["decision"] for r in log] == ["通过", "不通过"]


def test_a_name_of_markup_is_a_name_not_markup(browser, tmp_path, synthetic):
    out, _, result = _paged(tmp_path, synthetic, per_page=200)
    name = '<img src=x onerror="window.ran=1">'
    fresh_page(browser, result["index"], reviewer=name)
    send_keys(browser, "f")
    (line,) = [json.loads(x) for x in browser.execute_script("return window.groupQcDecisionsJsonl()").splitlines()]
    assert line["reviewer"] == name and browser.execute_script("return window.ran === undefined")
    assert browser.find_element("id", "reviewer").get_attribute("value") == name
    write_jsonl_atomic(tmp_path / "d.jsonl", [line])
    result = import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels")   # printable: a name like any other
    assert result["added"] == 1


def test_g_finds_a_group_that_was_decided_and_then_undone(browser, tmp_path, synthetic):
    """An undone group keeps its history in the store but has no decision: `g` goes to it like to any undecided one.
    Planted: nextUndecided skipping every group with a stored entry (`!d`) -> g jumped from card 1 to card 3."""
    _, _, result = _paged(tmp_path, synthetic, per_page=200)
    fresh_page(browser, result["index"])
    send_keys(browser, "pp")   # cards 1 and 2 decided; card 3 current
    send_keys(browser, "z")    # card 2 undone (its history stays)
    assert _current(browser) == "card-2" and browser.find_element("id", "card-2").get_attribute("data-decided") == "0"
    send_keys(browser, "k")    # back on card 1, decided
    send_keys(browser, "g")
    assert _current(browser) == "card-2"


def test_undo_brings_the_counters_back(browser, tmp_path, synthetic):
    """Three decisions and three undos on one page: the header says 0 decided and every group left again.
    Planted: undo without recounting -> the header still said 3 decided."""
    _, _, result = _paged(tmp_path, synthetic, per_page=200)
    fresh_page(browser, result["index"])
    left = browser.find_element("id", "to-review-count").text
    send_keys(browser, "fpf")
    assert browser.find_element("id", "decided-count").text == "3"
    assert int(browser.find_element("id", "to-review-count").text) == int(left) - 3
    send_keys(browser, "zzz")
    assert browser.find_element("id", "decided-count").text == "0"
    assert browser.find_element("id", "to-review-count").text == left
    assert "3 decided" not in browser.find_element("id", "mission-left").text


def test_a_group_two_reviewers_share_is_in_each_ones_queue(browser, tmp_path, synthetic):
    """With an overlap every group sent to people is assigned to both reviewers, in a drawn order: each reviewer's
    queue holds every one of them, whichever was drawn first. Planted: the queue matching the first assignee only ->
    the second reviewer's count fell to the groups drawn for them first."""
    out, verdicts = judged_day(tmp_path, synthetic, provenance={"reviewers": ["王工", "李工"], "overlap_share": 1.0})
    to_people = [v for v in verdicts if v["route"] != "auto"]
    assert to_people and all(sorted(v["assigned_to"]) == ["李工", "王工"] for v in to_people)
    for name in ("王工", "李工"):
        assert any(v["assigned_to"][0] != name for v in to_people)   # the draw put the other one first somewhere
        fresh_page(browser, out / "review" / "index.html", reviewer=name)
        assert browser.find_element("id", "to-review-count").text == str(len(to_people)), name


def test_a_second_tab_of_the_page_loses_no_decision(browser, tmp_path, synthetic):
    """Another tab's save that this tab's memory has not seen (written to the store behind its back, as a tab whose
    storage event has not arrived): this tab's saves write only their own groups, never over it.
    Planted: save() writing this tab's memory of the whole store -> the other tab's decision was gone after a
    reload."""
    _, _, result = _paged(tmp_path, synthetic, per_page=200)
    fresh_page(browser, result["index"])
    key2 = verdicts_key(browser.find_element("id", "card-2"))
    browser.execute_script(f"""localStorage.setItem({STORE} + arguments[0], JSON.stringify(
        {{decision: '不通过', reviewer: '李工', decided_at: new Date().toISOString(), note: '',
          history: [{{from: null, to: '不通过', at: new Date().toISOString(), by: '李工', on_screen_ms: 900}}]}}));""",
                           key2)
    send_keys(browser, "p")                                 # this tab decides card 1 and saves
    browser.find_element("css selector", '#card-3 [data-decision="通过"]').click()
    browser.refresh()
    assert browser.find_element("id", "decided-count").text == "3"
    assert _state(browser)[key2]["decision"] == "不通过" and _state(browser)[key2]["reviewer"] == "李工"


def test_two_reviewers_exports_in_one_download_folder_do_not_collide_and_the_import_says_whose(
        browser, tmp_path, synthetic, capsys):
    """Every page used to download `decisions.jsonl`: two reviewers sharing a download folder overwrote each other.
    Planted: the fixed name -> the second export replaced the first."""
    from datetime import datetime, timezone

    from stage_b.labels.decisions import main
    from tests.helpers import export_decisions
    out, _, result = _paged(tmp_path, synthetic, per_page=200)
    day = datetime.now(timezone.utc).date().isoformat()
    files = []
    for name in ("王工", "李 工"):
        fresh_page(browser, result["index"], reviewer=name)
        send_keys(browser, "p")
        files.append(export_decisions(browser, tmp_path / "downloads"))   # one folder for both
    assert [f.name for f in files] == [f"decisions-王工-today-{day}.jsonl", f"decisions-李_工-today-{day}.jsonl"]
    assert all(f.is_file() for f in files)
    capsys.readouterr()
    assert main(["--decisions", *map(str, files), "--output_dir", str(tmp_path / "labels")]) == 0
    printed = capsys.readouterr().out
    assert f"read {files[0]}: 1 decision(s) by 王工" in printed
    assert f"read {files[1]}: 1 decision(s) by 李 工" in printed


def test_two_tabs_deciding_at_the_same_moment_lose_nothing(browser, tmp_path, synthetic):
    """The field case: a tab busy with other work, its view of the store stale, decided a group and wrote its stale
    copy over the other tab's two decisions (1 of 3 left after a reload). Each group is its own store entry: a tab
    writes only what it changed (planted: the whole store saved from the tab's memory, as before -> 1 of 3)."""
    _, _, result = _paged(tmp_path, synthetic, per_page=200)
    fresh_page(browser, result["index"])
    first = browser.current_window_handle
    browser.switch_to.new_window("tab")
    browser.get(result["index"].as_uri())
    busy = browser.current_window_handle
    # the busy tab: 2 s of work on its main thread, then a decision on card 2 (it has not seen the other tab's)
    browser.execute_script("""setTimeout(function () { var t = Date.now(); while (Date.now() - t < 2000) {}
        document.querySelector('#card-2 [data-decision="不通过"]').click(); }, 50);""")
    browser.switch_to.window(first)
    browser.find_element("css selector", '#card-1 [data-decision="通过"]').click()
    browser.find_element("css selector", '#card-3 [data-decision="通过"]').click()
    time.sleep(3)
    browser.switch_to.window(busy)
    browser.close()
    browser.switch_to.window(first)
    browser.refresh()
    assert browser.find_element("id", "decided-count").text == "3"
    assert sorted(d["decision"] for d in _state(browser).values() if d.get("decision")) == ["不通过", "通过", "通过"]
