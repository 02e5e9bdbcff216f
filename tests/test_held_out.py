"""Which groups a run trained on, exactly: groups labelled since (reviewers' decisions on new work orders) are held
out, whatever the run's hash split says of their ids; `--split held_out` scores them with the run's validation
groups, so an operating point can be certified again on them. Through `group-qc evaluate` in process, with
the stand-in engine of tests/helpers.py (the model is not what is tested)."""
from __future__ import annotations

import json

import pytest

from stage_b import evaluate
from stage_b.data.split import split_of
from tests.helpers import A, EVAL_SEED, RUN_SPLIT, overlap_ids, trained_run, write_stage_a_groups

pytestmark = pytest.mark.usefixtures("no_group_qc_environment")


def _new_groups(n_train_hashed: int, n_val_hashed: int) -> list[str]:
    """Ids never seen by the run: some its split would call train, some val."""
    out, want = {"train": [], "val": []}, {"train": n_train_hashed, "val": n_val_hashed}
    for k in range(10_000):
        gid = f"QC-NEW-20251127-{k}"
        side = split_of(gid, *RUN_SPLIT)
        if len(out[side]) < want[side]:
            out[side].append(gid)
        if all(len(out[s]) == n for s, n in want.items()):
            return out["train"] + out["val"]
    raise AssertionError("not enough ids")


def _scored(folder) -> set[str]:
    return {json.loads(line)["group_id"]
            for line in (folder / "predictions.jsonl").read_text(encoding="utf-8").splitlines()}


def test_groups_labelled_since_are_held_out_and_scored_with_the_runs_validation_groups(tmp_path, engine, model,
                                                                                        capsys):
    ids = overlap_ids(2)
    adapter = trained_run(tmp_path, ids)
    run_val = {g for g in ids if split_of(g, *RUN_SPLIT) == "val"}
    new = _new_groups(3, 1)
    labels = write_stage_a_groups(tmp_path / "labels", {A: [(g, "fail") for g in new]})
    for k, g in enumerate(ids + new):
        engine.P_FAIL[(A, g)] = 0.05 + 0.04 * k
    base = ["--model", str(model), "--adapters", str(adapter), "--no_review"]
    # the new groups alone, every one of them: the run never saw them, though its split calls 3 of them train
    alone = tmp_path / "alone"
    assert evaluate.main([*base, "--stage_a_dir", str(labels), "--split", "all", "--output_dir", str(alone)]) == 0
    assert _scored(alone) == set(new)
    # held_out: the run's validation groups and the new ones, never a group it trained on
    both = tmp_path / "both"
    files = f"{tmp_path / 'sa'}/*.jsonl,{labels}/*.jsonl"
    assert evaluate.main([*base, "--stage_a_files", files, "--split", "held_out", "--target_miss_rate", "0.5",
                          "--output_dir", str(both)]) == 0
    assert _scored(both) == run_val | set(new)
    assert json.loads((both / "operating_point.json").read_text(encoding="utf-8"))["data"]["split"] == "held_out"
    assert "it trained on left out" in capsys.readouterr().out


def test_when_the_runs_input_changed_the_hash_split_decides_and_errs_towards_refusing(tmp_path, engine, model,
                                                                                      capsys):
    ids = overlap_ids(2)
    adapter = trained_run(tmp_path, ids)
    new = _new_groups(1, 0)
    # appended to the run's own file: its ids are unknown now
    write_stage_a_groups(tmp_path / "sa", {A: [(new[0], "fail")]})
    engine.P_FAIL.update({(A, g): 0.1 for g in ids + new})
    out = tmp_path / "out"
    assert evaluate.main(["--model", str(model), "--adapters", str(adapter), "--no_review", "--split", "all",
                          "--output_dir", str(out)]) == 2
    assert "were in the training run's train split" in capsys.readouterr().err


def test_held_out_needs_a_training_run(tmp_path, engine, model, capsys):
    labels = write_stage_a_groups(tmp_path / "labels", {A: [("QC-X-1", "fail")]})
    assert evaluate.main(["--model", str(model), "--stage_a_dir", str(labels), "--split", "held_out", "--no_review",
                          "--output_dir", str(tmp_path / "o")]) == 2
    assert "--split held_out means the groups a training run did not train on" in capsys.readouterr().err


def test_a_model_merged_from_a_runs_adapter_obeys_the_run(tmp_path, engine, model, capsys):
    """`swift export --merge_lora true` writes <run>/checkpoint-N-merged: evaluating that merged model (no adapters)
    must still refuse the groups the run trained on."""
    import json as _json
    ids = overlap_ids(1)
    adapter = trained_run(tmp_path, ids)
    merged = adapter.parent / f"{adapter.name}-merged"
    merged.mkdir()
    (merged / "config.json").write_text(_json.dumps({"model_type": "qwen2_5_vl"}), encoding="utf-8")
    engine.P_FAIL.update({(A, g): 0.2 for g in ids})
    assert evaluate.main(["--model", str(merged), "--no_review", "--val_ratio", str(RUN_SPLIT[0]), "--split_seed",
                          str(EVAL_SEED), "--output_dir", str(tmp_path / "o")]) == 2
    assert "were in the training run's train split" in capsys.readouterr().err
    assert evaluate.main(["--model", str(merged), "--no_review", "--output_dir", str(tmp_path / "own")]) == 0


def test_a_promise_rests_on_its_latest_decision_and_weights_are_looked_up_by_mission_and_group():
    """evidence_through is the latest reviewer decision (not the earliest); one work order id in two missions keeps
    each mission's own review record and weight."""
    from stage_b.evaluate.held_out import promise_basis, with_evidence
    def record(gid, mission, probability, day):
        return {"group_id": gid, "mission": mission, "model": "sa",
                "review": {"route": "audit", "audit_probability": probability,
                           "decided_at": f"2026-11-{day}T09:00:00+00:00"}}
    records = [record("QC-1", "A", 0.5, 27), record("QC-2", "A", 0.5, 28), record("QC-1", "B", 0.25, 26)]
    basis = promise_basis(records, {("A", "QC-1"), ("A", "QC-2"), ("B", "QC-1")})
    assert basis["A"]["evidence_through"] == "2026-11-28T09:00:00+00:00"
    predictions = [{"group_id": "QC-1", "mission": "A"}, {"group_id": "QC-1", "mission": "B"}]
    assert [p["evidence"]["weight"] for p in with_evidence(predictions, records)] == [2.0, 4.0]


# planted-bug test (issue 27, class 11): one trained-on group is refused
@pytest.mark.parametrize("overlapping", [1, 2])
def test_evaluation_refuses_even_one_group_the_run_trained_on(tmp_path, engine, model, capsys, overlapping):
    """Silent bug: evaluation refusing an overlap with the training run's train split only when more than one
    trained-on group would be scored (every earlier test's overlap was several groups). With exactly one such group
    among the validation groups, `group-qc evaluate --adapters RUN/checkpoint-N` with another split seed
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


# planted-bug test (issue 36)
M, N = "BBU接地线检查", "挡风板安装检查"


def test_held_out_leaves_out_a_trained_group_of_its_mission_only():
    from stage_b.evaluate import without_trained
    rows = [{"group_id": "QC-1", "mission": M}, {"group_id": "QC-1", "mission": N}, {"group_id": "QC-2", "mission": M}]
    assert without_trained(rows, [{"group_id": "QC-1", "mission": M}]) == rows[1:]
