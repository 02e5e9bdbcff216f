"""One replay of a mission's days, used both to build monitor.json and to check one read back
(stage_b.monitoring.monitor).
Pure (math, scipy through the bounds).

For each day, from its counts (stage_b.monitoring.days.day_counts): the escape rate's confidence sequence
(cumulative,
intersected), the inspection state and why (stage_b.monitoring.inspection: normal, tightened, withdrawn), the two
detectors'
values, the live miss rate estimate (stratified Horvitz-Thompson), the promise's status (`holds`, `unverified`,
`withdrawn`, `not certified`) and the audit share the next day's judge must use (`next_audit_share`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from stage_b.monitoring.inspection import (MIX_DAYS, NORMAL, NOT_CERTIFIED, TIGHTENED, WITHDRAWN, DayEvidence,
                                           Inspection, Promise, mix_adjusted_escape, step, tightened_share)
from stage_b.contract.numbers import pct

HOLDS, UNVERIFIED = "holds", "unverified"
VOLUME_DAYS = 7    # the tightened share is planned for the mean auto-passed volume of the last days
DEFAULT_NORMAL_SHARE = 0.05


@dataclass(frozen=True)
class Bounds:
    """The escape rate's confidence sequence, as stage_b.monitoring.monitor computes it."""
    prior: tuple[float, float]
    delta: float
    cs: Callable            # cs_bounds(k, n, prior, delta) -> (lower, upper)
    needed: Callable        # audits_needed(k, n, promise, prior, delta) -> int | None


def evidence_of(row: dict, drift: dict, share_short: bool = False, escape_null: float | None = None) -> DayEvidence:
    """A day's counts (a monitor.json day row) as the inspection reads them. A day with an escape waiting for a second
    person, or an audit in dispute, is not a clean tightened day: what it will say is not known yet."""
    return DayEvidence(day=str(row["day"]), judged=int(row["judged"]), auto_passed=int(row["auto_passed"]),
                       audit_share=row["audit_share"], audited_auto_passed=int(row["audited_auto_passed"]),
                       escapes=int(row["escapes"]),
                       audited_auto_failed_defects=int(row["audited_auto_failed_defects"]),
                       reviewed_defects=int(row["reviewed_defects"]),
                       drift_fired=bool(drift.get("fired")), drift_why=drift.get("why"),
                       may_end_tightening=not share_short and not int(row.get("escapes_unconfirmed") or 0)
                       and not int(row.get("audits_disputed") or 0),
                       escape_null=escape_null)


class MissionReplay:
    """A mission's days, one at a time (the monitor replays a file's days; the audit planner and the bench feed it
    simulated days, each judged at the share the day before asked for)."""

    def __init__(self, promise: Promise, bounds: Bounds, normal_share: float | None = None):
        self.promise, self.bounds, self.normal_share = promise, bounds, normal_share
        self.rows: list[dict] = []
        self.inspection, self.was_above = Inspection(), False
        self.reference: tuple[int, int] | None = None   # the days that ended the last tightened run
        self.asked: float | None = None                 # the share the state asked the next day for
        self.k = self.n = self.waiting = self.disputed = 0
        self.lower, self.upper = 0.0, 1.0
        self.misses_w = self.defects_w = 0.0
        self.evidence: list[DayEvidence] = []

    def add(self, row: dict, drift_for: Callable[[int, tuple | None], dict]) -> dict:
        """Day row (counts) completed with its bounds, inspection, status and next share (module doc).
        `drift_for(i, reference)`: day i's drift against the validation profile (reference None) or against the
        days `reference` = (first, last) that ended a tightened run (stage_b.monitoring.inspection)."""
        promise, bounds, i = self.promise, self.bounds, len(self.rows)
        row = dict(row)
        drift = drift_for(i, self.reference)
        share, asked = row["audit_share"], self.asked
        # only a tightened state asks for a share the judge must use (in normal the share is the judge's own)
        short = self.inspection.state == TIGHTENED and asked is not None and \
            (share is None or share < asked - 1e-9) and bool(row["judged"])
        row.update(drift=drift, share_asked=asked,
                   share_note=(f"judged at audit share {share}, and the {self.inspection.state} state asked for "
                               f"{asked}: the day counts, but not as a clean tightened day" if short else None))
        if self.inspection.state == NORMAL and share is not None and not drift.get("fired"):
            self.normal_share = share   # a day drifting already was judged at the same-day tightened share
        self.k += int(row["escapes"])
        self.n += int(row["audited_auto_passed"])
        self.waiting += int(row.get("escapes_unconfirmed") or 0)
        self.disputed += int(row.get("audits_disputed") or 0)
        low, high = bounds.cs(self.k, self.n, bounds.prior, bounds.delta)
        self.lower, self.upper = max(self.lower, low), min(self.upper, high)
        above = promise.escape_rate is not None and self.lower > promise.escape_rate
        null = mix_adjusted_escape(promise, self.evidence[-MIX_DAYS:])
        evidence = evidence_of(row, drift, short, null)   # a day judged below the asked share is not clean
        self.evidence.append(evidence)
        was_withdrawn = self.inspection.state == WITHDRAWN
        self.inspection = inspection = step(self.inspection, evidence, promise,
                                            escape_bound_above=above and not self.was_above)
        self.was_above = self.was_above or above
        a = min(1.0, share or 0.0)
        if a > 0:
            self.misses_w += int(row["escapes"]) / a
            self.defects_w += (int(row["escapes"]) + int(row["audited_auto_failed_defects"])) / a
        self.defects_w += int(row["reviewed_defects"])
        status, status_why = status_of(inspection, promise, self.k, self.n, self.upper, bounds, share, self.waiting,
                                       self.disputed)
        self.asked = next_share(inspection, promise, self.rows + [row], self.normal_share)
        row.update(cum_escapes=self.k, cum_audited=self.n, escape_lower=self.lower, escape_upper=self.upper,
                   escape_null=null, state=inspection.state, state_why=inspection.why, clean_days=inspection.clean_days,
                   escape_detector=inspection.escape.value, miss_detector=inspection.miss.value,
                   miss_day_evalue=inspection.miss_day_evalue,
                   miss_rate_estimate=self.misses_w / self.defects_w if self.defects_w else None,
                   status=status, why=status_why, next_audit_share=self.asked,
                   withdrawn_here=inspection.state == WITHDRAWN and not was_withdrawn, rebased=inspection.rebased)
        if inspection.rebased:
            self.reference = (max(0, i + 1 - promise.clean_days), i)
        row["drift_reference"] = list(self.reference) if self.reference else None
        self.rows.append(row)
        return row


