"""Builders and browser steps the test modules share (one place, not imported from one test module into another).
Fixtures live in conftest.py (the headless Chromium `browser` among them)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from stage_b.operating_point import MissionPoint

REPO = Path(__file__).resolve().parent.parent
M = "BBU接地线检查"
JUDGE_ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": ""}


def doc_pages() -> list[Path]:
    """The README and every page under docs/ it leads to: what the recipe and layout tests read."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in doc_pages())


# ----------------------------------------------------------------------------------------------------------------
# Files and commands
# ----------------------------------------------------------------------------------------------------------------
def stage_a_folder(folder: Path, n: int = 12) -> Path:
    """A Stage-A folder of n labelled groups of mission M (odd ones defective), two photos each."""
    from stage_a.discovery import Group
    from qc_core.jsonl import JsonlAppender
    from qc_core.records import make_record
    folder.mkdir(parents=True, exist_ok=True)
    with JsonlAppender(folder / f"{M}_stage_a.jsonl") as out:
        for k in range(n):
            label = "fail" if k % 2 else "pass"
            out.write(make_record(Group(f"QC-EV-20250101-{k}", M, label, ("a.jpg", "b.jpg")),
                                  [f"接地线×1/{'未捆扎' if label == 'fail' else '已捆扎'}", f"接地排×{k}"], "m"))
    return folder


