"""The judge's settings: its flags (build_parser), checked into one record (JudgeSettings), and the error that names a
wrong one (JudgeError); the words that must stand in for a monitor's state (--no_monitor)."""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from qc_core.errors import UserError
from stage_b.contract.bounds import in_range
from stage_b.data.settings import add_selection_args, selection_flags
from stage_b.labels.assign import DEFAULT_OVERLAP_SHARE, check_overlap_share, check_reviewers
from stage_b.labels.gold import DEFAULT_GOLD_SHARE, check_gold_share
from stage_b.model.engine_settings import EngineSettings, add_engine_args
from stage_b.monitoring.day_shares import check_share_setting
from stage_b.rules.replacement import check_words
from stage_b.rules.routes import DEFAULT_AUDIT_SHARE
from stage_b.rules.workload import DEFAULT_SECONDS_PER_DECISION

# A certified promise decides work without review only where a monitor checks it against live work, or where the
# person judging says in words why not (--no_monitor): the guard fails closed, never silently open.
NO_MONITOR = ("no monitor state for this operating point, so nothing checks its promise against live work today: pass "
              "--monitor <monitor.json> (judge.sh: labels=<labels folder> monitors the days before this one), or "
              "--no_monitor 'why, in words' to decide without one (recorded on every verdict line)")


class JudgeError(UserError):
    pass


def check_no_monitor(words, monitor) -> str | None:
    """--no_monitor's reason: a few words a person could sign (at least 8 characters, a letter among them)."""
    if words is None:
        return None
    if monitor:
        raise JudgeError("--monitor and --no_monitor: give one (the monitor's state, or why the day is judged "
                         "without it)")
    return check_words(words, "--no_monitor", "first day at this operating point: why certified missions are "
                                              "decided without a monitor today")


@dataclass(frozen=True)
class JudgeSettings:
    """One judging run, typed and checked (built in `main` from the flags)."""
    engine: EngineSettings
    selection_flags: dict
    output_dir: Path
    operating_point: str | None = None
    threshold: float | None = None
    allow_uncertified: bool = False
    audit_share: float | str = DEFAULT_AUDIT_SHARE   # or "plan" (stage_b.monitoring.day_shares)
    audit_seed: int | None = None
    reviewers: tuple[str, ...] = ()
    overlap_share: float = 0.0
    gold: tuple[str, ...] = ()
    gold_share: float = 0.0
    monitor: str | None = None
    no_monitor: str | None = None   # why certified missions are decided without a monitor, in words
    accept_weaker: str | None = None   # the owner's words accepting promises weaker than the replaced ones
    overwrite: bool = False
    review_page: bool = True
    seconds_per_decision: float | None = None   # the pace that prices the day's review work (None: measured/default)
    labels: str | None = None                   # the labels folder whose decisions log measured the pace

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "JudgeSettings":
        engine = EngineSettings.from_args(args)
        audit_share = check_share_setting(args.audit_share)
        reviewers = tuple(check_reviewers(args.reviewers))
        overlap_share = check_overlap_share(args.overlap_share if args.overlap_share is not None else
                                            DEFAULT_OVERLAP_SHARE if len(reviewers) > 1 else 0.0, list(reviewers))
        gold = tuple(args.gold) or default_gold(args.labels, args.gold_share)
        gold_share = check_gold_share(args.gold_share if args.gold_share is not None else
                                      DEFAULT_GOLD_SHARE if gold else 0.0)
        return cls(engine, selection_flags(args), Path(args.output_dir), args.operating_point, args.threshold,
                   args.allow_uncertified, audit_share, args.audit_seed, reviewers, overlap_share, gold,
                   gold_share, args.monitor, check_no_monitor(args.no_monitor, args.monitor),
                   check_words(args.accept_weaker, "--accept_weaker", "the new Stage-A camera needs the lower "
                                                                      "threshold; signed 王经理"),
                   args.overwrite, not args.no_review,
                   None if args.seconds_per_decision is None else in_range(
                       args.seconds_per_decision, "--seconds_per_decision", 1, 3600, "seconds, e.g. 30", JudgeError),
                   args.labels)


