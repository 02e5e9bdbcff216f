"""What the judge's summary opens with: each mission's status line from the monitor the day was judged with
(stage_b.monitoring.owner_status), and whether the day holds gold (stage_b.labels.gold; on by default once labels
exist: stage_b.judging.settings.default_gold)."""
from __future__ import annotations

from pathlib import Path

from stage_b.monitoring.monitor_file import load_monitor
from stage_b.monitoring.owner_status import owner_status

def print_gold(gold: tuple, gold_share: float, labels, verdicts: list[dict]) -> None:
    """What the summary says of gold: how many known-answer groups the day holds, at which share, from where, and how
    to turn it off (gold is on by default once labels exist: stage_b.judging.settings.default_gold)."""
    mixed = sum(bool(v.get("gold")) for v in verdicts)
    if gold:
        print(f"gold: {mixed} known-answer group(s) among the day's review cards ({gold_share:g} of each "
              f"mission's groups, from {', '.join(sorted({str(Path(g).parent) for g in gold}))}); they "
              f"measure each reviewer (group-qc decisions' reviewer table); --gold_share 0 turns gold off")
    elif labels and gold_share == 0:
        print("gold: off (--gold_share 0): no reviewer is measured on known answers today")


def print_owner_status(monitor_path, missions) -> None:
    """Each mission's status line as the monitor the day was judged with left it (stage_b.monitoring.owner_status),
    first in the summary."""
    if not monitor_path:
        return
    monitor = load_monitor(monitor_path)
    for mission in missions:
        if mission in monitor["missions"]:
            print(f"{mission}: {owner_status(monitor['missions'][mission], monitor.get('restore'))}")
