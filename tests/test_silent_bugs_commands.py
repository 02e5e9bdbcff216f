"""Silent bugs in what `python -m stage_b.judge` and `python -m stage_b.evaluate` pair up (issue 27, classes 4, 5 and
11), caught through the commands themselves (their real argument parsers, Stage-A files, selection, run record,
output files), in process.

The model is not what these tests are about, so a stand-in (tests/helpers.py: StandInEngine, put in place by the
`engine` fixture of tests/conftest.py) takes the place of stage_b.generate.VerdictEngine (its two methods,
`generate(rows, prefixes=...)` and `verdict_logprobs(rows)`, as stage_b/generate.py defines them): it answers each
group from a table keyed by (mission, group id), with p_fail values far apart (0.02 at least), and notes every group
it is asked about. The real engine's p_fail is pinned in tests/test_judge.py; with the tiny
model every p_fail sits near 1.5e-6, which is why a value paired with the wrong group went unseen there.
"""
from __future__ import annotations

import json

import pytest

from stage_b import evaluate, judge
from stage_b.verdict import FAIL, PASS
from tests.helpers import A, B, EVAL_SEED, RUN_SPLIT, jsonl_records, overlap_ids, trained_run, write_stage_a_groups

pytestmark = pytest.mark.usefixtures("no_group_qc_environment")


# ---------------------------------------------------------------- class 4: the judge resumes by group identity
IDS = [f"QC-RS-20250101-{k}" for k in range(6)]   # one work order per id, photographed for both missions


@pytest.mark.parametrize("already", [
    {A: [IDS[4], IDS[1]], B: [IDS[0], IDS[5], IDS[2]]},   # out of input order, gaps before and after
    {A: [IDS[5]], B: [IDS[3], IDS[0]]},                    # only the last group; a later one before an earlier one
    {A: [], B: [IDS[2]]},                                  # one mission untouched, the other one group in
])
def test_the_judge_resumes_by_group_identity_not_by_position(tmp_path, engine, model, already):
    """Silent bug: the judge resuming by position (skipping the first k groups of the input when its verdicts file
    holds k lines) instead of by which groups the file holds. The kill -9 test cannot see it: a killed run's file
    always holds the first k groups in input order. Here the file holds groups out of input order: the resumed run
    must ask the model about exactly the missing groups of each mission, each once, keep the lines already there,
    and end with every group exactly once."""
    stage_a = write_stage_a_groups(tmp_path / "sa", {m: [(g, None) for g in IDS] for m in (A, B)})
    for m_index, m in enumerate((A, B)):
        for k, gid in enumerate(IDS):
            engine.P_FAIL[(m, gid)] = 0.05 + 0.15 * k + 0.04 * m_index
    args = ["--model", str(model), "--stage_a_dir", str(stage_a), "--mission", "all", "--threshold", "0.5",
            "--no_review", "--batch_size", "2"]
    assert judge.main([*args, "--output_dir", str(tmp_path / "full")]) == 0
    full = {m: {r["group_id"]: r for r in jsonl_records(judge.verdicts_path(tmp_path / "full", m))} for m in (A, B)}
    assert all(list(full[m]) == IDS for m in (A, B))

    resumed = tmp_path / "resumed"
    resumed.mkdir()
    for m, gids in already.items():   # what an earlier run, of the same command, left behind
        judge.verdicts_path(resumed, m).write_text(
            "".join(json.dumps(full[m][g], ensure_ascii=False) + "\n" for g in gids), encoding="utf-8")
    engine.asked.clear()
    assert judge.main([*args, "--output_dir", str(resumed)]) == 0

    for m in (A, B):
        missing = [g for g in IDS if g not in already[m]]
        asked = [g for method, mission, g in engine.asked if method == "verdict_logprobs" and mission == m]
        assert asked == missing, (m, asked)
        after = jsonl_records(judge.verdicts_path(resumed, m))
        assert after[:len(already[m])] == [full[m][g] for g in already[m]]     # kept as they were
        assert sorted(r["group_id"] for r in after) == sorted(IDS)           # every group, exactly once
        for r in after:                                                       # each with its own p_fail
            assert r["mission"] == m and r["p_fail"] == pytest.approx(engine.P_FAIL[(m, r["group_id"])], abs=1e-9)


