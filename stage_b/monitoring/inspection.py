"""Inspection states per mission, switched by rules a QC owner recognises: the live guard's decision, day by day.
Pure (math, scipy for the share a rise needs).

The states follow the switching rules of acceptance sampling (ISO 2859-1 / ANSI-ASQ Z1.4: normal, tightened, and
discontinued inspection); here:

    normal ──(drift; an escape that brings the escape detector to TIGHTEN_LEVEL; the escape bound newly above its
    promise)──► tightened ──(clean_days tightened days in a row with labelled audits and no evidence against the
    promise)──► normal;  normal or tightened ──(a detector alarms: label evidence)──► withdrawn (stays)

- **normal**: the judge audits its --audit_share (or the planned share) of the groups it decides without review.
- **tightened**: something seen without labels (drift of p_fail or of the defect share: the mix of work may have
  changed, or the model got worse, and only labels can tell which) or escapes asks to look harder. The next day (the
  same day, when today's Stage-A summaries already drift: share_for_day) is judged at the tightened audit share: the
  share whose audits alone see a tenfold rise of the promised escape rate within that day (tightened_share; at most
  1). The audit draw is nested (stage_b.rules.routes.audit_draw: a group is audited iff its fixed number is below the
  share), so a tightened day audits every group a normal day would, and more. After TIGHTENED_CLEAN_DAYS = 5
  tightened days in a row (ISO 2859-1's "5 consecutive lots accepted"; the monitor's --tightened_clean_days states
  another run, recorded in monitor.json) whose labelled audits bring no evidence against the promise (the miss-rate
  bet of the day is <= 1), the mission goes back to normal, and the drift reference becomes those days' work (the new
  mix was audited and found as good). Why an escape tightens only at 10:1 and not at the first one: with any escape
  tightening, a mission whose promise holds was tightened on 43% of days (a 2.8% promise, 150 groups a day, 5% audits,
  simulated); at 10:1 on 0-1.2% (group_qc_dev.bench_monitor), and a real rise still tightens within days.
- **withdrawn**: only label evidence withdraws, through one of two e-detectors (stage_b.stats.detector) reaching its
alarm
  level. Every group of the mission then goes to review until a new operating point is certified on labels decided
  after the day whose evidence broke the promise.

Which rate withdraws, and why. The QC owner signs a **miss rate** m (of defective work orders, at most m pass without
a person). The **escape rate** (of the auto-passed work orders, the share that is defective) is what an audit sees
directly, but it rises with the share of defective work at an unchanged miss rate (twice the defective work about
doubles it). So:

- the **miss-rate detector** bets against m itself. Its evidence is stratified Horvitz-Thompson (each labelled group
  weighted by 1 / its probability of being labelled; Horvitz & Thompson, JASA 1952): a group routed to review is
  labelled with probability 1 (weight 1), an audited group with probability a, the day's audit share (weight 1/a).
  For a promise m, the weighted observation x = w (escape - m defective) has mean <= 0 while the miss rate is <= m;
  scaled by a (known before the day), the bets are c = 1 - m for an audited auto-pass a person failed, -m for an
  audited auto-fail a person failed, -m a for a reviewed group a person failed, 0 otherwise. A group sent to review
  and not decided yet counts as not defective (the detector leans towards withdrawal, never away from it).
- the **escape detector** bets against the escape rate the promise allows at the recent mix of work
  (mix_adjusted_escape): r scaled by how much more defective work the rule caught per group than on validation and
  how much less it passed, computed from the days before (known before the day's bet), never below r. More defective
  work raises both the escapes and this rate, so a change of mix alone does not withdraw; defects that the model or
  Stage-A no longer sees raise the escapes and not the caught defects, and do. Its guarantee holds while the model is
  as good as on validation and the mix of the last MIX_DAYS days stands for the day's (an estimate, so the rate it
  bets against is as exact as that estimate); the miss-rate detector needs no such assumption.

The escape rate's confidence sequence (stage_b.monitoring.monitor) still says when a promise `holds`; its lower bound
newly
above the promised rate tightens.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, replace

from stage_b.stats.detector import Detector, day_evalue, day_log_evalues, escape_observations
from stage_b.contract.numbers import pct

NORMAL, TIGHTENED, WITHDRAWN, NOT_CERTIFIED = "normal", "tightened", "withdrawn", "not certified"
STATES = (NORMAL, TIGHTENED, WITHDRAWN, NOT_CERTIFIED)
TIGHTENED_CLEAN_DAYS = 5
TIGHTEN_LEVEL = 10.0   # an escape tightens once the escape detector holds evidence 10:1 against the day's rate
TENFOLD = 10.0
MAX_DETECT_RATE = 0.5
MAX_ESCAPE_NULL = 0.5
MIX_DAYS = 7           # the escape rate's null follows the mix of the last 7 days


@dataclass(frozen=True)
class DayEvidence:
    """One mission's judged day, as counts: what the rules read (stage_b.monitoring.days.day_counts makes it)."""
    day: str
    judged: int
    auto_passed: int                 # groups passed without review (audited or not)
    audit_share: float | None        # the smallest audit share the day's verdicts were drawn at
    audited_auto_passed: int         # audited auto-passed groups a person labelled
    escapes: int                     # ... of which the person failed
    audited_auto_failed_defects: int   # audited auto-failed groups a person failed
    reviewed_defects: int            # groups routed to review that a person failed
    drift_fired: bool = False
    drift_why: str | None = None
    may_end_tightening: bool = True  # False: judged below the share the tightened state asked for
    escape_null: float | None = None  # the escape rate the day's mix allows under the promise (mix_adjusted_escape)


