"""The review app's people and what their decisions become, on SQLite and PostgreSQL: acknowledged decisions reach the
labels through the import's own code exactly once, a second person is a second account (an escape waits for one; an
overlap is two accounts), a lead settles a conflict (an adjudication in the chained log), reassigns a queue and sees
every queue, a shared queue leases its cards, and the owner reads the promises and accepts a weaker one in words."""
from __future__ import annotations

import json

import pytest

from qc_core.checkpoints import file_digest
from qc_core.jsonl import file_sha256, iter_jsonl, record_digest
from qc_core.missions import load_registry
from review_app.project import card_id
from stage_b.judging import verdict_file
from stage_b.labels.decision_lines import decision_line
from stage_b.labels.decisions import import_decisions
from stage_b.labels.decisions_log import read_log
from stage_b.monitoring.days import read_labels
from tests.helpers import certified_op
from tests.served import build_app, client_of, decide, queue_of

pytestmark = pytest.mark.usefixtures("fast_passwords")
DAY, OPEN = "days/day1", "today"


@pytest.fixture
def served(db_url, tmp_path, synthetic):
    app, store, project, lines = build_app(db_url, tmp_path, synthetic)
    yield app, store, project, lines
    store.close()


def sync(app) -> dict:
    result = app.state.ctx.writer.run_once()
    assert "error" not in result, result
    return result


def truth(v: dict) -> str:
    """The tests' reviewers decide by the model's p_fail (any rule will do): 不通过 above 0.5."""
    return "不通过" if v["p_fail"] >= 0.5 else "通过"


def test_acknowledged_decisions_become_labels_once_as_an_export_would(served, tmp_path):
    """Every acknowledged decision is in the log exactly once (by its id, whatever the number of syncs), and the
    labels equal those the offline path makes from the same decisions exported and imported (planted: the import
    appending without its already-in-the-log check logs every decision again on the second pass)."""
    app, _, project, lines = served
    by_card = {card_id(v["mission"], v["group_id"]): v for v in lines[DAY]}
    exported = []
    for name in ("王工", "李工"):
        client = client_of(app, name)
        for c in queue_of(client, DAY):
            v = by_card[c["card"]]
            assert decide(client, DAY, c["card"], truth(v)).status_code == 201
            path = verdict_file.verdicts_path(project / DAY, v["mission"])
            exported.append(decision_line(v, truth(v), name, {"file": str(path), "sha256": file_sha256(path)},
                                          seen=record_digest(v)))
    first = sync(app)
    assert first["added"] == len(exported) and sync(app)["added"] == 0
    store = app.state.ctx.store
    with store.write() as conn:   # as if the server was killed between the log's append and the database's mark
        store.execute(conn, "UPDATE decision_events SET synced = 0")
    assert sync(app)["added"] == 0
    log, _ = read_log(project / "labels" / "decisions.jsonl")
    ids = [d["id"] for d in log]
    assert len(ids) == len(set(ids)) == len(exported)
    offline = tmp_path / "offline"
    (tmp_path / "export.jsonl").write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in exported),
                                           encoding="utf-8")
    import_decisions([tmp_path / "export.jsonl"], offline, load_registry())
    for mission in {v["mission"] for v in lines[DAY]}:
        stem = load_registry().resolve(mission).stage_a_stem
        served_labels = {(r["group_id"], r["label"], r["review"]["route"])
                         for _, r in iter_jsonl(project / "labels" / f"{stem}.jsonl")}
        assert served_labels == {(r["group_id"], r["label"], r["review"]["route"])
                                 for _, r in iter_jsonl(offline / f"{stem}.jsonl")}
    reviewers = {r["reviewer"] for _, r in iter_jsonl(project / "labels" / "reviewers.jsonl")}
    assert reviewers == {"王工", "李工"}