def default_gold(labels, gold_share) -> tuple[str, ...]:
    """Gold by default once labels exist: the labels folder's labelled Stage-A files (`<mission>_stage_a.jsonl`, what
    stage_b.labels.decisions writes) at DEFAULT_GOLD_SHARE, so every reviewer is measured; none with --gold_share 0
    or without labels."""
    if not labels or (gold_share is not None and check_gold_share(gold_share) == 0):   # the share, not its spelling
        return ()
    return tuple(str(p) for p in sorted(Path(labels).glob("*_stage_a.jsonl")))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="group-qc judge", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    # transformers only: p_fail is read from the model's logits in this process (vLLM keeps its model in its own
    # engine; docs/judging_and_review.md)
    add_engine_args(p, backend=False, reason_citations=(
        "guided: after 不通过 the reason starts by citing every photo whose summary shows a defect; free: the model "
        "cites (default %(default)s)"))
    add_selection_args(p, split=False)
    p.add_argument("--output_dir", required=True, help="where <mission>_verdicts.jsonl go")
    p.add_argument("--operating_point", help="operating_point.json from group-qc evaluate --target_miss_rate")
    p.add_argument("--threshold", type=float, help="a threshold on p_fail for every mission (with --operating_point: "
                                                   "for the missions it has none for)")
    p.add_argument("--allow_uncertified", action="store_true",
                   help="decide groups of missions without a certified promise without review (every such record "
                        "says so); by default they all go to review")
    p.add_argument("--audit_share", default=str(DEFAULT_AUDIT_SHARE),
                   help="share (0 to 1) of the groups decided without review drawn for a blind audit, per mission, or "
                        "`plan` (stage_b.monitoring.plan_audits at today's volume); the monitor's tightened state "
                        "raises it "
                        "(stage_b.monitoring.day_shares; default %(default)s; 0: no audit, and "
                        "group-qc monitor then says the "
                        "promises are unverified)")
    p.add_argument("--audit_seed", type=int, default=None,
                   help="the audit draw's seed (default: the one the output folder's verdict files recorded, else a "
                        "new random one, recorded in every verdict line)")
    p.add_argument("--reviewers", default="",
                   help="the day's reviewers, comma-separated (stage_b.labels.assign): each group sent to a person is "
                        "assigned to one of them, and --overlap_share of them to two, blind to each other")
    p.add_argument("--overlap_share", default=None,
                   help=f"share (0 to 1) of the groups sent to people that two reviewers decide (default "
                        f"{DEFAULT_OVERLAP_SHARE} with two reviewers or more; stage_b.labels.agreement measures them)")
    p.add_argument("--gold", nargs="+", default=[],
                   help="labelled Stage-A files (earlier days' labels): known-answer groups mixed into the day's "
                        "review, looking like the day's blind audits; group-qc decisions scores each reviewer "
                        "on them "
                        "(stage_b.labels.gold)")
    p.add_argument("--gold_share", default=None,
                   help=f"gold groups per mission, as a share of the mission's groups today (default "
                        f"{DEFAULT_GOLD_SHARE} with --gold, and with --labels, whose labelled groups are then the "
                        f"gold; 0 turns gold off)")
    p.add_argument("--monitor", help="monitor.json from group-qc monitor: every group of a mission whose "
                                     "promise it withdrew goes to review, saying why")
    p.add_argument("--no_monitor", metavar="WHY",
                   help="decide certified missions without a monitor's state, for the reason given in words (e.g. "
                        "'first day at this operating point'), recorded on every verdict line; without --monitor or "
                        "this, every group of a certified mission goes to review (the guard fails closed)")
    p.add_argument("--accept_weaker", metavar="WORDS",
                   help="the owner accepts, in words, an operating point that promises less than the one it replaces "
                        "(group-qc evaluate --replaces names the missions and why), recorded on every verdict line; "
                        "without it every group of such a mission goes to review (stage_b.rules.replacement)")
    p.add_argument("--seconds_per_decision", default=None,
                   help=f"the pace that prices the day's review work in person-hours (default: the median the review "
                        f"pages measured, from --labels, else {DEFAULT_SECONDS_PER_DECISION:g}; "
                        f"stage_b.rules.workload)")
    p.add_argument("--labels", help="the labels folder group-qc decisions writes: the reviewers' measured pace, and "
                                    "the day's gold unless --gold names others or --gold_share is 0")
    p.add_argument("--overwrite", action="store_true", help="discard earlier verdicts and judge everything again")
    p.add_argument("--no_review", action="store_true", help="no review page (<output_dir>/review/index.html)")
    return p