# ---------------------------------------------------------------- class 5: evaluation pairs p_fail with its group
def test_each_prediction_carries_its_own_groups_p_fail(tmp_path, engine, model):
    """Silent bug: evaluation giving each prediction the previous row's p_fail (an off-by-one between the rows and
    the p_fail list, in verdict_probabilities or predictions_from_rows). The only earlier check compared p_fail
    with an absolute tolerance of 1e-5, and the tiny model's values all sit near 1.5e-6. Here every group's p_fail
    differs from every other's by 0.02 or more, one work order is in both missions, and each prediction, the curve's
    points and the verdicts must carry the value of their own (mission, group)."""
    ids = [f"QC-PF-20250101-{k}" for k in range(10)]
    stage_a = write_stage_a_groups(tmp_path / "sa", {m: [(g, "fail" if k % 2 else "pass") for k, g in enumerate(ids)]
                                              for m in (A, B)})
    for m_index, m in enumerate((A, B)):
        for k, gid in enumerate(ids):
            engine.P_FAIL[(m, gid)] = 0.04 + 0.09 * k + 0.02 * m_index
    out = tmp_path / "out"
    assert evaluate.main(["--model", str(model), "--stage_a_dir", str(stage_a), "--split", "all", "--no_review",
                          "--output_dir", str(out)]) == 0
    predictions = jsonl_records(out / "predictions.jsonl")
    assert len(predictions) == 20 and len({(p["mission"], p["group_id"]) for p in predictions}) == 20
    for p in predictions:
        own = engine.P_FAIL[(p["mission"], p["group_id"])]
        assert p["p_fail"] == pytest.approx(own, abs=1e-9), (p["mission"], p["group_id"], p["p_fail"], own)
        assert p["predicted"] == (FAIL if own >= 0.5 else PASS)
    metrics = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    for m in (A, B):
        expected = sorted((engine.P_FAIL[(m, g)], FAIL if k % 2 else PASS) for k, g in enumerate(ids))
        got = sorted(tuple(pt) for pt in metrics["operating_curve"]["points"][m])
        assert [e for _, e in got] == [e for _, e in expected]
        assert [p for p, _ in got] == pytest.approx([p for p, _ in expected], abs=1e-9)


# ---------------------------------------------------------------- class 11: one trained-on group is refused
@pytest.mark.parametrize("overlapping", [1, 2])
def test_evaluation_refuses_even_one_group_the_run_trained_on(tmp_path, engine, model, capsys, overlapping):
    """Silent bug: evaluation refusing an overlap with the training run's train split only when more than one
    trained-on group would be scored (every earlier test's overlap was several groups). With exactly one such group
    among the validation groups, `python -m stage_b.evaluate --adapters RUN/checkpoint-N` with another split seed
    must refuse (exit status 2, nothing written, the count named, the way out said); --allow_train_overlap scores
    it and the report says so; the run's own split scores with no overlap."""
    ids = overlap_ids(overlapping)
    for k, g in enumerate(ids):
        engine.P_FAIL[(A, g)] = 0.03 + 0.08 * k
    adapter = trained_run(tmp_path, ids)
    base = ["--model", str(model), "--adapters", str(adapter), "--no_review"]
    other_seed = ["--val_ratio", str(RUN_SPLIT[0]), "--split_seed", str(EVAL_SEED)]

    refused = tmp_path / "refused"
    assert evaluate.main([*base, *other_seed, "--output_dir", str(refused)]) == 2
    err = capsys.readouterr().err
    assert (f"{overlapping} of the {3 + overlapping} groups of the val split were in the training run's train "
            f"split") in err
    assert "--allow_train_overlap" in err
    assert not (refused / "predictions.jsonl").exists() and engine.asked == []

    allowed = tmp_path / "allowed"
    assert evaluate.main([*base, *other_seed, "--allow_train_overlap", "--output_dir", str(allowed)]) == 0
    metrics = json.loads((allowed / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["data"]["train_overlap"] == overlapping and metrics["overall"]["n"] == 3 + overlapping
    assert f"WARNING: {overlapping} of these groups were in the training run's train split" in \
        (allowed / "report.md").read_text(encoding="utf-8")

    own = tmp_path / "own"
    assert evaluate.main([*base, "--output_dir", str(own)]) == 0   # the run's split: its validation groups only
    assert json.loads((own / "metrics.json").read_text(encoding="utf-8"))["data"]["train_overlap"] == 0

