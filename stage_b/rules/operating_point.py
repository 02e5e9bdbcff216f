"""From verdict probabilities to thresholds a QC owner can sign for. Pure (math/json, scipy through certify).

`p_fail` is the model's probability of the first line `不通过` against `通过`, from the log-probabilities of
both whole lines (stage_b.model.generate.VerdictEngine.verdict_logprobs), normalised over the two.

The rule, stated once here so that anyone can recompute it from predictions.jsonl (`MissionPoint.decide` applies it):
  - the verdict at threshold t is 不通过 iff p_fail >= t;
  - p_fail values closer than P_FAIL_TIE (2^-20) are ties (the same summaries scored twice differ by ~1e-8 in float32
    with another batch): validation p_fails are grouped into runs whose neighbours are at most 2 P_FAIL_TIE apart,
    and the candidates are each run's smallest value minus P_FAIL_TIE, plus 1.0 (which fails nothing but a p_fail
    of 1; left out when a validation p_fail is within P_FAIL_TIE of it). So no threshold separates ties and none
    lies within P_FAIL_TIE of a validation p_fail: a group scored again a little lower keeps its side;
  - the auto-pass threshold t is the largest candidate whose exact one-sided Clopper-Pearson upper bound, at the
    confidence C, of the validation miss rate (defective groups with p_fail < t, over defective groups) is <= the
    target R (stage_b.stats.certify). Such a t exists iff the mission has at least `fail_groups_needed` defective
    validation groups: then the mission is `certified`. When none does, t is the point rule (the largest
    candidate whose measured miss rate is <= R) so the file stays usable, and the mission is not certified;
  - a mission without defective validation groups has no miss rate: no threshold, not certified;
  - with a target overkill rate O, the auto-fail threshold t_fail is the smallest candidate whose bound on the
    overkill rate (good groups with p_fail >= t_fail, over good groups) is <= O, raised to t when below it; when no
    candidate certifies O, nothing is auto-failed (t_fail is None). Without O, t_fail = t (two-way decision);
  - the review margin m: the distances |p_fail - t| of the validation groups t gets wrong, sorted; m is the
    smallest distance that covers `review_share` of them, plus P_FAIL_TIE (0, no band, when t gets none wrong);
  - a group is decided automatically iff its mission is certified (or uncertified decisions are allowed),
    p_fail < t or p_fail >= t_fail, and |p_fail - t| > m; every other group needs a person's review, with the
    reasons why. The automation share is the share of groups decided automatically.

This module is the record (MissionPoint, OperatingPoint: read, checked, decided with, written back as read) and its
file; the procedures are stage_b.stats.thresholds, the computation from predictions stage_b.rules.calibrate, the
checks of a file's values stage_b.rules.point_check, the sentences stage_b.rules.promise_texts.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from qc_core.jsonl import read_json_file
from qc_core.paths import resolved
from stage_b.contract.numbers import fmt_p
from stage_b.contract.verdict import FAIL, PASS
from stage_b.rules.point_check import OperatingPointError, check_confidences, check_promise, rate_or_none
from stage_b.rules.promise_texts import overkill_promise_text, promise_text
from stage_b.stats.thresholds import verdict_at
from stage_b.rules.point_identity import PointKeys, keys_of

OPERATING_POINT_FORMAT = 2
DEFAULT_REVIEW_SHARE = 0.8
# what a promise's groups are called, by the split it was certified on (data.split)
EVIDENCE = {"val": "validation", "held_out": "held-out (validation and reviewed work orders)"}
UNCALIBRATED_THRESHOLD = 0.5   # a mission with no threshold at all: the model's own choice, and always reviewed
RULE = ("verdict is 不通过 iff p_fail >= threshold; candidates: each run of validation p_fails within 2 x 2^-20 of "
        "one another (ties), its smallest minus 2^-20, and 1.0; threshold = the largest candidate whose exact "
        "one-sided Clopper-Pearson upper bound at `confidence` of the validation miss rate is <= target_miss_rate "
        "(certified), else the largest whose measured miss rate is (not certified); threshold_fail = the smallest "
        "whose bound on the overkill rate is <= target_overkill_rate (None: nothing auto-fails); a group is decided "
        "without review iff its mission is certified, p_fail < threshold or p_fail >= threshold_fail, and "
        "|p_fail - threshold| > review_margin")


def p_fail(logprobs: dict[str, float]) -> float:
    """P(不通过 line) / (P(不通过 line) + P(通过 line)) from the two lines' log-probabilities, without overflow."""
    diff = logprobs[PASS] - logprobs[FAIL]
    if diff > 0:
        e = math.exp(-diff)
        return e / (1.0 + e)
    return 1.0 / (1.0 + math.exp(diff))


