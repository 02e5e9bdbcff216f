"""What scripts/judge.sh asks before a day is judged, as one command (the launcher holds no Python):

    python -m stage_b.judging.day_checks settings OP SHARE LABELS REVIEWERS OVERLAP SEED MONITOR MONITOR_WHY
        the settings a day cannot run without, checked before Stage-A reads a photo (exit 2, `error:` lines)
    python -m stage_b.judging.day_checks days-before PARENT TODAY OP
        how many day folders under PARENT (TODAY's apart) were judged at this operating point (by what the promise
        is, stage_b.rules.point_identity, never the file's bytes)
    python -m stage_b.judging.day_checks missions INPUT_DIR SPEC
        the missions of SPEC (names, aliases, `all` = every mission folder present), one per line, resolved as
        Stage-A resolves them
"""
from __future__ import annotations

import sys
from pathlib import Path

from qc_core.errors import UserError
from qc_core.exits import run_cli
from qc_core.missions import MissionError, is_all, load_registry
from stage_b.judging.settings import check_no_monitor
from stage_b.labels.assign import check_overlap_share, check_reviewers
from stage_b.monitoring.day_shares import check_share_setting
from stage_b.monitoring.days import operating_points_of, verdict_files
from stage_b.monitoring.monitor_file import load_monitor
from stage_b.rules.operating_point import load_operating_point, point_keys
from stage_b.rules.withdrawals import recorded


def check_settings(op: str, share: str, labels: str, reviewers: str, overlap: str, seed: str, monitor: str,
                   monitor_why: str) -> int:
    """The day's settings, each refused with what to do (judge.sh's keys named)."""
    if seed and not seed.lstrip("-").isdigit():
        raise UserError(f"audit_seed={seed!r} is not a whole number; give one (e.g. audit_seed=7) or leave it out")
    if monitor and monitor != "none":
        load_monitor(monitor)
    if monitor == "none" or monitor_why:
        if monitor != "none":
            raise UserError("monitor_why= goes with monitor=none (why the day is judged without the monitor)")
        if not monitor_why:
            raise UserError("monitor=none needs monitor_why=\"why, in words\": certified missions are then decided "
                            "without a monitor's state, and the reason is recorded on every verdict line")
        check_no_monitor(monitor_why, None)
    check_share_setting(share, "audit_share=")
    names = check_reviewers(reviewers, "reviewers=")
    if overlap:
        check_overlap_share(overlap, names, "overlap_share=")
    if op:
        recorded(op, point_keys(op, load_operating_point(op)), labels or None)   # they must read (fails closed)
    if labels and Path(labels).exists() and not Path(labels).is_dir():
        raise NotADirectoryError(f"labels={labels} is a file: give the folder group-qc decisions writes "
                                 f"(--output_dir)")
    return 0


def days_before(parent: str, today: str, op: str) -> int:
    """Day folders under `parent`, today's apart (a resumed day is still the first), judged at this point."""
    point = point_keys(op, load_operating_point(op))
    here, mine = Path(parent), Path(today).resolve()
    return sum(1 for p in (here.iterdir() if here.is_dir() else []) if p.is_dir() and p.resolve() != mine
               and verdict_files(p) and any(point.names(d) for d in operating_points_of(p)))


def missions(input_dir: str, spec: str) -> list[str]:
    """The missions a day judges (module doc); UserError naming the folder or the spec."""
    registry = load_registry()
    root = Path(input_dir)
    if not root.is_dir():
        raise UserError(f"input_dir {root} does not exist")
    try:
        chosen = registry.select(spec)
    except MissionError as exc:
        raise UserError(f"mission={spec}: {exc}") from None
    present = {registry.resolve(p.name).name for p in root.iterdir() if p.is_dir() and p.name in
               {f for m in chosen for f in registry.folders_of(m)}}
    return [m.name for m in chosen if m.name in present or not is_all(spec)]


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    what, args = (argv[0], argv[1:]) if argv else ("", [])

    def body() -> int:
        if what == "settings" and len(args) == 8:
            return check_settings(*args)
        if what == "days-before" and len(args) == 3:
            print(days_before(*args))
            return 0
        if what == "missions" and len(args) == 2:
            print("\n".join(missions(*args)))
            return 0
        raise UserError(f"usage: {__doc__.splitlines()[2].strip()} | days-before PARENT TODAY OP | missions "
                        f"INPUT_DIR SPEC")
    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
