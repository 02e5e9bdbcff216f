"""Reviewers measured (issue 35 item 4): the split of the day's review with a blind overlap (stage_b.labels.assign),
Cohen's
kappa with its interval (stage_b.labels.agreement: its standard error checked against simulation, its interval's
coverage
too), and labels of a reviewer below the agreement bar kept out of promises until a second reviewer confirms them."""
from __future__ import annotations

import random
import statistics

import pytest

from stage_b.labels.agreement import MIN_PAIRED, kappa, pairwise, quality
from stage_b.labels.assign import AssignError, assignees, check_overlap_share, check_reviewers
from stage_b.labels.resolve import review_of
from stage_b.rules.routes import evidence_weight, why_not_fair

P, F = "通过", "不通过"


@pytest.mark.parametrize("pairs, expected", [
    ([(P, P)] * 5 + [(F, F)] * 5, 1.0),                         # perfect agreement
    ([(P, F)] * 5 + [(F, P)] * 5, -1.0),                        # perfect disagreement, balanced
    # 20 pairs: agree 15 (10 PP, 5 FF); p_o 0.75, rows 12/8, cols 13/7 -> p_e (12*13 + 8*7) / 400 = 0.53
    ([(P, P)] * 10 + [(F, F)] * 5 + [(P, F)] * 2 + [(F, P)] * 3, (0.75 - 0.53) / (1 - 0.53)),
    ([(P, P)] * 8, None),                                       # one answer only: chance agreement 1, undefined
    ([], None),
])
def test_kappa_is_cohens(pairs, expected):
    k = kappa(pairs)
    assert k["n"] == len(pairs)
    assert (k["kappa"] is None) if expected is None else k["kappa"] == pytest.approx(expected, abs=1e-12)


def _two_raters(rng, n, truth_fail=0.3, flip=(0.05, 0.2)):
    """Two reviewers over n groups: each reports the truth, flipped with their own probability."""
    out = []
    for _ in range(n):
        truth = F if rng.random() < truth_fail else P
        a, b = ((truth if rng.random() >= e else (P if truth == F else F)) for e in flip)
        out.append((a, b))
    return out


@pytest.mark.parametrize("truth_fail, flip", [
    (0.3, (0.05, 0.2)),
    # a careful reviewer beside a careless one (never wrong / wrong 30% of the time), few defects: Cohen's simpler
    # p_o (1 - p_o) / (n (1 - p_e)^2) is 37% too wide here; Fleiss-Cohen-Everitt's is within 5%
    (0.1, (0.0, 0.3)),
])
def test_the_standard_error_matches_the_spread_of_kappa_over_repeated_days(truth_fail, flip):
    """Fleiss-Cohen-Everitt's large-sample SE against the standard deviation of kappa over 1,500 simulated days of
    400 paired groups: within 8%."""
    rng = random.Random(1)
    days = [kappa(_two_raters(rng, 400, truth_fail, flip)) for _ in range(1500)]
    spread = statistics.stdev(d["kappa"] for d in days)
    assert statistics.mean(d["se"] for d in days) == pytest.approx(spread, rel=0.08)


@pytest.mark.parametrize("n", [60, 300])
def test_the_95_percent_interval_covers_the_true_kappa_about_95_percent_of_the_time(n):
    rng = random.Random(n)
    truth = kappa(_two_raters(random.Random(99), 200_000))["kappa"]   # the population's, to about 0.003
    covered = sum(lo <= truth <= hi for lo, hi in (kappa(_two_raters(rng, n))["ci95"] for _ in range(1000)))
    assert 0.92 <= covered / 1000 <= 0.975, covered


@pytest.mark.parametrize("value, message", [
    ("x", "not a number"), ("-1", "out of range"), ("1.5", "out of range"), ("nan", "out of range"),
])
def test_an_overlap_share_that_is_not_a_share_is_refused_naming_it(value, message):
    with pytest.raises(AssignError, match=message) as err:
        check_overlap_share(value, ["a", "b"])
    assert value in str(err.value)