@dataclass(frozen=True)
class Decision:
    """What the rule does with one group: the verdict line, and why a person must review it (empty: decided
    automatically). `mission_why`: reasons that send every group of the mission to review (no threshold, not
    certified), so the group was not chosen by its own score; `group_why`: reasons of this group's own p_fail."""
    verdict: str
    mission_why: tuple[str, ...] = ()
    group_why: tuple[str, ...] = ()

    @property
    def why(self) -> tuple[str, ...]:
        return self.mission_why + self.group_why

    @property
    def automatic(self) -> bool:
        return not self.why


@dataclass(frozen=True)
class MissionPoint:
    """One mission's decision point: an entry of operating_point.json's `missions` (or its pooled `overall`), what
    thresholds_for makes of a mission the file has no threshold for, or `--threshold T`'s (manual_point). The keys the
    rule and the promise checks read are fields; every other key of a file's entry (its rates, automation, left_out,
    …) is kept in `extra`, and `keys` is the entry's key order, so that to_json writes back the entry as it was read."""
    threshold: float | None        # None: no calibration at all (decide: the model's own choice, always reviewed)
    threshold_fail: float | None   # None: nothing is auto-failed
    review_margin: float
    certified: bool
    promise: str
    why_none: str | None = None    # why there is no threshold (with threshold None)
    source: str | None = None      # where the point came from (the file, "--threshold", "none"); not in the file
    confidence: float | None = None
    target_miss_rate: float | None = None
    target_overkill_rate: float | None = None
    overkill_certified: bool = False
    weighted: bool = False
    n_fail: int | None = None
    misses: int | None = None
    n_pass: int | None = None
    auto_overkills: int | None = None
    miss_effective_counts: list | None = None
    escape: dict | None = None     # the escape rate of auto-passed groups (escape_rate): what the monitor holds work to
    profile: dict | None = None    # the validation p_fails the monitor's drift check compares with (profile_of)
    stage_a: dict | None = None    # the Stage-A models the promise rests on and its evidence_through
    extra: dict = field(default_factory=dict)
    keys: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, entry, where: str, evidence_groups: int | None = None) -> MissionPoint:
        """A file's mission entry, its types, ranges and promises checked; `where` ("FILE: MISSION") names it in
        every refusal. A key the rule reads that is missing is refused, never read as a default. `evidence_groups`:
        for the pooled `overall` entry, the groups the missions' profiles name together (its own profile is theirs)."""
        if not isinstance(entry, dict):
            raise OperatingPointError(f"{where}: the entry is {entry!r}, not an object; recompute the file")
        rate_or_none(entry.get("threshold"), f"{where}: threshold")
        rate_or_none(entry.get("threshold_fail"), f"{where}: threshold_fail")
        rate_or_none(entry.get("review_margin", 0.0), f"{where}: review_margin")
        if not isinstance(entry.get("certified"), bool):
            raise OperatingPointError(f"{where}: certified is {entry.get('certified')!r}, not true or false; "
                                      f"recompute the file")
        required = ENTRY_KEYS + (("why_none",) if entry.get("threshold") is None else ())
        missing = [key for key in required if key not in entry]
        if missing:
            raise OperatingPointError(f"{where}: no {', '.join(missing)} (a mission entry holds "
                                      f"{', '.join(ENTRY_KEYS)}, and why_none when threshold is null); recompute "
                                      f"the file with group-qc evaluate")
        check_promise(cls.of(entry), where, evidence_groups)
        return cls.of({**entry, **_promise_texts(entry, where)})

    @classmethod
    def of(cls, entry: dict) -> MissionPoint:
        """The point of an entry as mission_point writes it (unchecked: from_json checks a file's)."""
        typed = {name: entry[name] for name in _TYPED_ENTRY_KEYS if name in entry}
        return cls(**typed, extra={k: v for k, v in entry.items() if k not in typed}, keys=tuple(entry))

    def to_json(self) -> dict:
        """The entry as operating_point.json holds it: the keys it was read with, in their order."""
        names = self.keys or tuple(k for k in _TYPED_ENTRY_KEYS if getattr(self, k) is not None)
        return {k: self.extra[k] if k in self.extra else getattr(self, k) for k in names}

    def decide(self, p: float, allow_uncertified: bool = False) -> Decision:
        """The rule (module doc) for one group (threshold None: no calibration at all, the verdict is the model's own
        choice at UNCALIBRATED_THRESHOLD and the group is always reviewed)."""
        threshold = self.threshold
        if threshold is None:
            return Decision(verdict_at(p, UNCALIBRATED_THRESHOLD),
                            (f"no threshold for this mission ({self.why_none or self.promise or 'none'}): "
                             f"the verdict is the model's own choice (p_fail >= {UNCALIBRATED_THRESHOLD})",))
        mission_why, why = [], []
        if not self.certified and not allow_uncertified:
            mission_why.append(f"not certified: {self.promise or 'no promise for this mission'}")
        threshold_fail = self.threshold_fail
        if p >= threshold and (threshold_fail is None or p < threshold_fail):
            why.append(f"p_fail {fmt_p(p, threshold)} is in the review band: at or above the auto-pass threshold "
                       f"{fmt_p(threshold, p)} and " + (f"below the auto-fail threshold {fmt_p(threshold_fail, p)}"
                                                        if threshold_fail is not None else
                                                        "nothing is auto-failed (no certified overkill rate)"))
        margin = self.review_margin or 0.0
        if margin > 0 and abs(p - threshold) <= margin:
            why.append(f"p_fail {fmt_p(p, threshold)} is within {fmt_p(margin)} of the threshold "
                       f"{fmt_p(threshold, p)}")
        return Decision(verdict_at(p, threshold), tuple(mission_why), tuple(why))