def test_one_account_is_one_person_however_often_it_decides(served):
    """An overlap card decided twice by one account is one decision (its second replaces the first), never two
    reviewers agreeing; with the second account it is a pair (planted: versions per card only, not per account,
    would give 李工 a 409)."""
    app, _, project, lines = served
    wang, li = client_of(app, "王工"), client_of(app, "李工")
    shared = sorted({c["card"] for c in queue_of(wang, DAY)} & {c["card"] for c in queue_of(li, DAY)})
    assert shared, "the test day has an overlap"
    card = shared[0]
    assert decide(wang, DAY, card, "不通过").json()["version"] == 1
    assert decide(wang, DAY, card, "不通过", base=1, note="again, as a second person?").json()["version"] == 2
    sync(app)
    log, _ = read_log(project / "labels" / "decisions.jsonl")
    from stage_b.labels.resolve import resolve
    (group,) = [g for g in resolve(log).values() if g["decisions"]]
    assert [d["reviewer"] for d in group["decisions"]] == ["王工"]
    assert decide(li, DAY, card, "不通过").status_code == 201
    sync(app)
    log, _ = read_log(project / "labels" / "decisions.jsonl")
    (group,) = resolve(log).values()
    assert sorted(d["reviewer"] for d in group["decisions"]) == ["李工", "王工"]


def test_an_escape_waits_for_a_second_account_whatever_the_first_types(served):
    """A blind audit of an auto-passed group decided 不通过 by one reviewer waits for a second person: deciding it
    again, with any note, confirms nothing; the lead's decision does (planted: unconfirmed_fails taking one reviewer's
    不通过 as confirmed)."""
    app, _, project, lines = served
    wang, lead = client_of(app, "王工"), client_of(app, "组长")
    passed = {v["group_id"] for v in lines[DAY] if v["verdict"] == "通过" and not v.get("gold")}
    audit = next(c for c in queue_of(wang, DAY) if c["blind"] and c["group_id"] in passed)
    assert decide(wang, DAY, audit["card"], "不通过").status_code == 201
    assert decide(wang, DAY, audit["card"], "不通过", base=1, note="I confirm it: 李工").status_code == 201
    sync(app)
    waiting = lead.get("/api/reviewers").json()["escapes_waiting"]
    assert [(w["group_id"], w["reviewer"], w["cards"][0]["card"]) for w in waiting] == \
        [(audit["group_id"], "王工", audit["card"])]
    key = (audit["mission"], audit["group_id"])
    assert read_labels(project / "labels", load_registry()).unconfirmed == {key: "王工"}
    assert decide(lead, DAY, audit["card"], "不通过").status_code == 201   # the lead: a second person
    sync(app)
    assert lead.get("/api/reviewers").json()["escapes_waiting"] == []
    assert read_labels(project / "labels", load_registry()).unconfirmed == {}


def test_a_lead_settles_a_conflict_with_a_reason_logged_as_an_adjudication(served):
    """Two reviewers disagree: the lead's decision with a reason settles it, as its own kind of line in the chained
    log; a reviewer, or a lead who decided the card, cannot settle it; a card without a conflict has none to settle."""
    app, _, project, lines = served
    wang, li, lead = client_of(app, "王工"), client_of(app, "李工"), client_of(app, "组长")
    shared = sorted({c["card"] for c in queue_of(wang, DAY)} & {c["card"] for c in queue_of(li, DAY)})
    card = shared[0]
    assert decide(wang, DAY, card, "通过").status_code == 201
    assert decide(li, DAY, card, "不通过").status_code == 201
    sync(app)
    conflicts = lead.get("/api/reviewers").json()["conflicts"]
    assert [c["cards"][0]["card"] for c in conflicts] == [card]
    body = {"id": "evt-adjudicate-1", "day": DAY, "card": card, "decision": "不通过",
            "reason": "图片_2 接地线松动，看得清", "base": 0}
    assert li.post("/api/adjudications", json=body).status_code == 403
    assert lead.post("/api/adjudications", json={**body, "reason": "short"}).status_code == 422
    assert lead.post("/api/adjudications", json=body).status_code == 201
    assert lead.post("/api/adjudications", json=body).status_code == 200          # a resend
    sync(app)
    log, _ = read_log(project / "labels" / "decisions.jsonl")
    assert log[-1]["adjudication"] == {"reason": "图片_2 接地线松动，看得清"} and log[-1]["reviewer"] == "组长"
    view = lead.get("/api/reviewers").json()
    assert view["conflicts"] == [] and view["adjudicated"][0]["by"] == "组长"
    mission = conflicts[0]["mission"]
    stem = load_registry().resolve(mission).stage_a_stem
    (label,) = [r for _, r in iter_jsonl(project / "labels" / f"{stem}.jsonl")
                if r["group_id"] == conflicts[0]["group_id"]]
    assert label["label"] == "fail" and label["review"]["adjudicated"]["by"] == "组长"
    other = next(c for c in queue_of(wang, DAY) if c["card"] != card)
    assert lead.post("/api/adjudications", json={**body, "id": "evt-adjudicate-2", "card": other["card"]}
                     ).status_code == 409
    assert decide(lead, DAY, other["card"], "通过").status_code == 201          # the lead decided it as a reviewer
    assert decide(wang, DAY, other["card"], "不通过").status_code == 201
    assert lead.post("/api/adjudications", json={**body, "id": "evt-adjudicate-3", "card": other["card"]}
                     ).status_code in (403, 409)


