"""Builders and browser steps the test modules share (one place, not imported from one test module into another).
Fixtures live in conftest.py (the headless Chromium `browser` among them)."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from qc_core.missions import load_registry
from stage_b.rules.operating_point import MissionPoint
from stage_b.contract.verdict import FAIL, PASS
from stage_b.judging import day_review
from stage_b.judging import verdict_file
from stage_b.monitoring import days as monitor_days

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
    return subprocess.run([sys.executable, "-m", "group_qc", "judge", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=JUDGE_ENV)


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def random_adapter(tiny_model: Path, out: Path) -> Path:
    """A real PEFT LoRA checkpoint on the last 2 LLM layers with non-zero B matrices (so it changes outputs)."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText
    from stage_b.train.lora import target_regex
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
    folder.mkdir(exist_ok=True)
    browser.execute_cdp_cmd("Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(folder)})
    name = browser.execute_script("return window.groupQcExportName()")   # decisions-<reviewer>-<day>-<date>.jsonl
    browser.find_element("id", "export-decisions").click()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not (folder / name).exists():
        time.sleep(0.1)
    return folder / name


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


def judged_day(tmp_path: Path, synthetic, per_label: int = 2, point: MissionPoint | None = None, p_of=None,
            reply_of=None, provenance: dict | None = None) -> tuple[Path, list[dict]]:
    """Verdict files as the judge writes them (stage_b.judging.verdict_file.verdict_record) over synthetic photos,
    then the judge's
    page over the folder. The k-th group's p_fail is p_of(k) and its reply reply_of(k, verdict), at `point`."""
    from qc_core.jsonl import write_jsonl_atomic
    from stage_b.rules.operating_point import manual_point
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
        verdicts.append(verdict_file.verdict_record(record, p, point, reply_of(k, verdict), provenance or {}))
    for mission in MISSIONS:
        write_jsonl_atomic(verdict_file.verdicts_path(out, mission), [v for v in verdicts if v["mission"] == mission])
    day_review.write_day_review(out, list(MISSIONS), [photos])
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
             "miss_rate_upper": 0.149, "promise": "miss rate <= 20% (a test's)",
             "escape": {"auto_passed": 10, "escapes": 0, "upper": 0.2},
             "profile": {"p_fail": [0.9] * 10 + [0.1] * 10, "defect_groups": 10, "groups": 20}, **entry}
    path.write_text(json.dumps({"format": 2, **checkpoint_identities(str(model), []), "confidence": 0.8,
                                "missions": {M: point}}, ensure_ascii=False), encoding="utf-8")
    return path


def judge_args(model, stage_a, op, out, *extra, review=False):
    """The judge's argv; without --monitor or --no_monitor in `extra`, a test's day decided without a monitor (said in
    words, as the judge requires for certified work)."""
    unmonitored = [] if {"--monitor", "--no_monitor"} & set(map(str, extra)) else \
        ["--no_monitor", "a test's day, no monitor"]
    return ["--model", str(model), "--stage_a_dir", str(stage_a), "--operating_point", str(op), "--output_dir",
            str(out), "--max_new_tokens", "6", *([] if review else ["--no_review"]), *unmonitored, *extra]


# ----------------------------------------------------------------------------------------------------------------
# Commands and scripts
# ----------------------------------------------------------------------------------------------------------------
def load_script(name: str):
    """scripts/<name>.py (a user launcher, not a package module) as a module, for tests of its functions."""
    import importlib
    if str(REPO / "scripts") not in sys.path:
        sys.path.insert(0, str(REPO / "scripts"))
    return importlib.import_module(name)


def run_command(argv, log: Path, env=None, timeout=900) -> str:
    """Runs a command from the repository root, offline, CPU only; its output goes to `log`; it must succeed."""
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "",
                                 "PYTHON": sys.executable, **(env or {})})
    log.write_text(result.stdout + result.stderr, encoding="utf-8")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return result.stdout + result.stderr