def _promise_texts(entry: dict, where: str) -> dict:
    """The entry's promise sentences, recomputed from its own counts (promise_text): the text a verdict line, a page
    and a report print is never the file's words, which an edit could make say anything. An entry whose counts do not
    make a sentence keeps its own text, which must then be text."""
    out = {}
    for key, make in (("promise", promise_text), ("overkill_promise", overkill_promise_text)):
        if key not in entry:
            continue
        try:
            text = make(entry) if entry.get("threshold") is not None else None
        except (KeyError, TypeError, ValueError):
            text = None
        if text is None and entry.get("certified" if key == "promise" else "overkill_certified") is True:
            raise OperatingPointError(f"{where}: certified without the counts its {key} is stated from (target, "
                                      f"confidence, misses, groups, upper bound); recompute the file")
        if text is None and not isinstance(entry[key], (str, type(None))):
            raise OperatingPointError(f"{where}: {key} is {entry[key]!r}, not a sentence; recompute the file")
        if text is not None:
            out[key] = text
    return out


# what the rule reads of a file's mission entry, always written by mission_point: none may be missing
ENTRY_KEYS = ("threshold", "threshold_fail", "review_margin", "certified", "promise")
_TYPED_ENTRY_KEYS = tuple(f.name for f in fields(MissionPoint) if f.name not in ("extra", "keys"))