def test_a_lead_reassigns_a_queue_and_sees_every_queue(served):
    app, *_ = served
    wang, zhang, lead = client_of(app, "王工"), client_of(app, "张工"), client_of(app, "组长")
    mine = queue_of(wang, DAY)
    assert decide(wang, DAY, mine[0]["card"], "通过").status_code == 201
    assert queue_of(zhang, DAY) == []
    assert lead.post("/api/reassign", json={"day": DAY, "from": "王工", "to": "nobody"}).status_code == 400
    r = lead.post("/api/reassign", json={"day": DAY, "from": "王工", "to": "张工"})
    assert r.status_code == 200 and r.json()["moved"] == len(mine) - 1
    assert [c["card"] for c in queue_of(wang, DAY)] == [mine[0]["card"]]   # the decided card stays
    moved = queue_of(zhang, DAY)
    assert len(moved) == len(mine) - 1 and decide(wang, DAY, moved[0]["card"]).status_code == 404
    queues = {q["reviewer"]: q for q in lead.get("/api/queues", params={"day": DAY}).json()["queues"]}
    assert queues["张工"]["cards"] == len(mine) - 1 and queues["王工"]["decided"] == 1
    assert len(queue_of(lead, DAY, reviewer="张工")) == len(mine) - 1
    found = lead.get("/api/search", params={"group": moved[0]["group_id"][-6:]}).json()["cards"]
    assert any(f["card"] == moved[0]["card"] and f["day"] == DAY for f in found)


def test_a_reassignment_never_gives_one_person_both_sides_of_an_overlap(served):
    app, *_ = served
    wang, li, lead = client_of(app, "王工"), client_of(app, "李工"), client_of(app, "组长")
    wang_cards, li_cards = {c["card"] for c in queue_of(wang, DAY)}, {c["card"] for c in queue_of(li, DAY)}
    shared = wang_cards & li_cards
    r = lead.post("/api/reassign", json={"day": DAY, "from": "王工", "to": "李工"}).json()
    assert r["kept"] == len(shared) and r["moved"] == len(wang_cards - shared)
    assert {c["card"] for c in queue_of(wang, DAY)} == shared


def test_a_day_judged_without_names_is_one_queue_whose_open_card_is_leased(served):
    app, *_ = served
    wang, li = client_of(app, "王工"), client_of(app, "李工")
    cards = queue_of(wang, OPEN)
    assert len(cards) == len(queue_of(li, OPEN)) and cards
    first = cards[0]["card"]
    assert wang.post("/api/lease", json={"day": OPEN, "card": first}).status_code == 200
    taken = li.post("/api/lease", json={"day": OPEN, "card": first})
    assert taken.status_code == 409 and taken.json()["error"].startswith("王工 has this card open")
    assert first not in {c["card"] for c in queue_of(li, OPEN)}
    assert decide(li, OPEN, first).status_code == 409
    assert decide(wang, OPEN, first).status_code == 201
    assert first in {c["card"] for c in queue_of(wang, OPEN)} and first not in {c["card"] for c in queue_of(li, OPEN)}


