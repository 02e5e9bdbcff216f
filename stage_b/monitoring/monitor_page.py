"""The monitor's page: the days at a glance per mission (automation share, the live escape bound against the promise,
drift), as a PNG, and the table under it (stage_b.monitoring.monitor writes monitor.json; this renders it). Missions are
labelled M1… in the plot when no CJK font is installed (stage_b.pages.plot_training)."""
from __future__ import annotations

import html
import os
from pathlib import Path
from typing import cast

from stage_b.contract.numbers import pct
from stage_b.monitoring.monitor_format import MonitorDay, MonitorFile, MonitorMission
from stage_b.monitoring.owner_status import owner_status
from stage_b.pages.plot_training import pyplot_for, text_for
from stage_b.rules.workload import table
from stage_b.monitoring.timeline import timeline_html as render_timeline

STATUS_COLOUR = {"holds": "#27ae60", "unverified": "#b7950b", "withdrawn": "#c0392b", "not certified": "#7f8c8d"}



def plot_days(monitor: MonitorFile, out: Path) -> dict[str, str]:
    """monitor.png: one column per mission; rows: automation share, escape bound vs promise, drift p-values."""
    missions = list(monitor["missions"])
    plt, font, names = pyplot_for(missions)
    text = text_for(font, names)
    cols = max(1, len(missions))
    fig, axes = plt.subplots(4, cols, figsize=(3.4 * cols, 9.4), squeeze=False, sharex="col")
    alpha = monitor["drift_alpha"]
    legend_shown = False
    for c, mission in enumerate(missions):
        m = monitor["missions"][mission]
        days = m["days"]
        x = list(range(1, len(days) + 1))
        ax = axes[0][c]
        ax.plot(x, [d["automation_share"] if d["automation_share"] is not None else float("nan") for d in days],
                marker="o", color="#2c3e50")
        ax.set_ylim(-0.03, 1.03)
        ax.set_title(text(f"{names[mission]}: {m.get('state', m['status'])}, {m['status']}"), fontsize=9,
                     color=STATUS_COLOUR.get(m["status"]))
        for d_x, d in zip(x, days):   # tightened days shaded: a larger audit share, not a withdrawal
            if d.get("state") == "tightened":
                ax.axvspan(d_x - 0.5, d_x + 0.5, color="#f5cba7", alpha=0.6, lw=0)
        if c == 0:
            ax.set_ylabel("automation share")
        ax = axes[1][c]
        ax.vlines(x, [d["escape_lower"] for d in days], [d["escape_upper"] for d in days], color="#85c1e9",
                  linewidth=9, alpha=0.8, label="live escape bound (lower to upper)")
        ax.plot(x, [d["cum_escapes"] / d["cum_audited"] if d["cum_audited"] else float("nan") for d in days],
                marker=".", color="#1f618d", label="escapes / audited")
        promise = m["promise"]["escape_rate"]
        if promise is not None:
            ax.axhline(promise, color="#c0392b", linestyle="--", label="promise")
        ax.set_ylim(-0.03, 1.03)
        if c == 0:
            ax.set_ylabel("escape rate of auto-passed")
        if promise is not None and not legend_shown:   # the first panel that has every element explains them
            ax.legend(fontsize=6, loc="upper right")
            legend_shown = True
        _drift_panel(axes[2][c], days, x, alpha, first=c == 0)
        _detector_panel(axes[3][c], days, x, m["promise"].get("alarm_level"), text, first=c == 0)
        for r in range(4):
            axes[r][c].grid(alpha=0.3)
    fig.suptitle(text("promises on live work, day by day"), fontsize=10)
    # margins in inches, for any number of columns (tight_layout measured every label: 1 of the monitor's 2.5 s)
    width = fig.get_figwidth()
    fig.subplots_adjust(left=0.75 / width, right=1 - 0.12 / width, top=0.94, bottom=0.055, hspace=0.15, wspace=0.22)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return names


