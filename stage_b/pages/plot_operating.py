"""The miss-rate / overkill-rate curve over thresholds as a PNG (one line per mission, pooled in black), with the
chosen operating points marked; and the reliability diagram of p_fail (stage_b.stats.calibration). Missions are labelled
M1… when no CJK font is installed (see plot_training)."""
from __future__ import annotations

from pathlib import Path

from stage_b.contract.numbers import fmt_p
from stage_b.pages.plot_training import pyplot_for, text_for


def plot_curves(curves: dict, out: Path, title: str, chosen: dict | None = None) -> dict[str, str]:
    """curves: {"per_mission": {mission: [points]}, "overall": [points]} as in metrics.json; chosen: mission ->
    operating point entry. Returns each mission's legend name."""
    missions = list(curves["per_mission"])
    plt, font, names = pyplot_for(missions)
    fig, ax = plt.subplots(figsize=(6.5, 5))
    lines: list[tuple[str, list, dict]] = [(names[m], curves["per_mission"][m], {}) for m in missions]
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
                ax.annotate(f"t={fmt_p(entry['threshold'])}", (entry["miss_rate"], entry["overkill_rate"]),
                            textcoords="offset points", xytext=(6, 4), fontsize=7)
    text = text_for(font, names)
    ax.set_xlabel(text("miss rate (defective judged 通过)"))
    ax.set_ylabel(text("overkill rate (good judged 不通过)"))
    ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper right")
    ax.set_title(text(title), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return names


MAX_PANELS = 12


def plot_reliability(calibration: dict, out: Path, title: str) -> dict[str, str]:
    """The reliability diagram (stage_b.stats.calibration): one panel per mission and one pooled, mean p_fail per bin
    against the observed fail share, point size by the bin's groups, the diagonal for reference, ECE in each
    panel's title. Returns each mission's legend name."""
    missions = list(calibration["per_mission"])
    plt, font, names = pyplot_for(missions)
    # at most MAX_PANELS - 1 missions, the largest first (1,000 missions once drew a 990 x 106,880 px image); the
    # pooled panel always; metrics.json keeps every mission's numbers
    shown = sorted(missions, key=lambda m: -calibration["per_mission"][m]["n"])[:MAX_PANELS - 1]
    panels = [(names[m], calibration["per_mission"][m]) for m in missions if m in shown] + \
        [("overall" if len(shown) == len(missions) else f"overall ({len(missions) - len(shown)} missions not drawn)",
          calibration["overall"])]
    cols = min(3, len(panels))
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 3.2 * rows), squeeze=False)
    for ax, (name, rel) in zip(axes.flat, panels):
        ax.plot([0, 1], [0, 1], color="grey", linestyle=":", linewidth=1)
        if rel["bins"]:
            ax.scatter([b["mean_p_fail"] for b in rel["bins"]], [b["fail_share"] for b in rel["bins"]],
                       s=[20 + 200 * b["n"] / rel["n"] for b in rel["bins"]], color="tab:red", alpha=0.7)
            ax.plot([b["mean_p_fail"] for b in rel["bins"]], [b["fail_share"] for b in rel["bins"]],
                    color="tab:red", linewidth=1)
        ece = "n/a" if rel["ece"] is None else f"{rel['ece']:.3f}"
        ax.set_title(f"{name}\nECE {ece}, n={rel['n']}", fontsize=8)
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        ax.set_xlabel("mean p_fail in bin", fontsize=7)
        ax.set_ylabel("observed fail share", fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(text_for(font, names)(title), fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return names