def decision_point(entry: dict, certified: bool) -> MissionPoint:
    """The point of an entry mission_point is building, to count which groups the rule decides without review (its
    promise, not written yet, only words the reasons, which counting does not read)."""
    return MissionPoint(entry["threshold"], entry["threshold_fail"], entry["review_margin"], certified, promise="")


@dataclass(frozen=True)
class OperatingPoint:
    """operating_point.json, read (load_operating_point) or as build_operating_point writes it. `model`, `adapters`
    and `missions` are what the judge needs and every file holds; the rest is what stage_b.evaluate writes besides
    (None in a file that lacks it: the monitor needs `confidence`, and says so). `keys`: the file's key order."""
    model: dict
    adapters: list
    missions: dict[str, MissionPoint]
    format: int = OPERATING_POINT_FORMAT
    rule: str | None = None
    review_share: float | None = None
    confidence: float | None = None
    family: dict | None = None
    data: dict | None = None
    overall: MissionPoint | None = None
    evidence: str | None = None
    automation: dict | None = None
    extra: dict = field(default_factory=dict)
    keys: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, op, where) -> OperatingPoint:
        """The content of an operating point file, its types and ranges checked; `where` (the file) names it in
        every refusal."""
        fmt = op.get("format") if isinstance(op, dict) else None
        if fmt != OPERATING_POINT_FORMAT:
            why = (" (format 1 predates certified promises: its thresholds carry no miss-rate bound)" if fmt == 1
                   else "")
            raise OperatingPointError(f"{where} is not an operating point file of format {OPERATING_POINT_FORMAT} "
                                      f"(format {fmt!r}){why}; recompute it with group-qc evaluate "
                                      f"--target_miss_rate R --confidence C")
        if not isinstance(op.get("model"), dict) or not isinstance(op.get("adapters"), list) or \
                not all(isinstance(a, dict) for a in op["adapters"]):
            raise OperatingPointError(f"{where}: `model` must be an object and `adapters` a list of objects (as "
                                      f"group-qc evaluate writes them); recompute the file")
        data = op.get("data")
        if data is not None and (not isinstance(data, dict) or not isinstance(data.get("selection", {}), dict)):
            raise OperatingPointError(f"{where}: `data` must be an object whose `selection` is an object (as "
                                      f"group-qc evaluate writes it); recompute the file")
        if not isinstance(op.get("missions"), dict):
            raise OperatingPointError(f"{where}: `missions` must be an object of mission entries; recompute the file")
        missions = {m: MissionPoint.from_json(e, f"{where}: {m}") for m, e in op["missions"].items()}
        named = sum(len((m.profile or {}).get("p_fail") or []) for m in missions.values())
        overall = None if op.get("overall") is None else MissionPoint.from_json(op["overall"], f"{where}: overall",
                                                                                evidence_groups=named)
        check_confidences(op, where)
        if any(m.certified for m in missions.values()) and op.get("confidence") is None \
                and (op.get("family") or {}).get("per_claim_confidence") is None:
            # every command refuses it alike: the judge would decide by it, and the monitor and the planner could not
            # hold its promises to any confidence
            raise OperatingPointError(f"{where}: certified promises without a `confidence` (the level the live guard "
                                      f"holds them at); recompute the file with group-qc evaluate")
        typed = {k: op[k] for k in _TYPED_OP_KEYS if k in op}
        return cls(**{**typed, "missions": missions, "overall": overall},
                   extra={k: v for k, v in op.items() if k not in typed}, keys=tuple(op))

    def to_json(self) -> dict:
        """The file's content: the keys it was read with, in their order."""
        names = self.keys or tuple(k for k in _TYPED_OP_KEYS if getattr(self, k) is not None)
        return {k: self.extra[k] if k in self.extra else self._json_value(k) for k in names}

    def _json_value(self, key: str):
        if key == "missions":
            return {m: e.to_json() for m, e in self.missions.items()}
        if key == "overall":
            return None if self.overall is None else self.overall.to_json()
        return getattr(self, key)