def day_cells(mission: str, m: MonitorMission, d: MonitorDay) -> tuple:
    """One row of the page's day table (its columns: DAY_COLUMNS)."""
    waiting = (f" (+{d['escapes_unconfirmed']} waiting for a second person: "
               + ", ".join(w["group_id"] for w in d["unconfirmed"]) + ")" if d.get("escapes_unconfirmed") else "")
    waiting += "".join(f" (unresolved: {u['group_id']}, {u['why']})" for u in d.get("unresolved") or [])
    return (mission, d["day"], d["judged"], pct(d["automation_share"]), d.get("state", ""),
            pct(d["audit_share"]) + (f" (asked {pct(d['share_asked'])})" if d.get("share_note") else ""),
            d["audited"], f"{d['escapes']} / {d['audited_auto_passed']}" + waiting,
            f"{d['cum_escapes']} / {d['cum_audited']}",
            f"[{pct(d['escape_lower'])}, {pct(d['escape_upper'])}]", pct(m["promise"]["escape_rate"]),
            pct(d.get("miss_rate_estimate")), _num(d.get("miss_detector")),
            f"{_num(d.get('escape_detector'))} vs {pct(d.get('escape_null'))}",
            "n/a" if d["agreement"] is None else f"{pct(d['agreement'])} of {d['reviewed_labelled']}",
            d["drift"]["why"] or "no", d["status"], pct(d.get("next_audit_share")))


DAY_COLUMNS = ["mission", "day", "judged", "automation", "inspection", "audit share", "audited",
               "escapes / audited auto-passed (day)", "cumulative", "live escape bound", "promised escape rate",
               "live miss rate (weighted)", "miss-rate detector", "escape detector vs the rate the mix allows",
               "reviewer agreement with the model", "drift", "status", "next audit share"]


def work_table(monitor: MonitorFile) -> str:
    """The days' work and its price (stage_b.rules.workload), or nothing when the file has none."""
    e = html.escape
    work = monitor.get("workload") or {}
    if not work:
        return ""
    rows = "".join("<tr>" + "".join(f"<td>{e(str(v))}</td>" for v in (day, *row)) + "</tr>"
                   for day, w in work.items() for row in table(w)[1])
    columns = table(next(iter(work.values())))[0]
    pace = next(iter(work.values()))["pace_source"]
    return (f"<h2>The days' work, priced at {e(pace)}</h2><table><tr>"
            + "".join(f"<th>{e(c)}</th>" for c in ["day", *columns]) + f"</tr>{rows}</table>")


def _drift_panel(ax, days: list, x: list[int], alpha: float, first: bool) -> None:
    """The two drift tests' p-values per day against their level (label-free: they tighten, never withdraw)."""
    for key, label, colour in (("ks_p", "p_fail (KS)", "#8e44ad"), ("defect_p", "defect share (Fisher)", "#d35400")):
        ax.plot(x, [max(d["drift"][key], 1e-300) if d["drift"][key] is not None else float("nan") for d in days],
                marker="o", label=label, color=colour)
    ax.axhline(alpha, color="black", linestyle=":", label=f"alpha {alpha:g}")
    ax.set_yscale("log")
    lowest = min([d["drift"][k] for d in days for k in ("ks_p", "defect_p") if d["drift"][k]] or [1.0])
    ax.set_ylim(min(alpha / 10, lowest / 3), 1.5)
    if first:
        ax.set_ylabel("drift p-value")
        ax.legend(fontsize=6, loc="lower left")


def _detector_panel(ax, days: list, x: list[int], level: float | None, text, first: bool) -> None:
    """The two detectors on label evidence per day against the level at which they withdraw; the days' names."""
    for key, label, colour in (("miss_detector", "miss-rate detector", "#c0392b"),
                               ("escape_detector", "escape detector (mix-adjusted)", "#1f618d")):
        ax.plot(x, [max(d.get(key) or 1.0, 1e-3) for d in days], marker="o", label=label, color=colour)
    if level:
        ax.axhline(level, color="black", linestyle=":", label=f"withdraws at {level:g}")
    ax.set_yscale("log")
    ax.set_xticks(x)
    ax.set_xticklabels([text(d["day"]) for d in days], rotation=30, fontsize=7)
    if first:
        ax.set_ylabel("detector (label evidence)")
        ax.legend(fontsize=6, loc="upper left")


