"""`group-qc plot-training <run_dir> [--out training.png]`: a PNG of a GRPO run from ms-swift's
logging.jsonl: total reward, each reward's mean, frac_reward_zero_std, KL and completion length per step,
and, one curve per mission, the label reward, the zero-advantage share and (with validation during
training) the greedy validation balanced accuracy, with the best step marked.

Mission names are Chinese: the plot uses a CJK font when one is installed (Debian: fonts-wqy-microhei) and
otherwise labels missions M1, M2, … (printed with their names) rather than drawing empty boxes.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from qc_core.errors import UserError
from qc_core.exits import run_cli
from qc_core.jsonl import line_problem

from stage_b.stats.training_signal import BEST_METRIC, TRAIN_PREFIX, VAL_PREFIX

PANELS = (("reward", "total reward"), ("rewards/*/mean", "reward means"), ("frac_reward_zero_std",
          "groups with zero reward spread"), ("kl", "KL to reference"), ("completions/mean_length",
          "completion length (tokens)"))
MISSION_PANELS = ((f"{TRAIN_PREFIX}/label_reward/", "label reward\nper mission"),
                  (f"{TRAIN_PREFIX}/zero_advantage/", "zero-advantage share\nper mission"),
                  (f"eval_{VAL_PREFIX}/balanced_accuracy/", "validation balanced\naccuracy per mission"))
CJK_FONTS = ("WenQuanYi Micro Hei", "WenQuanYi Zen Hei", "Noto Sans CJK SC", "Source Han Sans SC", "SimHei",
             "Microsoft YaHei", "PingFang SC")


def find_log(run_dir: Path) -> Path:
    if (run_dir / "logging.jsonl").is_file():
        return run_dir / "logging.jsonl"
    runs = sorted(run_dir.glob("v*/logging.jsonl"))  # ms-swift's v<N>-<timestamp> folders: newest last
    if runs:
        return runs[-1]
    raise FileNotFoundError(f"no logging.jsonl in {run_dir} or its v*/ folders; pass the GRPO --output_dir")


def _step(row: dict, default: int) -> int:
    done = str(row.get("global_step/max_steps", "")).partition("/")[0]
    return int(done) if done.isdigit() else default


def read_steps(path: Path) -> tuple[list[dict], list[dict]]:
    """(training rows, evaluation rows), each with its global step under `step`."""
    train: list[dict] = []
    evals: list[dict] = []
    for number, line in enumerate(path.read_bytes().splitlines(), start=1):
        problem = line_problem(line)
        if problem:   # no line ms-swift writes: refused before the parser meets it (a RecursionError)
            raise UserError(f"{path}:{number}: {problem}; remove that line")
        try:
            row = json.loads(line.decode("utf-8"))
        except ValueError:
            continue  # a line being written right now
        if "reward" in row:
            train.append({**row, "step": _step(row, len(train) + 1)})
        elif any(k.startswith("eval_") for k in row):
            evals.append({**row, "step": _step(row, len(evals) + 1)})
    if not train:
        raise UserError(f"{path} has no GRPO training steps yet (no 'reward' entries)")
    return train, evals


def cjk_font() -> str | None:
    """The first CJK font of CJK_FONTS that matplotlib can use, or None. matplotlib lists fonts from a cache built the
    first time it ran (fontlist-*.json in its cache folder): a font installed since (`apt install fonts-wqy-microhei`)
    is not in it. So when the cache holds none, the font files on the system now are looked at, and new ones added."""
    from matplotlib import font_manager
    manager = font_manager.fontManager

    def known() -> str | None:
        installed = {f.name for f in manager.ttflist}
        return next((name for name in CJK_FONTS if name in installed), None)
    if known():
        return known()
    cached = {f.fname for f in manager.ttflist}
    for path in font_manager.findSystemFonts():
        if path not in cached:
            try:
                manager.addfont(path)
            except (OSError, RuntimeError, ValueError):   # a file FreeType cannot read: not a font to use
                continue
    return known()


def pyplot_for(missions: list[str]):
    """(matplotlib.pyplot on the Agg backend with a CJK font first where one is installed, the font or None, each
    mission's legend name: itself, or M1… without a CJK font), as every plot of group-qc starts."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    font = cjk_font()
    if font:
        plt.rcParams["font.sans-serif"] = [font, *plt.rcParams["font.sans-serif"]]
    return plt, font, {m: (m if font else f"M{i}") for i, m in enumerate(missions, start=1)}


def plain_text(text: str, names: dict[str, str]) -> str:
    """`text` as drawn without a CJK font: each mission by its legend name (M1, …), 不通过/通过 as fail/pass, and any
    other wide (CJK) character as '?', never an empty box."""
    import unicodedata
    for mission in sorted(names, key=len, reverse=True):
        text = text.replace(mission, names[mission])
    text = text.replace("不通过", "fail").replace("通过", "pass")
    return "".join("?" if unicodedata.east_asian_width(c) in "WF" else c for c in text)


def text_for(font: str | None, names: dict[str, str]):
    """How a plot's own words are drawn: as they are with a CJK font, else `plain_text`."""
    return (lambda text: text) if font else (lambda text: plain_text(text, names))


def _series(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    points = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
    return [p[0] for p in points], [p[1] for p in points]


def plot(steps: list[dict], out: Path, title: str, evals: list[dict] | None = None,
         best_step: int | None = None) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Writes the PNG; returns (the legend name of each mission: itself, or M1… without a CJK font;
    each panel's y label -> the curves drawn in it)."""
    evals = evals or []
    missions = sorted({k[len(prefix):] for prefix, _ in MISSION_PANELS for r in [*steps, *evals] for k in r
                       if k.startswith(prefix)})
    plt, font, names = pyplot_for(missions)
    panels = [*PANELS, *(p for p in MISSION_PANELS if any(k.startswith(p[0]) for r in [*steps, *evals] for k in r))]
    fig, axes = plt.subplots(len(panels), 1, figsize=(8, 2.2 * len(panels)), sharex=True)
    drawn: dict[str, list[str]] = {}
    for ax, (key, label) in zip(axes, panels):
        curves = drawn.setdefault(label, [])
        rows = evals if key.startswith("eval_") else steps
        if key == "rewards/*/mean":
            series = sorted({k for s in rows for k in s if k.startswith("rewards/") and k.endswith("/mean")})
            labels = [k.split("/")[1] for k in series]
        elif key.endswith("/"):
            series = [key + m for m in missions]
            labels = [names[m] for m in missions]
        else:
            series, labels = [key], [None]
        for name, legend in zip(series, labels):
            x, y = _series(rows, name)
            if x:
                ax.plot(x, y, marker=".", label=legend)
                curves.append(legend or key)
        if key.startswith("eval_"):   # the overall number the best checkpoint is picked by
            x, y = _series(rows, f"eval_{BEST_METRIC}")
            ax.plot(x, y, color="black", linestyle="--", marker="o", label="overall")
            curves.append("overall")
        if any(labels):
            ax.legend(fontsize=7, loc="best")
        if best_step is not None and key.startswith("eval_"):
            ax.axvline(best_step, color="grey", linestyle=":", linewidth=1)
            right = best_step > (steps[0]["step"] + steps[-1]["step"]) / 2
            ax.annotate(f"best step {best_step} ", (best_step, 0.02), xycoords=("data", "axes fraction"), fontsize=7,
                        ha="right" if right else "left")
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("step")
    fig.suptitle(text_for(font, names)(title), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return names, drawn


def best_step_of(run_folder: Path) -> int | None:
    """The best step group_qc_run.json recorded (validation during training), if any."""
    try:
        return json.loads((run_folder / "group_qc_run.json").read_text(encoding="utf-8"))["validation"]["best_step"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="group-qc plot-training", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run_dir", help="the GRPO --output_dir (or one of its v*/ run folders)")
    p.add_argument("--out", help="PNG path (default: <run folder>/training.png)")
    args = p.parse_args(argv)
    return run_cli(lambda: _plot_run(args))


def _plot_run(args) -> int:
    log = find_log(Path(args.run_dir))
    steps, evals = read_steps(log)
    best = best_step_of(log.parent)
    out = Path(args.out) if args.out else log.parent / "training.png"
    names, _ = plot(steps, out, str(log.parent), evals, best)
    for mission, name in names.items():
        if name != mission:
            print(f"{name} = {mission}  (no CJK font: install fonts-wqy-microhei for the names in the plot)")
    print(f"{len(steps)} steps, {len(evals)} evaluations"
          + (f", best step {best} by {BEST_METRIC}" if best is not None else "") + f" -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