def test_the_edges_of_the_overlap_share_and_the_reviewers_list():
    assert check_overlap_share("0", ["a"]) == 0.0 and check_overlap_share("1", ["a", "b"]) == 1.0
    with pytest.raises(AssignError, match="two reviewers at least"):
        check_overlap_share("0.1", ["a"])
    for bad, message in [("a,,b", "not a reviewer's name"), ("a,a", "twice"), ("a,\x1b[2J", "not a reviewer's name")]:
        with pytest.raises(AssignError, match=message):
            check_reviewers(bad)
    assert check_reviewers(" 王工 , 李工") == ["王工", "李工"] and check_reviewers("") == []


@pytest.mark.parametrize("share", [0.0, 0.1, 1.0])
def test_the_split_is_even_and_the_overlap_is_a_random_share_of_it(share):
    reviewers = ["a", "b", "c"]
    drawn = [assignees(reviewers, share, 7, "m", f"QC-{k}") for k in range(6000)]
    assert drawn == [assignees(reviewers, share, 7, "m", f"QC-{k}") for k in range(6000)]   # the seed fixes it
    twice = sum(len(d) == 2 for d in drawn) / len(drawn)
    assert twice == pytest.approx(share, abs=0.02) and all(len(set(d)) == len(d) for d in drawn)
    load = {r: sum(r in d for d in drawn) / len(drawn) for r in reviewers}
    assert all(v == pytest.approx((1 + share) / 3, abs=0.03) for v in load.values()), load


def decided_badges(k_bad: int):
    """30 groups decided by a and b (b flips k_bad of them) and by c alone."""
    out = {}
    for g in range(30):
        truth = F if g % 3 == 0 else P
        flipped = (P if truth == F else F) if g < k_bad else truth
        out[("m", f"g{g}")] = {"a": truth, "b": flipped}
    out[("m", "solo")] = {"c": P}
    return out


def test_a_reviewer_below_the_bar_certifies_nothing_unless_confirmed():
    agreement = pairwise(decided_badges(k_bad=12))
    k = agreement["m"][("a", "b")]
    assert k["n"] == 30 >= MIN_PAIRED and k["kappa"] < 0.6
    bar = quality(agreement, 0.6)["m"]
    assert bar["a"]["status"] == bar["b"]["status"] == "below the bar" and "c" not in bar   # c: unmeasured
    line = {"p_fail": 0.5, "verdict": P, "route": "review", "review_scope": "mission"}   # every group reviewed
    alone = review_of(line, [{"reviewer": "b", "decision": F, "decided_at": "t"}], bar)
    assert alone["certifies"] is False and evidence_weight(alone) is None and "b, whose kappa" in why_not_fair(alone)
    confirmed = review_of(line, [{"reviewer": "a", "decision": F, "decided_at": "t"},
                               {"reviewer": "b", "decision": F, "decided_at": "t"}], bar)
    assert "certifies" not in confirmed and evidence_weight(confirmed) == 1.0
    unmeasured = review_of(line, [{"reviewer": "c", "decision": P, "decided_at": "t"}], bar)
    assert "certifies" not in unmeasured
    assert quality(pairwise(decided_badges(k_bad=0)), 0.6)["m"]["a"]["status"] == "ok"


