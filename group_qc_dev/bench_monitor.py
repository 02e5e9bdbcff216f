"""`python -m group_qc_dev.bench_monitor`: a year of live work per simulated mission, through the live guard's own
code (stage_b.monitoring.simulate_days: the judge's share for the day, same-day tightening, the monitor's replay, its
drift
test and both detectors), per scenario x audit share x groups a day. Prints a table, writes JSON (--json) and a plot
(--plot). Measures; asserts nothing.

Scenarios (the change, if any, on day CHANGE_DAY = 31):
- nothing: the work stays as on validation (a year): false withdrawals per mission-year, tightened days;
- mix: the share of defective work doubles (20% -> 40%) on day 31 and halves (to 10%) on day 181, the model exactly
  as good (its miss rate unchanged): withdrawals (target 0), days from each change back to normal;
- stage_a: Stage-A stops showing the defect (every defective group looks clean to the model) on day 31: days from
  the change to the withdrawal;
- person_only: 15% of the clean-looking groups are in fact defective, only a person sees it (escape rate ~1% ->
  ~16%): days to the withdrawal;
- slow: the same defect creeps in over 30 days (0% -> 15% from day 31 to day 60): days from day 31 to the withdrawal.

The mission: 200 validation groups, 20% defective, the rule auto-passing 3% of the defective and 85% of the clean
groups (escape rate ~0.9%, promised <= the 90% upper bound, ~2.8%), a signed miss rate of 20%; ten false-alarm years.
`planned` is stage_b.monitoring.plan_audits' share for a rise to 6x the promised escape rate within 2 days at that
volume.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

CHANGE_DAY = 31
YEAR = 365
SCENARIOS = ("nothing", "mix", "stage_a", "person_only", "slow")
SHARES = ("0.01", "0.05", "0.2", "planned")
VOLUMES = (50, 150, 500)
CONFIDENCE, MISS_RATE, YEARS, DELTA, ALPHA = 0.9, 0.2, 10.0, 0.1, 0.001


def mixes(scenario: str):
    from dataclasses import replace as shifted   # a WorkMix with some fields changed

    from stage_b.monitoring.simulate_days import WorkMix
    base = WorkMix()
    if scenario == "nothing":
        return [base] * YEAR
    if scenario == "mix":
        return [base] * (CHANGE_DAY - 1) + [shifted(base, defect_share=0.4)] * 150 + \
            [shifted(base, defect_share=0.1)] * (YEAR - CHANGE_DAY + 1 - 150)
    after = 60   # days followed after the change
    if scenario == "stage_a":
        return [base] * (CHANGE_DAY - 1) + [shifted(base, stage_a_hides=True)] * after
    if scenario == "person_only":
        return [base] * (CHANGE_DAY - 1) + [shifted(base, hidden_share=0.15)] * after
    if scenario == "slow":
        return [base] * (CHANGE_DAY - 1) + [shifted(base, hidden_share=0.15 * min(1.0, (d + 1) / 30))
                                             for d in range(after)]
    raise ValueError(scenario)


def planned_share(groups: int) -> float:
    from stage_b.monitoring.plan_audits import DETECT_FACTOR, plan_for_mix
    from stage_b.monitoring.simulate_days import WorkMix, promise_for
    mix = WorkMix()
    promise = promise_for(mix, CONFIDENCE, YEARS, MISS_RATE)
    share, _ = plan_for_mix(mix, promise, groups, min(0.9, DETECT_FACTOR * promise.escape_rate), 2, DELTA, ALPHA)
    return share if share is not None else 1.0


def cell(args: tuple) -> dict:
    """One scenario x share x volume: `runs` simulated mission-years (or changes followed for 60 days)."""
    scenario, share, groups, runs, seed = args
    import numpy as np

    from stage_b.monitoring.simulate_days import WorkMix, promise_for, run_mission, validation_of
    mix = WorkMix()
    promise = promise_for(mix, CONFIDENCE, YEARS, MISS_RATE)
    days = mixes(scenario)
    rng = np.random.default_rng(seed)
    withdrawn, tightened_days, judged_days, back, audits = [], 0, 0, [], 0
    started = time.perf_counter()
    for _ in range(runs):
        rows = run_mission(days, groups, share, promise, validation_of(mix), DELTA, ALPHA, rng)
        w = next((int(r["day"]) for r in rows if r["withdrawn_here"]), None)
        withdrawn.append(w)
        tightened_days += sum(r["state"] == "tightened" for r in rows)
        judged_days += len(rows)
        audits += sum(r["audited"] for r in rows)
        if scenario == "mix":
            for change in (CHANGE_DAY, CHANGE_DAY + 150):
                after = [r for r in rows if int(r["day"]) >= change]
                t = next((i for i, r in enumerate(after) if r["state"] == "tightened"), None)
                n = next((i for i, r in enumerate(after) if t is not None and i > t and r["state"] == "normal"), None)
                back.append(n)
    out = {"scenario": scenario, "share": share, "groups_per_day": groups, "runs": runs,
           "seconds": round(time.perf_counter() - started, 1),
           "tightened_day_share": tightened_days / judged_days, "audits_per_day": audits / judged_days}
    if scenario in ("nothing", "mix"):
        out["withdrawals"] = sum(w is not None for w in withdrawn)
        out["withdrawals_per_mission_year"] = out["withdrawals"] / runs
        if scenario == "mix":
            done = [b for b in back if b is not None]
            out["days_back_to_normal_median"] = statistics.median(done) if done else None
            out["changes_back_to_normal_within_7_days"] = sum(b is not None and b <= 7 for b in back) / len(back)
    else:
        early = sum(w is not None and w < CHANGE_DAY for w in withdrawn)
        delays = sorted(w - CHANGE_DAY for w in withdrawn if w is not None and w >= CHANGE_DAY)
        out.update(withdrawn_before_change=early, withdrawn_after_change=len(delays),
                   delay_days_median=statistics.median(delays) if delays else None,
                   delay_days_p90=delays[int(0.9 * len(delays)) - 1] if delays else None)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m group_qc_dev.bench_monitor", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", type=int, default=200, help="simulated missions per cell (default %(default)s)")
    p.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=SCENARIOS)
    p.add_argument("--shares", nargs="+", default=list(SHARES))
    p.add_argument("--volumes", nargs="+", type=int, default=list(VOLUMES))
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--plot", help="write a PNG of the delays and false withdrawals here")
    args = p.parse_args(argv)
    planned = {v: planned_share(v) for v in args.volumes} if "planned" in args.shares else {}
    jobs = [(s, planned[v] if share == "planned" else float(share), v, args.runs, 1000 + i)
            for i, (s, share, v) in enumerate((s, share, v) for s in args.scenarios for share in args.shares
                                              for v in args.volumes)]
    labels = [share for s in args.scenarios for share in args.shares for v in args.volumes]
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = list(pool.map(cell, jobs))
    for r, label in zip(results, labels):
        r["share_label"] = label
    print(table(results))
    if args.json:
        Path(args.json).write_text(json.dumps({"planned_shares": planned, "cells": results}, indent=2) + "\n")
    if args.plot:
        plot(results, args.plot)
    return 0


def table(results: list[dict]) -> str:
    head = "| scenario | share | groups/day | runs | withdrawn (per mission-year / after the change) | days to " \
           "withdrawal (median, p90) | back to normal (median days; share within 7) | tightened days | audits/day |"
    lines = [head, "|" + "---|" * 9]
    for r in results:
        share = f"{r['share_label']} ({100 * r['share']:.3g}%)" if r["share_label"] == "planned" else \
            f"{100 * r['share']:.3g}%"
        if "withdrawals" in r:
            withdrawn, delay = f"{r['withdrawals_per_mission_year']:.3f}", "-"
        else:
            withdrawn = f"{r['withdrawn_after_change']}/{r['runs']} (before: {r['withdrawn_before_change']})"
            delay = f"{r['delay_days_median']}, {r['delay_days_p90']}"
        back = f"{r['days_back_to_normal_median']}; {100 * r['changes_back_to_normal_within_7_days']:.0f}%" \
            if "days_back_to_normal_median" in r else "-"
        lines.append(f"| {r['scenario']} | {share} | {r['groups_per_day']} | {r['runs']} | {withdrawn} | {delay} | "
                     f"{back} | {100 * r['tightened_day_share']:.1f}% | {r['audits_per_day']:.1f} |")
    return "\n".join(lines)


def plot(results: list[dict], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shift = [s for s in ("stage_a", "person_only", "slow") if any(r["scenario"] == s for r in results)]
    fig, axes = plt.subplots(1, len(shift) + 1, figsize=(4.2 * (len(shift) + 1), 3.6))
    axes = list(axes) if len(shift) else [axes]
    for ax, scenario in zip(axes, shift):
        for volume in sorted({r["groups_per_day"] for r in results}):
            rows = [r for r in results if r["scenario"] == scenario and r["groups_per_day"] == volume]
            ax.plot([r["share_label"] for r in rows], [60 if r["delay_days_median"] is None else r["delay_days_median"]
                                                       for r in rows], "o-",
                    label=f"{volume}/day")
        ax.set_title(f"{scenario}: median days to withdrawal", fontsize=9)
        ax.set_xlabel("audit share")
        ax.legend(fontsize=7)
    ax = axes[-1]
    for scenario in ("nothing", "mix"):
        rows = [r for r in results if r["scenario"] == scenario and r["groups_per_day"] == 150]
        ax.plot([r["share_label"] for r in rows], [r["withdrawals_per_mission_year"] for r in rows], "o-",
                label=scenario)
    ax.axhline(0.1, color="grey", ls="--", lw=0.8)
    ax.set_title("false withdrawals per mission-year (150/day)", fontsize=9)
    ax.set_xlabel("audit share")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    sys.exit(main())