@dataclass(frozen=True)
class Promise:
    """What one mission's live work is held to."""
    miss_rate: float | None          # the signed miss rate m (target_miss_rate): its detector withdraws
    escape_rate: float | None        # the validation bound of the escape rate r: its signals tighten
    alarm_level: float               # A (stage_b.stats.detector.alarm_level)
    certified: bool = True
    caught_share: float | None = None      # validation: defective groups not auto-passed, per group
    auto_pass_share: float | None = None   # validation: groups auto-passed, per group
    clean_days: int = TIGHTENED_CLEAN_DAYS  # clean tightened days in a row that return to normal


@dataclass(frozen=True)
class Inspection:
    """A mission's inspection after some days."""
    state: str = NORMAL
    why: str = "no day yet"
    clean_days: int = 0              # tightened days in a row without evidence against the promise
    escape: Detector = Detector()
    miss: Detector = Detector()
    withdrawn_day: str | None = None  # the day whose evidence broke the promise
    rebased: bool = False            # this day ended a tightened run: the drift reference becomes its days
    miss_day_evalue: float | None = None  # the day's own miss-rate bet (mean over the grid), None without a promise


def miss_observations(day: DayEvidence, miss_rate: float) -> list[tuple[float, int]]:
    """The miss rate's bets for a day (module doc)."""
    a = min(1.0, day.audit_share or 0.0)
    m = miss_rate
    return [(1.0 - m, day.escapes), (-m, day.audited_auto_failed_defects), (-m * a, day.reviewed_defects)]


def step(before: Inspection, day: DayEvidence, promise: Promise, escape_bound_above: bool = False) -> Inspection:
    """The inspection after one more day (module doc). `escape_bound_above`: the escape rate's confidence sequence
    lies above its promise (label evidence about the escape rate: it tightens)."""
    if not promise.certified:
        return Inspection(NOT_CERTIFIED, "the mission is not certified: every group goes to review, nothing is audited")
    miss_e = day_log_evalues(promise.miss_rate, miss_observations(day, promise.miss_rate)) \
        if promise.miss_rate is not None else None
    after = _switch(before, day, promise, escape_bound_above, miss_e)
    return replace(after, miss_day_evalue=day_evalue(miss_e) if miss_e is not None else None)


def _switch(before: Inspection, day: DayEvidence, promise: Promise, escape_bound_above: bool,
            miss_e: tuple[float, ...] | None) -> Inspection:
    """The switching rules (module doc), given the day's miss-rate bets `miss_e`."""
    if before.state == WITHDRAWN:
        return replace(before, rebased=False)
    miss = before.miss.after(miss_e) if miss_e is not None else before.miss
    null = day.escape_null if day.escape_null is not None else promise.escape_rate
    escape = before.escape.after(day_log_evalues(null, escape_observations(
        day.escapes, day.audited_auto_passed, null))) if null is not None else before.escape
    if miss.alarmed(promise.alarm_level):
        return Inspection(WITHDRAWN, (
            f"the miss rate is above the promised {pct(promise.miss_rate)}: the miss-rate detector reached "
            f"{miss.value:.3g} >= {promise.alarm_level:.3g} on {day.day} ({day.escapes} escapes in "
            f"{day.audited_auto_passed} audited auto-passed groups that day; label evidence withdraws)"),
            escape=escape, miss=miss, withdrawn_day=day.day)
    if escape.alarmed(promise.alarm_level):
        return Inspection(WITHDRAWN, (
            f"escapes beyond what the day's mix of work explains: the escape-rate detector against "
            f"{pct(null)} (the promised {pct(promise.escape_rate)} at today's mix) reached {escape.value:.3g} >= "
            f"{promise.alarm_level:.3g} on {day.day} ({day.escapes} escapes in {day.audited_auto_passed} "
            f"audited auto-passed groups that day; label evidence withdraws)"),
            escape=escape, miss=miss, withdrawn_day=day.day)
    signals = []
    if day.drift_fired:
        signals.append(f"drift: {day.drift_why}")
    if day.escapes and escape.value >= TIGHTEN_LEVEL:
        signals.append(f"{day.escapes} escape(s) in {day.audited_auto_passed} audited auto-passed groups (the "
                       f"escape-rate detector at {escape.value:.3g} >= {TIGHTEN_LEVEL:g})")
    if escape_bound_above:
        signals.append(f"the escape rate's live bound lies above the promised {pct(promise.escape_rate)}")
    if before.state == NORMAL or before.state not in STATES:
        if signals:
            return Inspection(TIGHTENED, f"tightened on {day.day}: " + "; ".join(signals) + " (look harder: only "
                              "labels withdraw)", 0, escape, miss)
        return Inspection(NORMAL, f"normal on {day.day}: no drift, no escape", 0, escape, miss)
    clean = day.may_end_tightening and bool(day.audited_auto_passed) and \
        (miss_e is None or day_evalue(miss_e) <= 1.0)
    clean_days = before.clean_days + 1 if clean else 0
    if clean_days >= promise.clean_days:
        return Inspection(NORMAL, f"back to normal on {day.day}: {clean_days} tightened days in a row whose "
                                  f"audits bring no evidence against the promise", 0, escape, miss, rebased=True)
    return Inspection(TIGHTENED, f"tightened ({clean_days} of {promise.clean_days} clean days in a row"
                      + (f"; {day.day}: " + "; ".join(signals) if signals else "") + ")",
                      clean_days, escape, miss)