# -- the owner --------------------------------------------------------------------------------------------------------
@pytest.fixture
def weaker_point(served, tmp_path):
    """project/eval/new/operating_point.json replacing eval/old/operating_point.json with a weaker escape bound."""
    _, _, project, _ = served
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}), encoding="utf-8")
    (project / "eval" / "old").mkdir(parents=True)
    (project / "eval" / "new").mkdir(parents=True)
    old = certified_op(model, project / "eval" / "old" / "operating_point.json")
    new = certified_op(model, project / "eval" / "new" / "operating_point.json",
                       escape={"auto_passed": 10, "escapes": 1, "upper": 0.35})
    from stage_b.rules.replacement import compare
    body = json.loads(new.read_text(encoding="utf-8"))
    body["replaces"] = compare(json.loads(old.read_text(encoding="utf-8")), body, "../old/operating_point.json",
                               file_digest(old))
    new.write_text(json.dumps(body, ensure_ascii=False), encoding="utf-8")
    return "eval/new/operating_point.json"


def test_the_owner_reads_the_promises_and_accepts_a_weaker_one_in_words(served, weaker_point):
    """The acceptance is recorded with the account and the time, in the database and beside the operating point,
    where the judge reads it (stage_b.rules.acceptances; tests/test_replacement.py)."""
    app, _, project, _ = served
    owner = client_of(app, "老板")
    points = {p["point"]: p for p in owner.get("/api/promises").json()["points"]}
    assert set(points) == {"eval/old/operating_point.json", weaker_point}
    new = points[weaker_point]
    assert list(new["weaker"]) == ["BBU接地线检查"] and new["acceptance"] is None
    assert "at most 20% pass without a person" in new["missions"]["BBU接地线检查"]["promise"]
    # the owner's status line per mission, first on the page (no monitor of this point yet: said)
    assert new["missions"]["BBU接地线检查"]["status_line"] == "not yet verified: no monitor of this operating point yet"
    assert owner.post("/api/acceptances", json={"point": weaker_point, "words": "x" * 3}).status_code == 422
    nothing = owner.post("/api/acceptances", json={"point": "eval/old/operating_point.json",
                                                    "words": "accepted, it is weaker"})
    assert nothing.status_code == 409
    r = owner.post("/api/acceptances", json={"point": weaker_point, "words": "新摄像头上线一个月内接受较宽的漏检界限"})
    assert r.status_code == 200 and r.json()["by"] == "老板"
    from stage_b.rules import acceptances
    from stage_b.rules.operating_point import load_operating_point, point_keys
    keys = point_keys(project / weaker_point, load_operating_point(project / weaker_point))
    recorded = acceptances.recorded(project / weaker_point, keys)
    assert recorded["by"] == "老板" and recorded["words"] == "新摄像头上线一个月内接受较宽的漏检界限"
    points = {p["point"]: p for p in owner.get("/api/promises").json()["points"]}
    assert points[weaker_point]["acceptance"]["by"] == "老板"


def test_a_file_that_does_not_read_is_shown_as_its_error_never_as_a_promise(served):
    app, _, project, _ = served
    (project / "eval").mkdir()
    (project / "eval" / "operating_point.json").write_text("{not json", encoding="utf-8")
    (project / "days" / "monitor").mkdir(parents=True)
    (project / "days" / "monitor" / "monitor.json").write_text('{"format": 1}', encoding="utf-8")
    owner = client_of(app, "老板")
    (point,) = owner.get("/api/promises").json()["points"]
    assert "cannot read" in point["error"] and "no promise of this file holds" in point["error"]
    (monitor,) = owner.get("/api/monitor").json()["monitors"]
    assert monitor["file"] == "days/monitor/monitor.json" and monitor["error"]


def test_the_owner_sees_the_days_workload_and_its_price(db_url, tmp_path, synthetic):
    from review_app.access import Settings
    app, store, _, lines = build_app(db_url, tmp_path, synthetic, settings=Settings(cost_per_hour=60.0))
    owner = client_of(app, "老板")
    work = owner.get("/api/workload", params={"day": DAY}).json()
    assert work["rows"][-1][0] == "the day" and "30 s a decision" in work["pace"]
    assert work["cost"] == pytest.approx(60.0 * work["person_hours"], abs=0.01) and work["person_hours"] > 0
    store.close()