# ----------------------------------------------------------------------------------------------------------------
# Stage-A files of every mission
# ----------------------------------------------------------------------------------------------------------------
REGISTRY = load_registry()
ALL_MISSIONS = REGISTRY.names   # every mission of the registry (MISSIONS above is the two a judged day has)


def write_stage_a_all_missions(folder, groups_per_mission=10, mission_field=None, unreviewed=()):
    """<folder>/<mission>_stage_a.jsonl for every mission, through Stage-A's own record builder and appender; groups
    numbered in `unreviewed` get label None, as Stage-A --unlabeled writes them."""
    from qc_core.jsonl import JsonlAppender
    from qc_core.records import make_record
    from stage_a.discovery import Group
    folder.mkdir(parents=True, exist_ok=True)
    for m in REGISTRY.missions:
        with JsonlAppender(folder / f"{m.stage_a_stem}.jsonl") as out:
            for k in range(groups_per_mission):
                label = None if k in unreviewed else "fail" if k % 2 else "pass"
                images = tuple(f"{m.name}/x/g{k}/{i}.jpg" for i in range(1, 1 + k % 3 + 1))
                group = Group(f"QC-T-20250101-{k}", mission_field or m.name, label, images)
                out.write(make_record(group, [f"摘要{i}" for i in range(len(images))], model="m"))
    return folder


# ----------------------------------------------------------------------------------------------------------------
# The judge and evaluation in process, with a stand-in engine (the `engine` and `model` fixtures, conftest.py)
# ----------------------------------------------------------------------------------------------------------------
A, B = "BBU接地线检查", "挡风板安装检查"


class StandInEngine:
    """Stands in for stage_b.model.generate.VerdictEngine: p_fail from `P_FAIL[(mission, group id)]`, a two-line reply
    that agrees with it, and a log of what it was asked (`asked`: (method, mission, group id))."""
    P_FAIL: dict = {}
    asked: list = []

    def __init__(self, model, **kwargs):
        self.model = model

    def verdict_logprobs(self, rows):
        scores = []
        for row in rows:
            self.asked.append(("verdict_logprobs", row["mission"], row["group_id"]))
            p = self.P_FAIL[(row["mission"], row["group_id"])]
            scores.append({FAIL: math.log(p), PASS: math.log1p(-p)})
        return scores, {}

    def generate(self, rows, n=1, prefixes=None):
        replies = []
        for i, row in enumerate(rows):
            self.asked.append(("generate", row["mission"], row["group_id"]))
            p = self.P_FAIL[(row["mission"], row["group_id"])]
            verdict = FAIL if p >= 0.5 else PASS
            head = prefixes[i] if prefixes else f"{verdict}\n"
            rest = ("理由: " if head.endswith("\n") else "") + ("图片_1 接地线未捆扎" if head.startswith(FAIL)
                                                               else "图片_1 接地线已捆扎")
            replies.append([head + rest] * n)
        return replies, {}


def write_stage_a_groups(folder: Path, groups: dict[str, list[tuple[str, str | None]]]) -> Path:
    """<folder>/<mission>_stage_a.jsonl through Stage-A's record builder; groups: {mission: [(group id, label)]}."""
    from qc_core.jsonl import JsonlAppender
    from qc_core.records import make_record
    from stage_a.discovery import Group
    folder.mkdir(parents=True, exist_ok=True)
    for mission, members in groups.items():
        with JsonlAppender(folder / f"{REGISTRY.resolve(mission).stage_a_stem}.jsonl") as out:
            for gid, label in members:
                summary = "接地线×1/未捆扎" if label == "fail" else "接地线×1/已捆扎"
                out.write(make_record(Group(gid, mission, label, ("1.jpg",)), [summary], model="m"))
    return folder


def jsonl_records(path: Path) -> list[dict]:
    """The records of a JSONL file, read as the product reads them (qc_core.jsonl.iter_jsonl)."""
    from qc_core.jsonl import iter_jsonl
    return [rec for _, rec in iter_jsonl(path)]


RUN_SPLIT, EVAL_SEED = (0.5, 7), 8