def test_the_import_reports_kappa_and_keeps_a_weak_reviewers_lone_labels_out_of_promises(tmp_path, capsys):
    import json

    from qc_core.jsonl import file_sha256, record_digest, write_jsonl_atomic
    from qc_core.missions import load_registry
    from stage_b.labels.decisions import main
    from stage_b.labels.decision_lines import decision_line
    mission = load_registry().select("all")[0].name
    records = [{"group_id": f"QC-{k}", "mission": mission, "label": None, "images": ["1.jpg"],
                "per_image": {"图片_1": "接地线×1/已捆扎"}, "model": "/sa", "created_at": "2026-11-27T00:00:00+00:00"}
               for k in range(31)]
    write_jsonl_atomic(tmp_path / "sa.jsonl", records)
    source = {"file": str(tmp_path / "sa.jsonl"), "sha256": file_sha256(tmp_path / "sa.jsonl")}
    decided = decided_badges(k_bad=12)
    for who in ("a", "b"):
        lines = [decision_line(r, decided[("m", f"g{k}")][who], who, source, seen=record_digest(r),
                               decided_at="2026-11-27T10:00:00+00:00") for k, r in enumerate(records[:30])]
        if who == "b":   # and one group b alone decides
            lines.append(decision_line(records[30], F, "b", source, seen=record_digest(records[30]),
                                       decided_at="2026-11-27T10:00:00+00:00"))
        write_jsonl_atomic(tmp_path / f"{who}.jsonl", lines)
    assert main(["--decisions", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"), "--output_dir",
                 str(tmp_path / "labels")]) == 0
    out, err = capsys.readouterr()
    assert f"{mission}: a and b both decided 30 group(s) (0 more with an unsure): agreed on 18, Cohen's kappa" in out
    assert f"{mission}: b agreed with the others on 18 of 30 (60.0%)" in out
    # no gold: the reviewer table cannot say which of the two is wrong, so it names neither; the kappa fragment holds
    # both reviewers' lone labels in this mission back, said as such (stage_b.labels.reviewer_quality)
    for who in ("a", "b"):
        assert (f"{mission}: {who}'s lone labels in this mission certify nothing until a second reviewer confirms them "
                f"({who}, whose kappa") in err and f"\n{who} is below the bar" not in err
    labels = {r["group_id"]: r for r in map(json.loads, (tmp_path / "labels" / f"{mission}_stage_a.jsonl").read_text(
        encoding="utf-8").splitlines())}
    assert labels["QC-30"]["review"]["certifies"] is False                     # b alone: kept, certifies nothing
    assert all("certifies" not in r["review"] for g, r in labels.items() if g != "QC-30")   # both agreed: confirmed


def _pair(kappa, n=12):
    return {"kappa": kappa, "n": n}


@pytest.mark.parametrize("what, agreement, gold, expected", [
    ("each reviewer keeps their lowest kappa: two below the bar with c, fine with each other",
     {"m": {("a", "b"): _pair(0.95), ("a", "c"): _pair(0.3), ("b", "c"): _pair(0.35)}}, None,
     {"a": "below the bar", "b": "below the bar", "c": "below the bar"}),
    ("a low gold score overrides an ok kappa (2 of 6 right)",
     {"m": {("a", "b"): _pair(0.95)}}, {"m": {"a": {"n": 6, "correct": 2, "unsure": 0}}},
     {"a": "below the bar", "b": "ok"}),
    ("an ok gold score never lifts a low kappa",
     {"m": {("a", "b"): _pair(0.2)}}, {"m": {"a": {"n": 6, "correct": 6, "unsure": 0}}},
     {"a": "below the bar", "b": "below the bar"}),
])
def test_the_reviewer_bar(what, agreement, gold, expected):
    from stage_b.labels.agreement import quality
    bar = quality(agreement, 0.6, gold, 0.8)
    assert {r: q["status"] for r, q in bar["m"].items()} == expected, what


def test_unsure_answers_on_gold_are_neither_right_nor_wrong():
    from stage_b.labels.agreement import gold_scores
    groups = {("m", f"g{k}"): {"record": {"gold": {"label": "fail"}}, "decisions": [
        {"reviewer": "a", "decision": "unsure" if k < 5 else "不通过"}]} for k in range(7)}
    assert gold_scores(groups)["m"]["a"] == {"n": 2, "correct": 2, "unsure": 5}
