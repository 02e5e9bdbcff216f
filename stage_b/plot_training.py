"""`python -m stage_b.plot_training <run_dir> [--out training.png]`: a PNG of a GRPO run from ms-swift's
logging.jsonl: total reward, each reward's mean, frac_reward_zero_std, KL and completion length per step."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PANELS = (("reward", "total reward"), ("rewards/*/mean", "reward means"), ("frac_reward_zero_std",
          "groups with zero reward spread"), ("kl", "KL to reference"), ("completions/mean_length",
          "completion length (tokens)"))


def find_log(run_dir: Path) -> Path:
    if (run_dir / "logging.jsonl").is_file():
        return run_dir / "logging.jsonl"
    runs = sorted(run_dir.glob("v*/logging.jsonl"))  # ms-swift's v<N>-<timestamp> folders: newest last
    if runs:
        return runs[-1]
    raise FileNotFoundError(f"no logging.jsonl in {run_dir} or its v*/ folders; pass the GRPO --output_dir")


def read_steps(path: Path) -> list[dict]:
    steps = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a line being written right now
        if "reward" in row:
            steps.append(row)
    if not steps:
        raise ValueError(f"{path} has no GRPO training steps yet (no 'reward' entries)")
    return steps


def plot(steps: list[dict], out: Path, title: str) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    x = list(range(1, len(steps) + 1))
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(8, 2.2 * len(PANELS)), sharex=True)
    for ax, (key, label) in zip(axes, PANELS):
        if "*" in key:
            names = sorted({k for s in steps for k in s if k.startswith("rewards/") and k.endswith("/mean")})
            for name in names:
                ax.plot(x, [s.get(name) for s in steps], marker=".", label=name.split("/")[1])
            ax.legend(fontsize=7, loc="best")
        else:
            ax.plot(x, [s.get(key) for s in steps], marker=".")
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("step")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m stage_b.plot_training", description=__doc__)
    p.add_argument("run_dir", help="the GRPO --output_dir (or one of its v*/ run folders)")
    p.add_argument("--out", help="PNG path (default: <run folder>/training.png)")
    args = p.parse_args(argv)
    try:
        log = find_log(Path(args.run_dir))
        steps = read_steps(log)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    out = plot(steps, Path(args.out) if args.out else log.parent / "training.png", str(log.parent))
    print(f"{len(steps)} steps -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