def overlap_ids(overlapping: int) -> list[str]:
    """Group ids: 3 in the validation split of both the run and the evaluation, `overlapping` in the evaluation's
    validation split but the run's train split, 2 in the evaluation's train split (not scored)."""
    from stage_b.data.split import split_of
    want = {"both": 3, "overlap": overlapping, "unscored": 2}
    found = {k: [] for k in want}
    for k in range(10_000):
        gid = f"QC-OV-20250101-{k}"
        run_val = split_of(gid, *RUN_SPLIT) == "val"
        eval_val = split_of(gid, RUN_SPLIT[0], EVAL_SEED) == "val"
        kind = "both" if run_val and eval_val else "overlap" if eval_val else "unscored" if not eval_val else None
        if kind and len(found[kind]) < want[kind]:
            found[kind].append(gid)
        if all(len(found[k]) == n for k, n in want.items()):
            return [g for kind in found.values() for g in kind]
    raise AssertionError("not enough ids")


def trained_run(tmp_path: Path, ids: list[str]) -> Path:
    """A run folder as the plugin leaves it: group_qc_run.json (written by the real record builder) beside a LoRA
    checkpoint folder."""
    from stage_b.data.dataset import build_rows, stage_a_files
    from stage_b.train.run_record import build_run_record, write_run_record
    from stage_b.data.settings import Selection
    stage_a = write_stage_a_groups(tmp_path / "sa", {A: [(g, "fail" if k % 2 else "pass") for k, g in enumerate(ids)]})
    selection = Selection(stage_a_dir=str(stage_a), missions=A, val_ratio=RUN_SPLIT[0], seed=RUN_SPLIT[1])
    _, train = build_rows(selection, "train", allow_empty=True)
    _, val = build_rows(selection, "val", allow_empty=True)
    run = tmp_path / "run" / "v0-20250101-000000"
    (run / "checkpoint-2").mkdir(parents=True)
    (run / "checkpoint-2" / "adapter_config.json").write_text("{}", encoding="utf-8")
    files = stage_a_files(selection, REGISTRY.select(A), REGISTRY)
    write_run_record(run, build_run_record(selection, train, val, files, rewards=["qc_label"], reward_weights=[1.0],
                                           lora={}, world_size=1, output_dir=str(run)))
    return run / "checkpoint-2"


# ----------------------------------------------------------------------------------------------------------------
# Decisions files and the monitor
# ----------------------------------------------------------------------------------------------------------------
def write_decision_file(tmp_path, out, verdict, decision="不通过", name="d.jsonl", reviewer="r"):
    """tmp_path/<name>: `reviewer`'s decision on `verdict`, whose verdict file is in `out`, as a review page exports
    it."""
    from qc_core.jsonl import file_sha256, write_jsonl_atomic
    from stage_b.labels.decision_lines import decision_line
    path = verdict_file.verdicts_path(out, verdict["mission"])
    line = decision_line(verdict, decision, reviewer, {"file": str(path.resolve()), "sha256": file_sha256(path)})
    write_jsonl_atomic(tmp_path / name, [line])
    return tmp_path / name


