"""Predictions: scored from replies (one per group), and read back from the three formats a file may hold
(ours, `swift infer` results, group_qc_val rows with chat completions), every line checked."""
from __future__ import annotations

from pathlib import Path
from typing import TypedDict

from qc_core.errors import UserError
from qc_core.jsonl import JsonlError, iter_jsonl
from qc_core.missions import MissionError, load_registry

from stage_b.data.dataset import row_mode
from stage_b.contract.grounding import ground
from stage_b.rules.point_check import OperatingPointError, check_rate
from stage_b.train.rewards import REWARDS
from stage_b.contract.verdict import FAIL, PASS, parse

PREDICTION_FIELDS = ("group_id", "mission", "expected", "completion", "summaries")


class GroundingRecord(TypedDict):
    """A reply's grounding as a prediction stores it (stage_b.contract.grounding.Grounding): photos by number."""
    cited: list[int]
    defect_photos: list[int]
    contradiction: bool
    wrong_citations: list[int]


class Evidence(TypedDict):
    """What a prediction weighs in a promise's bound (stage_b.evaluate.held_out.with_evidence, stage_b.rules.routes)."""
    weight: float | None        # None: not a fair sample, left out of the bound
    why_not: str | None
    route: str | None           # how the group reached a reviewer (its labelled record's review), None: original labels
    decided_at: str | None


class _PredictionFields(TypedDict):
    group_id: str
    mission: str
    expected: str               # 通过 or 不通过: the label
    predicted: str | None       # the verdict read from the completion (None: not a verdict)
    completion: str
    rewards: dict[str, float]   # every reward of stage_b.train.rewards.REWARDS
    grounding: GroundingRecord
    summaries: list[str]


class Prediction(_PredictionFields, total=False):
    """One line of predictions.jsonl, as score_prediction writes it (and with_evidence adds `evidence` to)."""
    mode: str                   # what the model read: summaries, or summaries+photos
    p_fail: float               # absent when the verdict probabilities were not scored
    error: str                  # why the model could not be asked (an empty completion, counted wrong)
    evidence: Evidence

class EvaluationError(UserError):
    pass

def score_prediction(group_id, mission, expected, completion, summaries, error: str | None = None,
                     p_fail: float | None = None, mode: str | None = None) -> Prediction:
    """One predictions.jsonl record: the verdict read from the completion, every reward, the reason's grounding
    (stage_b.contract.grounding: photos cited, photos whose summary shows a defect, contradiction, wrong citations), and
    p_fail when the verdict probabilities were scored. A group the model could not be asked about has an empty
    completion and its `error`: no verdict, no p_fail, counted wrong."""
    kwargs = {"solution": [expected], "summaries": [summaries], "mission": [mission]}
    g = ground(completion, summaries, mission)
    record: Prediction = {
        "group_id": group_id, "mission": mission, "expected": expected, "predicted": parse(completion).verdict,
        "completion": completion, "rewards": {name: func([completion], **kwargs)[0] for name, func in REWARDS.items()},
        "grounding": {"cited": list(g.cited), "defect_photos": list(g.defect_photos),
                      "contradiction": g.contradiction, "wrong_citations": list(g.wrong_citations)},
        "summaries": summaries}
    if mode:   # what the model read: summaries, or summaries+photos (photo-aware Stage-B)
        record["mode"] = mode
    if p_fail is not None:
        record["p_fail"] = p_fail
    return {**record, "error": error} if error else record

def predictions_from_rows(rows: list[dict], completions: list[str], errors: dict[int, str] | None = None,
                          p_fails: list[float | None] | None = None) -> list[Prediction]:
    errors = errors or {}
    return [score_prediction(r["group_id"], r["mission"], r["solution"], c, r["summaries"], errors.get(i),
                             None if errors.get(i) or not p_fails else p_fails[i], row_mode(r))
            for i, (r, c) in enumerate(zip(rows, completions))]

# What --predictions reads, told apart by the first record: our own predictions.jsonl; `swift infer --val_dataset
# group_qc_val --result_path F` (ms-swift's infer pipeline writes {"response", "labels", "logprobs", **row} with the
# plugin's row columns messages, solution, mission, group_id, summaries, plus "dataset"); or group_qc rows each
# carrying an OpenAI-style chat completion from `swift deploy` (under "response", or its "choices" merged in).
OURS, SWIFT_INFER, OPENAI = "group-qc predictions", "ms-swift infer results", "OpenAI chat completions (swift deploy)"

DATASET_FIELDS = ("group_id", "mission", "solution", "summaries")   # a group_qc_val row's columns we need

def _format_of(rec: dict) -> str | None:
    if "completion" in rec or "expected" in rec:
        return OURS
    if "infer_request" in rec:
        return "swift deploy request log"
    if isinstance(rec.get("response"), dict) or "choices" in rec:
        return OPENAI
    if "response" in rec:
        return SWIFT_INFER
    return None

