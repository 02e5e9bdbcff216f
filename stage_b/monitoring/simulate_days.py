"""Simulated days of one mission's work, judged, audited and labelled, fed through the live guard's real code: the
judge's audit share (stage_b.rules.routes.share_for_day), the monitor's replay
(stage_b.monitoring.monitor_replay.MissionReplay) and
its drift test (stage_b.stats.drift). Used by the audit planner (stage_b.monitoring.plan_audits) and the
bench
(group_qc_dev.bench_monitor). Pure (numpy, scipy).

A day is counts, not groups: each group is drawn as one of three kinds, and the rule routes it as the validation
work was routed:

- seen defective: defective, and Stage-A's summary shows it (shown as a defect with probability
  `summary_shows_defect[0]`); routed auto-pass / auto-fail / review with `defective_routes`;
- clean-looking: the model sees nothing wrong (routed with `clean_routes`; summary shows a defect with probability
  `summary_shows_defect[1]`); some of them are in fact defective: the defects only a person sees (`hidden_share` of
  the clean-looking work) and, when Stage-A hides a defect (`stage_a_hides`), every defective group.

The audit draw is Poisson sampling at the day's share (each automatically decided group audited with that
probability, as stage_b.rules.routes draws it); reviewers label every audited and reviewed group correctly.
"""
from __future__ import annotations

from dataclasses import dataclass

from stage_b.stats.certify import upper_bound
from stage_b.stats.detector import alarm_level
from stage_b.monitoring.inspection import WITHDRAWN, Promise, share_for_day
from stage_b.monitoring.live_promise import bounds_for
from stage_b.monitoring.monitor_replay import MissionReplay
from stage_b.stats.drift import drift

VALIDATION_GROUPS = 200


@dataclass(frozen=True)
class WorkMix:
    """How one mission's work falls (module doc)."""
    defect_share: float = 0.2
    hidden_share: float = 0.0
    stage_a_hides: bool = False
    defective_routes: tuple[float, float] = (0.03, 0.67)   # (auto-pass, auto-fail); the rest: review
    clean_routes: tuple[float, float] = (0.85, 0.02)
    summary_shows_defect: tuple[float, float] = (0.9, 0.03)

    @property
    def seen_defective(self) -> float:
        return 0.0 if self.stage_a_hides else self.defect_share

    @property
    def defective_if_clean_looking(self) -> float:
        hidden = (self.defect_share if self.stage_a_hides else 0.0) + (1 - self.defect_share) * self.hidden_share
        return hidden / (1 - self.seen_defective)

    @property
    def auto_pass_share(self) -> float:
        return self.seen_defective * self.defective_routes[0] + (1 - self.seen_defective) * self.clean_routes[0]

    @property
    def escape_rate(self) -> float:
        escapes = self.seen_defective * self.defective_routes[0] + \
            (1 - self.seen_defective) * self.clean_routes[0] * self.defective_if_clean_looking
        return escapes / self.auto_pass_share

    @property
    def miss_rate(self) -> float:
        defective = self.seen_defective + (1 - self.seen_defective) * self.defective_if_clean_looking
        return self.escape_rate * self.auto_pass_share / defective

    @property
    def summary_defect_share(self) -> float:
        return self.seen_defective * self.summary_shows_defect[0] + \
            (1 - self.seen_defective) * self.summary_shows_defect[1]


def validation_of(mix: WorkMix, groups: int = VALIDATION_GROUPS) -> dict:
    """The validation work a promise was certified on, as expected counts of `groups` groups of this mix."""
    auto_passed = round(groups * mix.auto_pass_share)
    return {"groups": groups, "auto_passed": auto_passed, "escapes": round(auto_passed * mix.escape_rate),
            "defect_groups": round(groups * mix.summary_defect_share)}


def promise_for(mix: WorkMix, confidence: float, false_alarm_years: float, miss_rate: float) -> Promise:
    """The promise of a mission certified on validation_of(mix): the escape rate's upper bound at `confidence`,
    the signed miss rate."""
    v = validation_of(mix)
    defective = round(v["groups"] * (mix.defect_share + (1 - mix.defect_share) * mix.hidden_share))
    return Promise(miss_rate=miss_rate, escape_rate=upper_bound(v["escapes"], v["auto_passed"], confidence),
                   alarm_level=alarm_level(false_alarm_years), caught_share=(defective - v["escapes"]) / v["groups"],
                   auto_pass_share=v["auto_passed"] / v["groups"])


def simulate_day(mix: WorkMix, groups: int, share: float, rng) -> dict:
    """One judged, audited and labelled day, as stage_b.monitoring.days.day_counts counts it."""
    seen = int(rng.binomial(groups, mix.seen_defective))
    looking_clean = groups - seen
    d_ap, d_af, d_rv = rng.multinomial(seen, [*mix.defective_routes, 1 - sum(mix.defective_routes)])
    c_ap, c_af, c_rv = rng.multinomial(looking_clean, [*mix.clean_routes, 1 - sum(mix.clean_routes)])
    hidden = mix.defective_if_clean_looking
    h_ap, h_af, h_rv = (int(rng.binomial(n, hidden)) for n in (c_ap, c_af, c_rv))
    defect_ap, defect_af = d_ap + h_ap, d_af + h_af
    audited_ap_defect = int(rng.binomial(defect_ap, share))
    audited_ap_clean = int(rng.binomial(c_ap + d_ap - defect_ap, share))
    audited_af_defect = int(rng.binomial(defect_af, share))
    audited_af_clean = int(rng.binomial(c_af + d_af - defect_af, share))
    auto = d_ap + d_af + c_ap + c_af
    row = {"judged": groups, "auto_decided": auto, "auto_passed": int(d_ap + c_ap), "audit_share": share,
           "audited": audited_ap_defect + audited_ap_clean + audited_af_defect + audited_af_clean,
           "audited_auto_passed": audited_ap_defect + audited_ap_clean, "escapes": audited_ap_defect,
           "audited_auto_failed_defects": audited_af_defect, "reviewed_defects": int(d_rv + h_rv)}
    return row


def run_mission(mixes, groups: int, normal_share: float, promise: Promise, reference: dict, delta: float,
                drift_alpha: float, rng, stop_when_withdrawn: bool = True) -> list[dict]:
    """Days of one mission, each judged at the share the day before asked for (stage_b.rules.routes.share_for_day), fed
    to
    the monitor's replay; `mixes` gives each day's WorkMix. Returns the replayed day rows."""
    replay = MissionReplay(promise, bounds_for(promise.escape_rate, delta))
    summaries: list[int] = []
    for number, mix in enumerate(mixes, start=1):
        state = replay.rows[-1]["state"] if replay.rows else None
        asked = replay.rows[-1]["next_audit_share"] if replay.rows else None
        shown = int(rng.binomial(groups, mix.summary_defect_share))   # Stage-A's summaries come before the model
        summaries.append(shown)

        def drift_for(i: int, ref: tuple | None) -> dict:
            against = reference if ref is None else \
                {"groups": groups * (ref[1] - ref[0] + 1), "defect_groups": sum(summaries[ref[0]:ref[1] + 1])}
            return drift(None, summaries[i], against, drift_alpha, groups=groups)
        today = drift_for(number - 1, replay.reference)
        share, _ = share_for_day(normal_share, state, asked, today["fired"], promise, groups)
        row = simulate_day(mix, groups, share, rng)
        out = replay.add({"day": str(number), **row}, drift_for)
        if stop_when_withdrawn and out["state"] == WITHDRAWN:
            break
    return replay.rows