def write_day(folder, digest, groups, mission=M):
    """groups: [(group id, verdict, p_fail, route, defect summary?)] as the judge writes them."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = [{"group_id": g, "mission": mission, "verdict": v, "p_fail": p, "route": r, "needs_review": r == "review",
              "audit_share": 0.5, "operating_point": getattr(digest, "identity", digest),
              "summaries": ["接地线松动" if defect else "接地线连接牢固"]} for g, v, p, r, defect in groups]
    with open(folder / f"{mission}_verdicts.jsonl", "a", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")


def write_labels(folder, decided: dict, confirmed: bool = True, records: bool = False):
    """decided: {(mission, group id): "通过" | "不通过"}, reviewer r's import log, chained as the import does; with
    `confirmed`, a second reviewer (r2) decided each 不通过 too, so every escape counts (stage_b.monitoring.monitor);
    with `records`, each decision carries the verdict line it was made on (a later import rewrites the labels)."""
    from stage_b.labels.decisions_log import append_log
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "decisions.jsonl").unlink(missing_ok=True)
    append_log(folder / "decisions.jsonl", [
        {"group_id": gid, "mission": mission, "decision": decision, "note": "", "reviewer": who,
         "decided_at": "2026-11-27T10:00:00+00:00", "verdict": None, "p_fail": None,
         "source": {"file": "x", "sha256": "y"},
         "record": {"group_id": gid, "mission": mission, "images": ["1.jpg"], "summaries": ["接地线连接牢固"],
                    "verdict": "通过", "p_fail": 0.05} if records else {}}
        for (mission, gid), decision in decided.items()
        for who in (("r", "r2") if confirmed and decision == "不通过" else ("r",))], "")


def run_monitor(tmp_path, op, op_path, digest, folders, labels):
    from stage_b.monitoring import monitor as mon
    days = monitor_days.read_days(folders, digest, load_registry())
    read = monitor_days.read_labels(labels, load_registry())
    return mon.build_monitor(op, op_path, digest, days, read, 0.001, labels)


# The recorded GRPO run (tests/conftest.py: recorded_run): its split and LoRA settings
VAL_RATIO, SEED, LAST_K = 0.5, 7, 2


def clean_env(**extra) -> dict:
    """The environment without any GROUP_QC_* variable, plus `extra`."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("GROUP_QC_")}, "HF_HUB_OFFLINE": "1",
            "CUDA_VISIBLE_DEVICES": "", "PYTHON": sys.executable, **extra}


def stage_a_from_truth(folder: Path, synthetic, seed: int, groups_per_label: int) -> Path:
    """Stage-A JSONL whose summaries are the synthetic photos' ground truth (Stage-A's own record builder)."""
    from qc_core.jsonl import write_jsonl_atomic
    from qc_core.records import make_record
    from stage_a.discovery import Group
    truth = synthetic.generate(folder.parent / f"{folder.name}_photos", seed=seed, groups_per_label=groups_per_label)
    registry = load_registry()
    by_mission: dict[str, list] = {}
    for g in synthetic.groups_of(truth):
        record = make_record(Group(g["group_id"], g["mission"], g["label"], tuple(g["images"])), g["summaries"],
                             model="truth")
        by_mission.setdefault(registry.resolve(g["mission"]).stage_a_stem, []).append(record)
    folder.mkdir(parents=True)
    for stem, records in by_mission.items():
        write_jsonl_atomic(folder / f"{stem}.jsonl", records)
    return folder


def centre(path) -> tuple[int, int, int]:
    """The colour at the middle of a photo file."""
    from PIL import Image
    with Image.open(path) as im:
        return im.convert("RGB").getpixel((im.width // 2, im.height // 2))


def nearest(colour, palette) -> int:
    """Index of the palette colour nearest to `colour` (JPEG moves a flat colour by a few units only)."""
    return min(range(len(palette)), key=lambda i: sum((a - b) ** 2 for a, b in zip(colour, palette[i])))


def run_order(files: list[tuple[Path, float, bool]]) -> list[Path]:
    """The files as `make test`'s two workers should take them: (file, its measured seconds, whether it needs the
    shared start point) -> the files longest first (a stable sort: equals keep their order). xdist hands each worker
    two files to start with, the 1st and 3rd to one, the 2nd and 4th to the other. When the first needs the start
    point, its worker builds it (about 5 minutes with the recorded run) while the other worker would wait on the
    build's lock, idle: so the 2nd and 4th are the longest files that do not need it."""
    ordered = sorted(files, key=lambda f: -f[1])
    if not ordered or not ordered[0][2]:
        return [path for path, _, _ in ordered]
    free = [f for f in ordered[1:] if not f[2]][:2]
    result = [ordered[0]] + [f for f in ordered[1:] if f not in free]
    for position, f in zip((1, 3), free):
        result.insert(position, f)
    return [path for path, _, _ in result]


@contextmanager
def restored_environment():
    """os.environ as it was on entry, on exit: variables added are removed, changed or removed ones put back."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        if dict(os.environ) != saved:
            os.environ.clear()
            os.environ.update(saved)