def replay(rows: list[dict], promise: Promise, bounds: Bounds, drift_for: Callable[[int, tuple | None], dict],
           normal_share: float | None = None) -> list[dict]:
    """Every day of a mission, in order (MissionReplay)."""
    mission = MissionReplay(promise, bounds, normal_share)
    return [mission.add(row, drift_for) for row in rows]


def status_of(inspection: Inspection, promise: Promise, k: int, n: int, upper: float, bounds: Bounds,
              share, waiting: int = 0, disputed: int = 0) -> tuple[str, str]:
    """The promise's status after a day: withdrawn (the inspection withdrew it), holds (the escape rate's live upper
    bound is within its promise), unverified (not yet; how many clean audits would make it hold; or `waiting`
    escapes one reviewer alone found are not confirmed yet, or `disputed` audited auto-passed groups are in conflict or
    unsure: fail closed, nothing holds on evidence still open), not certified."""
    if inspection.state == NOT_CERTIFIED:
        return NOT_CERTIFIED, inspection.why
    if inspection.state == WITHDRAWN:
        return WITHDRAWN, inspection.why
    if waiting:
        return UNVERIFIED, (f"{waiting} escape(s) found by one reviewer alone wait for a second person (or a reviewer "
                            f"whose measured error rate meets the bar): they move no bound until confirmed, and "
                            f"nothing is said to hold meanwhile; {k} confirmed escapes in {n} audited auto-passed "
                            f"groups")
    if disputed:
        return UNVERIFIED, (f"{disputed} audited auto-passed group(s) are in dispute (reviewers disagree, or none was "
                            f"sure): each may be an escape, so nothing is said to hold until a reviewer or the lead "
                            f"settles it; {k} confirmed escapes in {n} audited auto-passed groups")
    r = promise.escape_rate
    if r is None:
        return UNVERIFIED, ("the operating point states no escape rate of auto-passed groups (the rule passed no "
                            "validation group without review, or the file predates audits): nothing to hold live "
                            "work to; recompute it with group-qc evaluate on more validation groups")
    if n and upper <= r:
        return HOLDS, (f"escape rate <= {pct(r)} at {pct(1 - bounds.delta)} confidence: {k} escapes in {n} "
                       f"audited auto-passed groups (live upper bound {pct(upper)})")
    if share == 0:
        return UNVERIFIED, "no audit is drawn (--audit_share 0): nothing checks this promise on live work"
    more = bounds.needed(k, n, r, bounds.prior, bounds.delta)
    return UNVERIFIED, (f"{k} escapes in {n} audited auto-passed groups: "
                        + (f"{more} more without an escape would confirm <= {pct(r)}" if more is not None else
                           f"no number of audits without an escape confirms <= {pct(r)}"))


def next_share(inspection: Inspection, promise: Promise, rows: list[dict], normal_share: float | None) -> float | None:
    """The audit share the next day's judge uses: the normal share in `normal`, the tightened share in `tightened`,
    None when nothing is decided without review (withdrawn, not certified)."""
    if inspection.state in (WITHDRAWN, NOT_CERTIFIED):
        return None
    normal = normal_share if normal_share is not None else DEFAULT_NORMAL_SHARE
    if inspection.state == NORMAL:
        return normal
    recent = rows[-VOLUME_DAYS:]
    volume = sum(int(r["auto_passed"]) for r in recent) / len(recent)
    return tightened_share(promise.escape_rate, volume, promise.alarm_level, normal)

