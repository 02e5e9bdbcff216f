"""The miss-rate / overkill-rate curve over thresholds as a PNG (one line per mission, pooled in black), with the
chosen operating points marked. Missions are labelled M1… when no CJK font is installed (see plot_training)."""
from __future__ import annotations

from pathlib import Path

from .plot_training import cjk_font


def plot_curves(curves: dict, out: Path, title: str, chosen: dict | None = None) -> dict[str, str]:
    """curves: {"per_mission": {mission: [points]}, "overall": [points]} as in metrics.json; chosen: mission ->
    operating point entry. Returns each mission's legend name."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    font = cjk_font()
    if font:
        plt.rcParams["font.sans-serif"] = [font, *plt.rcParams["font.sans-serif"]]
    missions = list(curves["per_mission"])
    names = {m: (m if font else f"M{i}") for i, m in enumerate(missions, start=1)}
    fig, ax = plt.subplots(figsize=(6.5, 5))
    lines = [(names[m], curves["per_mission"][m], {}) for m in missions]
    lines.append(("overall", curves["overall"], {"color": "black", "linestyle": "--"}))
    for legend, points, style in lines:
        xy = [(p["miss_rate"], p["overkill_rate"]) for p in points
              if p["miss_rate"] is not None and p["overkill_rate"] is not None]
        if xy:
            line, = ax.plot([x for x, _ in xy], [y for _, y in xy], marker=".", drawstyle="steps-post",
                            label=legend, **style)
            entry = (chosen or {}).get(legend if legend == "overall" else next(m for m in missions
                                                                                if names[m] == legend))
            if entry and entry.get("threshold") is not None and entry.get("miss_rate") is not None:
                ax.plot(entry["miss_rate"], entry["overkill_rate"], marker="o", markersize=9, fillstyle="none",
                        color=line.get_color())
                ax.annotate(f"t={entry['threshold']:.3f}", (entry["miss_rate"], entry["overkill_rate"]),
                            textcoords="offset points", xytext=(6, 4), fontsize=7)
    ax.set_xlabel("miss rate (defective judged 通过)" if font else "miss rate (defective judged pass)")
    ax.set_ylabel("overkill rate (good judged 不通过)" if font else "overkill rate (good judged fail)")
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return names