def mix_adjusted_escape(promise: Promise, recent: list[DayEvidence]) -> float | None:
    """The escape rate the promise allows at the mix of the recent days (module doc): the promised escape rate r,
    scaled by how much more defective work the rule caught per group than on validation and how much less it passed,
    never below r, at most MAX_ESCAPE_NULL. Computed from the days before (known before the day's bet)."""
    r = promise.escape_rate
    if r is None or promise.caught_share is None or not promise.auto_pass_share or not recent:
        return r
    judged = sum(d.judged for d in recent)
    auto = sum(d.auto_passed for d in recent)
    caught = sum(d.reviewed_defects + (d.audited_auto_failed_defects / d.audit_share if d.audit_share else 0.0)
                 for d in recent)
    if not judged or not auto or promise.caught_share <= 0:
        return r
    ratio = (caught / judged) / promise.caught_share * promise.auto_pass_share / (auto / judged)
    return min(MAX_ESCAPE_NULL, max(r, r * ratio))


@functools.lru_cache(maxsize=4096)   # the replay asks for the same tightened share day after day
def audits_to_alarm(rate: float, rise: float, level: float, quantile: float = 0.5, limit: int = 100_000) -> int | None:
    """How many audited auto-passed groups, in one day from a fresh start, make the escape detector alarm at `level`
    when the escape rate is `rise`, with probability >= `quantile` (escapes at Binomial(n, rise)'s 1 - quantile
    point); None when no number up to `limit` does."""
    from scipy.stats import binom
    if rise <= rate:
        return None

    def alarms(n: int) -> bool:
        k = int(binom.ppf(1 - quantile, n, rise))
        return day_evalue(day_log_evalues(rate, escape_observations(k, n, rate))) >= level
    high = 1
    while not alarms(high):
        high *= 2
        if high > limit:
            return None
    low = high // 2
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (low, mid) if alarms(mid) else (mid, high)
    return high


def tenfold_rise(rate: float) -> float:
    """The rise a tightened day must see: ten times the promised escape rate, at most MAX_DETECT_RATE."""
    return min(TENFOLD * rate, max(MAX_DETECT_RATE, rate + (1 - rate) / 2))


def tightened_share(escape_rate: float | None, auto_passed_per_day: float, level: float,
                    normal_share: float) -> float:
    """The tightened audit share: the share whose audits alone see a tenfold rise of the escape rate within one
    day (median) at the day's volume of auto-passed groups, never below the normal share, at most 1."""
    if escape_rate is None or auto_passed_per_day <= 0:
        return 1.0
    n = audits_to_alarm(escape_rate, tenfold_rise(escape_rate), level)
    if n is None:
        return 1.0
    return max(normal_share, min(1.0, _ceil_share(n / auto_passed_per_day)))


def share_for_day(normal_share: float, state: str | None, asked: float | None, drift_today: bool = False,
                  promise: Promise | None = None, groups_today: int = 0) -> tuple[float, str]:
    """(the audit share a mission is judged at today, why). The judge's own (normal) share, raised to what the
    monitor's `tightened` state asked for; raised the same day when today's work already drifts (the defect share
    of today's Stage-A summaries, known before the model runs) on a normal day, to the tightened share at today's
    volume (groups_today x the validation auto-pass share). Never lowered. A raised share draws a superset of the
    normal audits (stage_b.rules.routes.audit_draw: the same per-group number against a higher share)."""
    if state == TIGHTENED and asked is not None:
        share = max(normal_share, min(1.0, float(asked)))
        return share, f"{TIGHTENED}: the monitor asked for {share:g}"
    if drift_today and state in (None, NORMAL) and promise is not None:
        volume = groups_today * (promise.auto_pass_share or 1.0)
        share = tightened_share(promise.escape_rate, volume, promise.alarm_level, normal_share)
        return share, f"{TIGHTENED} today: today's work drifts from the reference"
    return normal_share, NORMAL if state in (None, NORMAL) else str(state)


def _ceil_share(x: float) -> float:
    """A share rounded up to 3 decimals (so that it prints as it is applied)."""
    return math.ceil(x * 1000 - 1e-9) / 1000