def _chat_text(rec: dict):
    """The reply in an OpenAI chat completion (choices[0].message.content), or None."""
    body = rec["response"] if isinstance(rec.get("response"), dict) else rec
    try:
        return body["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        return None

def _as_ours(rec: dict, fmt: str, where: str) -> dict:
    """A record of any readable format as our prediction fields (group_id, mission, expected, completion,
    summaries[, p_fail, error])."""
    if fmt == OURS:
        missing = [f for f in PREDICTION_FIELDS if f not in rec]
        if missing:
            raise EvaluationError(f"{where}: missing field(s) {', '.join(missing)}; expected "
                                  f"{', '.join(PREDICTION_FIELDS)}")
        return rec
    missing = [f for f in DATASET_FIELDS if f not in rec]
    if missing:
        raise EvaluationError(f"{where}: {fmt} record without {', '.join(missing)}; each line must carry a "
                              f"group_qc dataset row's {', '.join(DATASET_FIELDS)} (solution: the expected verdict), "
                              f"as `swift infer --external_plugins swift_plugins/qc_plugin.py --val_dataset "
                              f"group_qc_val --result_path FILE` writes them")
    text = rec["response"] if fmt == SWIFT_INFER else _chat_text(rec)
    if not isinstance(text, str):
        raise EvaluationError(f"{where}: no reply text in this {fmt} record (expected "
                              + ("a string under response" if fmt == SWIFT_INFER else
                                 "choices[0].message.content, under response or at the top level") + ")")
    return {"group_id": rec["group_id"], "mission": rec["mission"], "expected": rec["solution"],
            "completion": text, "summaries": rec["summaries"], "mode": row_mode(rec)}   # the row's images column

def read_prediction_file(path: Path) -> tuple[list[Prediction], str]:
    """Re-scored predictions from a file (verdicts and rewards recomputed from the raw completions), and which
    tool wrote it (OURS, SWIFT_INFER or OPENAI, told by the first record; every record must match it)."""
    if not path.is_file():
        raise EvaluationError(f"predictions file {path} does not exist")
    try:
        records = list(iter_jsonl(path, allow_torn_tail=False))
    except JsonlError as exc:
        raise EvaluationError(f"{exc} (a torn last line means the run that wrote it was killed: rerun "
                              f"evaluate with the model)") from None
    out: list[Prediction] = []
    first = None
    seen: dict[tuple[str, str], int] = {}   # (mission, group id): its line
    registry = load_registry()
    for line_no, rec in records:
        fmt = _format_of(rec)
        if fmt is None or fmt == "swift deploy request log":
            raise EvaluationError(
                f"{path}:{line_no}: not a predictions record: " + (
                    "swift deploy's --result_path log has no group id or expected verdict; score with `swift infer "
                    "--val_dataset group_qc_val --result_path FILE`, or save each group_qc_val row with its chat "
                    "completion under response" if fmt else
                    f"expected {', '.join(PREDICTION_FIELDS)} (group-qc evaluate), or response and "
                    f"{', '.join(DATASET_FIELDS)} (swift infer --val_dataset group_qc_val --result_path)"))
        if first is None:
            first = fmt
        elif fmt != first:
            raise EvaluationError(f"{path}:{line_no}: a record of {fmt}, but line {records[0][0]} is {first}: a "
                                  f"file mixing formats (two tools writing one file?) is not scored; keep one format")
        rec = _as_ours(rec, fmt, f"{path}:{line_no}")
        rec = {**rec, "mission": _checked_row(rec, f"{path}:{line_no}", registry)}
        key = (rec["mission"], rec["group_id"])
        if key in seen:   # counted twice, it would weigh twice in every rate
            raise EvaluationError(f"{path}:{line_no}: group {rec['group_id']} of {rec['mission']} already at line "
                                  f"{seen[key]}; keep one prediction per group"
                                  + ("; swift infer appends to an existing --result_path: delete the file before "
                                     "rerunning" if fmt == SWIFT_INFER else ""))
        seen[key] = line_no
        p_fail = rec.get("p_fail")
        if p_fail is not None:
            if isinstance(p_fail, bool) or not isinstance(p_fail, (int, float)):
                raise EvaluationError(f"{path}:{line_no}: p_fail {p_fail!r} is not a number; a prediction's p_fail is "
                                      f"a probability from 0 to 1, or absent")
            try:
                p_fail = check_rate(p_fail, "p_fail")
            except OperatingPointError as exc:
                raise EvaluationError(f"{path}:{line_no}: {exc}") from None
        out.append(score_prediction(rec["group_id"], rec["mission"], rec["expected"], rec["completion"],
                                    rec["summaries"], rec.get("error"), p_fail, rec.get("mode")))
    return out, first or OURS

def _checked_row(rec: dict, where: str, registry) -> str:
    """A prediction row's types and mission (the canonical name of a known mission, so an alias and its name are one
    mission); EvaluationError naming the line and the field otherwise."""
    if not isinstance(rec["group_id"], str) or not rec["group_id"]:
        raise EvaluationError(f"{where}: group_id must be a non-empty string, got {rec['group_id']!r}")
    if rec["expected"] not in (PASS, FAIL):
        raise EvaluationError(f"{where}: expected must be 通过 or 不通过, got {rec['expected']!r}")
    if not isinstance(rec["completion"], str):
        raise EvaluationError(f"{where}: completion must be the model's reply as text, got "
                              f"{type(rec['completion']).__name__} {str(rec['completion'])[:40]!r}")
    if not isinstance(rec["summaries"], list) or not all(isinstance(x, str) for x in rec["summaries"]):
        raise EvaluationError(f"{where}: summaries must be a list of texts (图片_1, 图片_2, …)")
    try:
        return registry.resolve(rec["mission"] if isinstance(rec["mission"], str) else "").name
    except MissionError as exc:
        raise EvaluationError(f"{where}: {exc}") from None

def read_predictions(path: Path) -> list[Prediction]:
    """Re-scored predictions from a file of any format read_prediction_file reads."""
    return read_prediction_file(path)[0]