def render(monitor: MonitorFile, png_name: str) -> str:
    e = html.escape
    rows = ["<tr>" + "".join(f"<td>{e(str(v))}</td>" for v in day_cells(mission, m, d)) + "</tr>"
            for mission, m in monitor["missions"].items() for d in m["days"]]
    status = "".join(
        f"<li><b style='color:{STATUS_COLOUR.get(m['status'], '#222')}'>{e(mission)}: "
        f"{e(owner_status(m, monitor.get('restore')))}</b></li>" for mission, m in monitor["missions"].items())
    details = "".join(
        f"<li>{e(mission)}: {e(m['status'])}: {e(m['why'])}<br>inspection <b>{e(str(m.get('state')))}</b>: "
        f"{e(str(m.get('state_why')))}; next day's audit share {pct(m.get('next_audit_share'))}</li>"
        for mission, m in monitor["missions"].items())
    family = monitor["family"].get("text")
    joint = family if family and not family.startswith("no joint statement") else None
    years = monitor.get("false_alarm_years")
    return f"""<!doctype html>
<html lang="zh-CN"><head><meta charset="utf-8"><title>group-qc monitor</title>
<style>body {{ font-family: "WenQuanYi Micro Hei", "Noto Sans CJK SC", sans-serif; margin: 1.5em; }}
table {{ border-collapse: collapse; font-size: .85em; }} \
th, td {{ border: 1px solid #ccc; padding: .2em .5em; }}</style>
</head><body>
<h1>Promises on live work</h1>
<ul class="status">{status}</ul>
<p>Operating point {e(monitor['operating_point']['file'])} (identity \
{e(str(monitor['operating_point'].get('identity') or monitor['operating_point']['sha256'])[:12])}…);
days: {e(', '.join(monitor['days']))}; confidence {pct(monitor['confidence'])}.\
{(' ' + e(joint) + '.') if joint else ''}</p>
{timeline_html(monitor)}
<img src="{e(png_name)}" alt="days at a glance" style="max-width: 100%">
<table><tr>{''.join(f'<th>{e(c)}</th>' for c in DAY_COLUMNS)}</tr>
{''.join(rows)}
</table>
{work_table(monitor)}
<h2>How the guard decides</h2>
<ul>{details}</ul>
{('<p>' + e(family) + '.</p>') if family and not joint else ''}
<p><b>What withdraws a promise: label evidence only.</b> The miss-rate detector holds live work to the miss rate the
QC owner signed (of defective work orders, the share passed without a person), weighing each labelled group by how
it was chosen (audits 1/share, reviewed groups 1); the escape detector holds the audited auto-passed groups to the
escape rate the promise allows at the day's mix of work (more defective work raises the escape rate at the same miss
rate, so that alone withdraws nothing). Either withdraws when it reaches its level: while a promise holds, each waits
on average at least {years if years is not None else '?'} years per mission before a false alarm (e-detectors,
stage_b.stats.detector). <b>What tightens inspection:</b> drift of p_fail or of the share of summaries showing a defect
(tests at {monitor['drift_alpha']:g} each per mission and day), an escape that gives the escape detector 10:1, the
escape rate's live bound above its promise: the next day is audited at the tightened share (a tenfold rise of the
escape rate seen within a day), back to normal after {monitor.get('tightened_clean_days')} tightened day(s) in a row
whose audits bring no evidence against the promise. The live escape bound (a confidence sequence, valid on every day
at once) says when a promise holds.</p>
</body></html>
"""


def timeline_html(monitor: MonitorFile) -> str:
    """The operating points before this one, oldest first (monitor.json's `timeline`; stage_b.monitoring.timeline)."""
    return render_timeline(cast(dict, monitor))


def _num(x) -> str:
    return "n/a" if x is None else f"{x:.3g}"


def write_outputs(monitor: MonitorFile, text: str, out: Path) -> Path:
    """monitor.json (`text`), monitor.png and index.html in `out`, all or none: each is written to a temporary file
    first and the three are renamed into place only when all are whole (a full disk leaves the last run's files as
    they were, and says which file it could not write). Returns the page's path."""
    out = Path(out)
    tag = f".tmp-{os.getpid()}"
    targets = {out / "monitor.png": out / f".monitor.png{tag}.png", out / "index.html": out / f".index.html{tag}",
               out / "monitor.json": out / f".monitor.json{tag}"}   # the judge reads monitor.json: renamed last
    writing = None
    try:
        writing = out / "monitor.png"
        plot_days(monitor, targets[writing])
        writing = out / "index.html"
        targets[writing].write_text(render(monitor, "monitor.png"), encoding="utf-8")
        writing = out / "monitor.json"
        targets[writing].write_text(text, encoding="utf-8")
    except OSError as exc:
        for tmp in targets.values():
            tmp.unlink(missing_ok=True)
        raise OSError(f"cannot write {writing} ({exc.strerror or exc}): nothing of this monitor run was written, the "
                      f"files of the last run stand; free space in {out} and run the monitor again") from None
    for final, tmp in targets.items():
        os.replace(tmp, final)
    return out / "index.html"
