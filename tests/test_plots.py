"""Plots and their Chinese: a CJK font installed after matplotlib built its font cache is found, and without any
CJK font no drawn text holds a character that would be an empty box (issue 26)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
M, OTHER = "BBU接地线检查", "挡风板安装检查"


def _system_cjk_font() -> str | None:
    from matplotlib import font_manager
    from stage_b.pages.plot_training import CJK_FONTS
    for path in font_manager.findSystemFonts():
        try:
            name = font_manager.FontProperties(fname=path).get_name()
        except (OSError, RuntimeError, ValueError):
            continue
        if name in CJK_FONTS:
            return name
    return None


def test_a_cjk_font_installed_after_matplotlibs_cache_was_built_is_found(tmp_path):
    """matplotlib's font cache (fontlist-*.json) is written once; a font installed later is not in it, and plots kept
    drawing boxes. The cache is built here, then the CJK fonts are taken out of it: the state of a cache built
    before `apt install fonts-wqy-microhei`."""
    font = _system_cjk_font()
    if font is None:
        pytest.skip("no CJK font on this machine (Debian: fonts-wqy-microhei; .ci/run installs it)")
    env = {**os.environ, "MPLCONFIGDIR": str(tmp_path / "mpl")}
    build = "import matplotlib, matplotlib.font_manager as fm; print(matplotlib.get_cachedir())"
    cachedir = subprocess.run([sys.executable, "-c", build], env=env, capture_output=True, text=True, timeout=300,
                              check=True).stdout.strip()
    (cache,) = Path(cachedir).glob("fontlist-*.json")
    data = json.loads(cache.read_text(encoding="utf-8"))
    from stage_b.pages.plot_training import CJK_FONTS
    files = {f["fname"] for f in data["ttflist"] if f["name"] in CJK_FONTS}   # every face of those files goes
    data["ttflist"] = [f for f in data["ttflist"] if f["fname"] not in files]
    cache.write_text(json.dumps(data), encoding="utf-8")
    probe = ("import matplotlib.font_manager as fm; from stage_b.pages.plot_training import cjk_font, CJK_FONTS; "
             "print(any(f.name in CJK_FONTS for f in fm.fontManager.ttflist), cjk_font())")
    result = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == f"False {font}"   # not in the stale cache, found anyway


@pytest.fixture
def no_cjk_font(monkeypatch):
    """A machine without a CJK font: none of the names the plots look for is installed."""
    import stage_b.pages.plot_training as plot_training
    monkeypatch.setattr(plot_training, "CJK_FONTS", ("No Such CJK Font",))


@pytest.fixture
def drawn_text(monkeypatch):
    """Every text each figure holds when it is saved."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    from matplotlib.text import Text
    texts: list[str] = []
    save = Figure.savefig

    def savefig(fig, *args, **kwargs):
        texts.extend(t.get_text() for t in fig.findobj(Text) if t.get_text())
        return save(fig, *args, **kwargs)
    monkeypatch.setattr(Figure, "savefig", savefig)
    return texts


def _wide(texts):
    return [t for t in texts if any(unicodedata.east_asian_width(c) in "WF" for c in t)]


def _points():
    return [{"threshold": t, "miss_rate": 1 - t, "overkill_rate": t} for t in (0.2, 0.5, 0.8)]


def test_without_a_cjk_font_no_drawn_text_holds_chinese(tmp_path, no_cjk_font, drawn_text):
    """The operating curve's title ('verdict 不通过 iff …', from evaluation), axis labels, a title naming a Chinese
    folder, and mission names: drawn as M1/M2, fail/pass and '?', not as boxes."""
    from stage_b.pages.plot_operating import plot_curves, plot_reliability
    from stage_b.pages.plot_training import plot
    names = plot_curves({"per_mission": {M: _points(), OTHER: _points()}, "overall": _points()}, tmp_path / "c.png",
                        "verdict 不通过 iff p_fail >= t", chosen={M: {"threshold": 0.5, "miss_rate": 0.5,
                                                                    "overkill_rate": 0.5}})
    assert names == {M: "M1", OTHER: "M2"}
    rel = {"bins": [{"mean_p_fail": 0.5, "fail_share": 0.4, "n": 3}], "ece": 0.1, "n": 3}
    plot_reliability({"per_mission": {M: rel}, "overall": rel}, tmp_path / "r.png", f"reliability of p_fail: {M} 图片")
    steps = [{"step": s, "reward": 0.5, "rewards/qc_label/mean": 0.5, f"qc/label_reward/{M}": 0.5} for s in (1, 2)]
    plot(steps, tmp_path / "t.png", f"/runs/训练/{M}", [])
    assert drawn_text and _wide(drawn_text) == [], _wide(drawn_text)
    assert "verdict fail iff p_fail >= t" in drawn_text and "reliability of p_fail: M1 ??" in drawn_text
    assert "/runs/??/M1" in drawn_text


def test_with_a_cjk_font_the_chinese_is_drawn_as_it_is(tmp_path, drawn_text):
    if _system_cjk_font() is None:
        pytest.skip("no CJK font on this machine")
    from stage_b.pages.plot_operating import plot_curves
    plot_curves({"per_mission": {M: _points()}, "overall": _points()}, tmp_path / "c.png",
                "verdict 不通过 iff p_fail >= t")
    assert "verdict 不通过 iff p_fail >= t" in drawn_text and M in drawn_text


def test_a_pathological_training_log_line_is_refused_naming_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "logging.jsonl").write_bytes(b'{"reward": 0.5}\n' + b"[" * 100_000 + b"]" * 100_000 + b"\n")
    result = subprocess.run([sys.executable, "-m", "group_qc", "plot-training",
                             str(run)], cwd=REPO, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 2 and "logging.jsonl:2: JSON nested more than 64 deep" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


# hostile input (issue 34)
def test_a_reliability_diagram_of_a_thousand_missions_stays_a_page_high(tmp_path):
    from PIL import Image

    from stage_b.stats.calibration import calibration
    from stage_b.pages.plot_operating import MAX_PANELS, plot_reliability
    missions = [f"m{i}" for i in range(1000)]
    cal = calibration({m: [(0.9, "不通过"), (0.1, "通过")] for m in missions}, missions)
    plot_reliability(cal, tmp_path / "r.png", "t")
    with Image.open(tmp_path / "r.png") as im:
        assert im.height <= 3.2 * 100 * (MAX_PANELS // 3 + 1)
