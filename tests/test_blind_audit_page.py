"""Blind audits on the judge's review page, in headless Chromium: the model's verdict, p_fail and reason are nowhere in
the page until the reviewer decides; audits count as left to review; the route travels through the page's export and
the import onto every label, with its audit probability."""
from __future__ import annotations

import json

from qc_core.jsonl import record_digest, write_jsonl_atomic
from stage_b.data.dataset import load_records
from stage_b.labels.decisions import import_decisions
from stage_b.labels.decision_lines import decision_line
from stage_b.contract.numbers import fmt_p
from stage_b.data.settings import Selection
from tests.helpers import audited_day, export_decisions, fresh_page, send_keys
from stage_b.judging import verdict_file





def test_an_audit_card_hides_the_models_answer_until_decided_and_the_route_reaches_the_label(browser, tmp_path,
                                                                                          synthetic):
    out, verdicts = audited_day(tmp_path, synthetic)
    audits = [v for v in verdicts if v["route"] == "audit"]
    reviews = [v for v in verdicts if v["route"] == "review"]
    assert audits and reviews
    fresh_page(browser, out / "review" / "index.html", reviewer="审核员")
    page = browser.execute_script("return document.documentElement.outerHTML")
    index = browser.execute_script("return JSON.stringify(window.GROUP_QC_REVIEW)")
    for v in audits:
        card = browser.find_element("css selector", f'.card[data-group-id="{v["group_id"]}"]')
        assert card.get_attribute("data-route") == "audit" and card.get_attribute("data-outcome") == "audit"
        facts = card.find_element("css selector", ".facts").text
        assert "verdict" not in facts and "p_fail" not in facts and "blind audit" in facts
        for hidden in (fmt_p(v["p_fail"], v["threshold"]), v["reason"]):
            assert hidden not in page and hidden not in index, hidden
        assert card.find_elements("css selector", ".reason") == []
    # audits are left to review beside the review route; decided: none yet
    assert browser.find_element("id", "to-review-count").text == str(len(audits) + len(reviews))
    # decide the first audit by keyboard: its answer shows
    first = audits[0]
    browser.find_element("css selector", f'.card[data-group-id="{first["group_id"]}"]').click()
    send_keys(browser, "f")
    card = browser.find_element("css selector", f'.card[data-group-id="{first["group_id"]}"]')
    opened = card.find_element("css selector", ".unsealed").text
    assert f"verdict: {first['verdict']}" in opened and fmt_p(first["p_fail"], first["threshold"]) in opened
    assert first["reason"] in opened
    assert browser.find_element("id", "to-review-count").text == str(len(audits) + len(reviews) - 1)
    # export (the page's own download), then import: the label carries the route and its probability
    exported = export_decisions(browser, tmp_path / "downloads")
    (line,) = [json.loads(x) for x in exported.read_text(encoding="utf-8").splitlines()]
    assert line["route"] == "audit" and line["verdict"] is None and line["p_fail"] is None
    path = verdict_file.verdicts_path(out, first["mission"])
    source = {"file": str(path.resolve()), "sha256": line["source"]["sha256"]}
    assert line["page"] == (out / "review" / "index.html").as_uri() and line["history"][0]["to"] == "不通过"
    source["relative"] = f"../{verdict_file.verdicts_path(out, first['mission']).name}"
    assert line == {**decision_line(first, "不通过", "审核员", source, decided_at=line["decided_at"],
                                    seen=record_digest(first), history=line["history"]), "page": line["page"]}
    labels = tmp_path / "labels"
    assert import_decisions([exported], labels)["added"] == 1
    (record,) = load_records(Selection(stage_a_dir=str(labels)))
    assert record["label"] == "fail" and record["review"]["route"] == "audit"
    assert record["review"]["audit_probability"] == 1.0 and record["review"]["reviewers"] == ["审核员"]


def test_an_edited_export_cannot_change_the_route_or_the_models_answer(tmp_path, synthetic):
    """The import reads the route and the model's verdict from the verdict file it verified, never from the export."""
    out, verdicts = audited_day(tmp_path, synthetic)
    review = next(v for v in verdicts if v["route"] == "review")
    path = verdict_file.verdicts_path(out, review["mission"])
    from qc_core.jsonl import file_sha256
    line = decision_line(review, "不通过", "r", {"file": str(path.resolve()), "sha256": file_sha256(path)})
    forged = {**line, "route": "audit", "verdict": "通过" if review["verdict"] == "不通过" else "不通过"}
    write_jsonl_atomic(tmp_path / "d.jsonl", [forged])
    result = import_decisions([tmp_path / "d.jsonl"], tmp_path / "labels")
    (record,) = load_records(Selection(stage_a_dir=str(tmp_path / "labels")))
    assert record["review"]["route"] == "review" and record["review"]["review_scope"] == "group"
    agreed = result["summary"][review["mission"]]["agreed"]
    assert agreed == (review["verdict"] == "不通过")