_TYPED_OP_KEYS = tuple(f.name for f in fields(OperatingPoint) if f.name not in ("extra", "keys"))


def load_operating_point(path) -> OperatingPoint:
    """An operating point file of this format, its types and ranges checked before anything loads."""
    path = Path(path)
    op = read_json_file(path, "operating point file", "; write one with group-qc evaluate "
                        "--target_miss_rate R, or pass --threshold T", OperatingPointError)
    if isinstance(op, dict):   # checkpoint paths are stored relative to the file (qc_core.paths): named where it is now
        adapters = op.get("adapters")
        for c in [op.get("model"), *(adapters if isinstance(adapters, list) else [])]:
            if isinstance(c, dict) and isinstance(c.get("path"), str) and c["path"]:
                c["path"] = str(resolved(c["path"], path.parent))
    return OperatingPoint.from_json(op, path)


def thresholds_for(op: OperatingPoint, path, missions: list[str], *, model: dict, adapters: list[dict],
                   fallback: float | None = None) -> dict[str, MissionPoint]:
    """{mission: decision point} for judging `missions` with this model (with `source` set).

    Refused: a file computed for another model or other adapters (compared by content fingerprint, so a moved
    folder is fine). A mission the file has no threshold for is judged all the same, every group to review:
    at `fallback` (--threshold) when given, else at the model's own choice; it never stops the other missions."""
    _check_same_checkpoints(op, path, model, adapters)
    out = {}
    for mission in missions:
        entry = op.missions.get(mission)
        if entry is not None and entry.threshold is not None:
            out[mission] = replace(entry, source=f"{path}")
            continue
        why = (entry.why_none or "no threshold") if entry is not None else \
            f"{path} has no entry for it (its missions: {', '.join(op.missions) or 'none'})"
        if fallback is not None:
            out[mission] = manual_point(fallback, f"{why}; --threshold {fallback} used")
        else:
            out[mission] = MissionPoint(threshold=None, threshold_fail=None, review_margin=0.0, certified=False,
                                        promise=f"no promise: {why}", why_none=why, source="none")
    return out


def _check_same_checkpoints(op: OperatingPoint, path, model: dict, adapters: list[dict]) -> None:
    """Refused: an operating point computed for another model or other adapters (by content fingerprint)."""
    problems = []
    if op.model.get("fingerprint") != model.get("fingerprint"):
        problems.append(f"it was computed for model {op.model.get('path')} and this is {model.get('path')}")
    theirs = [a.get("fingerprint") for a in op.adapters]
    if theirs != [a.get("fingerprint") for a in adapters]:
        problems.append(f"it was computed with adapters {[a.get('path') for a in op.adapters] or 'none'}"
                        f" and these are {[a.get('path') for a in adapters] or 'none'}")
    if problems:
        raise OperatingPointError(f"operating point {path} cannot be used: " + "; ".join(problems)
                                  + ". Recompute it for this model with group-qc evaluate "
                                    "--target_miss_rate R")


def manual_point(threshold: float, why: str = "a threshold given by hand (--threshold)") -> MissionPoint:
    """The decision point of `--threshold T`: a two-way verdict at T with no certified promise."""
    return MissionPoint(threshold=threshold, threshold_fail=threshold, review_margin=0.0, certified=False,
                        promise=f"no promise: {why}, not certified on validation groups", source="--threshold")


def point_keys(path, op: OperatingPoint) -> PointKeys:
    """The names every record of the point keys on: its identity (what the promise is, whatever the file's bytes:
    stage_b.rules.point_identity) and the file's sha256 (records written before identities)."""
    return keys_of(path, op.to_json())