def run_judge(*args, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "stage_b.judge", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=JUDGE_ENV)


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def random_adapter(tiny_model: Path, out: Path) -> Path:
    """A real PEFT LoRA checkpoint on the last 2 LLM layers with non-zero B matrices (so it changes outputs)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText
    from stage_b.lora import target_regex
    torch.manual_seed(0)
    model = AutoModelForImageTextToText.from_pretrained(tiny_model, dtype=torch.float32)
    peft = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, target_modules=target_regex(tiny_model, 2)))
    with torch.no_grad():
        for name, param in peft.named_parameters():
            if "lora_B" in name:
                param.normal_(0, 0.2)
    peft.save_pretrained(out)
    return out


# ----------------------------------------------------------------------------------------------------------------
# A review page in headless Chromium
# ----------------------------------------------------------------------------------------------------------------
def fresh_page(browser, page: Path, reviewer: str = "王工") -> None:
    """Opens a review page with nothing decided in this browser and a reviewer's name set (a page takes no decision
    without one)."""
    browser.get(page.as_uri())
    browser.execute_script("localStorage.clear(); if (arguments[0]) localStorage.setItem('group-qc:reviewer', "
                           "arguments[0]);", reviewer)
    browser.refresh()


def send_keys(browser, keys: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    ActionChains(browser).send_keys(keys).perform()


def wait_for_page(browser, url: str, timeout: float = 20) -> None:
    """Until the browser shows `url` (without its #fragment) with its scripts run: a click on a link returns before the
    next page has loaded, and reading it sooner reads the old page (3 of 15 runs failed so, before this wait)."""
    from selenium.webdriver.support.ui import WebDriverWait
    WebDriverWait(browser, timeout).until(
        lambda b: b.current_url.split("#")[0] == url and b.execute_script(
            "return document.readyState === 'complete' && !!document.getElementById('visible-count')"))


def export_decisions(browser, folder: Path) -> Path:
    """Clicks the page's export button and waits for Chromium to finish the download into `folder` (it writes a
    .crdownload file and renames it when done)."""
    folder.mkdir()
    browser.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(folder)})
    browser.find_element("id", "export-decisions").click()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (folder / "decisions.jsonl").exists():
        time.sleep(0.1)
    return folder / "decisions.jsonl"


def decided_badges(browser) -> dict[str, str]:
    """{group id: its card's decision badge} of every decided card on the page."""
    return browser.execute_script("""var out = {};
        document.querySelectorAll('.card[data-decided="1"]').forEach(function (c) {
          out[c.dataset.groupId] = c.querySelector('.decision-badge').textContent; });
        return out;""")


# ----------------------------------------------------------------------------------------------------------------
# A judged day
# ----------------------------------------------------------------------------------------------------------------
MISSIONS = ("BBU接地线检查", "挡风板安装检查")
SEED = 11
AUDITED_POINT = MissionPoint(threshold=0.5, threshold_fail=0.5, review_margin=0.0, certified=True,
                             promise="a test's")


def judged_day(tmp_path: Path, synthetic, per_label: int = 2, point: MissionPoint | None = None, p_of=None, reply_of=None,
            provenance: dict | None = None) -> tuple[Path, list[dict]]:
    """Verdict files as the judge writes them (stage_b.judge.verdict_record) over synthetic photos, then the judge's
    page over the folder. The k-th group's p_fail is p_of(k) and its reply reply_of(k, verdict), at `point`."""
    from qc_core.jsonl import write_jsonl_atomic
    from stage_b import judge
    from stage_b.operating_point import manual_point
    point = point or manual_point(0.5)
    p_of = p_of or (lambda k: 0.9 if k % 2 else 0.1)
    reply_of = reply_of or (lambda k, verdict: f"{verdict}\n理由: 图片_1 依据")
    photos = tmp_path / "photos"
    groups = synthetic.groups_of(synthetic.generate(photos, seed=5, groups_per_label=per_label,
                                                    missions=",".join(MISSIONS), unlabeled=True))
    out = tmp_path / "today"
    out.mkdir()
    verdicts = []
    for k, g in enumerate(groups):
        record = {"group_id": g["group_id"], "mission": g["mission"], "label": None, "images": g["images"],
                  "per_image": {f"图片_{i}": s for i, s in enumerate(g["summaries"], start=1)},
                  "input_dir": str(photos), "model": "/models/stage-a"}
        p = p_of(k)
        verdict = "不通过" if p >= point.threshold else "通过"
        verdicts.append(judge.verdict_record(record, p, point, reply_of(k, verdict), provenance or {}))
    for mission in MISSIONS:
        write_jsonl_atomic(judge.verdicts_path(out, mission), [v for v in verdicts if v["mission"] == mission])
    judge.write_review(out, list(MISSIONS), [photos])
    return out, verdicts


def audited_day(tmp_path: Path, synthetic) -> tuple[Path, list[dict]]:
    """Verdict files over synthetic photos at a certified point with every automatically decided group audited
    (audit share 1): grounded replies are audits, the others go to review. Every p_fail and reason is its own, to
    search the page for."""
    return judged_day(tmp_path, synthetic, point=AUDITED_POINT, p_of=lambda k: (0.61 if k % 2 else 0.101) + 0.037 * k,
                   reply_of=lambda k, verdict: (f"不通过\n理由: 依据见图片_1（第{k}组）" if verdict == "不通过"
                                                else f"通过\n理由: 各项检查符合要求（第{k}组）"),
                   provenance={"audit_share": 1.0, "audit_seed": 1})


def certified_op(model, path, **entry):
    """An operating point for the tiny model that fails every group without review (t = 0, t_fail = 0): grounding still
    sends a 不通过 whose summaries show no defect to review (its reason names none), so the groups split over the three
    routes."""
    from qc_core.checkpoints import checkpoint_identities
    point = {"threshold": 0.0, "threshold_fail": 0.0, "review_margin": 0.0, "certified": True,
             "target_miss_rate": 0.2, "confidence": 0.8, "n_fail": 10, "misses": 0,   # 0 of 10 certify 20% at 80%
             "promise": "miss rate <= 20% (a test's)", "escape": {"auto_passed": 10, "escapes": 0, "upper": 0.2},
             **entry}
    path.write_text(json.dumps({"format": 2, **checkpoint_identities(str(model), []), "confidence": 0.8,
                                "missions": {M: point}}, ensure_ascii=False), encoding="utf-8")
    return path


def judge_args(model, stage_a, op, out, *extra, review=False):
    return ["--model", str(model), "--stage_a_dir", str(stage_a), "--operating_point", str(op), "--output_dir",
            str(out), "--max_new_tokens", "6", *([] if review else ["--no_review"]), *extra]
