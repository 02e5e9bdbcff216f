"""Session fixtures: tiny random-weight Qwen-VL checkpoints (built once, offline) and synthetic photos."""
from __future__ import annotations

import importlib
import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def load_script(name: str):
    """scripts/<name>.py (a user launcher, not a package module) as a module, for tests of its functions."""
    if str(REPO / "scripts") not in sys.path:
        sys.path.insert(0, str(REPO / "scripts"))
    return importlib.import_module(name)


@pytest.fixture(scope="session")
def tiny_model_factory(tmp_path_factory):
    cache: dict[str, Path] = {}
    from group_qc_dev import tiny_model as make

    def get(arch: str) -> Path:
        if arch not in cache:
            cache[arch] = make.build_tiny_model(arch, tmp_path_factory.mktemp(f"tiny-{arch}") / "model",
                                                force=True)
        return cache[arch]
    return get


@pytest.fixture(scope="session")
def tiny_qwen2_5_vl(tiny_model_factory) -> Path:
    return tiny_model_factory("qwen2_5_vl")


@pytest.fixture(scope="session")
def tiny_qwen3_vl(tiny_model_factory) -> Path:
    return tiny_model_factory("qwen3_vl")


@pytest.fixture(scope="session")
def synthetic():
    from group_qc_dev import synthetic
    return synthetic


def run_command(argv, log: Path, env=None, timeout=900) -> str:
    """Runs a command from the repository root, offline, CPU only; its output goes to `log`; it must succeed."""
    import subprocess
    result = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "",
                                 "PYTHON": sys.executable, **(env or {})})
    log.write_text(result.stdout + result.stderr, encoding="utf-8")
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    return result.stdout + result.stderr


START_POINT_SFT_STEPS = 100


def built_once(tmp_path_factory, name: str, build) -> Path:
    """`build(folder)` once per test run, also under `make test`'s two pytest-xdist workers: each worker has its own
    session (and its own session fixtures), and they share the parent of their base temp folders. The first worker
    to get here builds `name` there holding a lock; the others wait, then reuse it. A build that failed is retried."""
    import fcntl
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent
    folder = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".built").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / ".built").write_text("")
    return folder


@pytest.fixture(scope="session")
def start_point(tmp_path_factory, synthetic, tiny_qwen2_5_vl) -> Path:
    """The demo's Stage-B start point, trained by `swift sft` with the demo's recipe (configs/demo/sft.yaml)
    on a small workshop set: it writes the two-line format, and its verdict is a coin (both verdicts seen
    for every group), so GRPO from here has reward spread to learn from. 155 s: built once per test run."""
    import json

    def build(root: Path) -> None:
        synthetic.generate(root / "workshop", seed=0, groups_per_label=12)
        from group_qc_dev import sft_data
        rows = sft_data.stage_b_rows(root / "workshop", verdicts="both", seed=0, reading=True)
        data = root / "start.jsonl"
        data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        swift = str(Path(sys.executable).parent / "swift")
        run_command([swift, "sft", "configs/demo/sft.yaml", "--model", str(tiny_qwen2_5_vl), "--dataset", str(data),
                     "--max_steps", str(START_POINT_SFT_STEPS), "--save_steps", str(START_POINT_SFT_STEPS),
                     "--output_dir", str(root / "sft")], root / "sft.log")

    root = built_once(tmp_path_factory, "start_point", build)
    (checkpoint,) = (root / "sft").glob(f"v*/checkpoint-{START_POINT_SFT_STEPS}")
    return checkpoint


# `make test` runs two pytest-xdist workers that take whole files in collection order (--dist loadfile
# --no-loadscope-reorder: xdist's default order, most tests first, left the slowest file, one 430 s test, to the end
# of a 28-minute run). So the slowest files go first, slowest first (seconds measured in one process, 2026-11-27):
# the learning test builds the shared start point at once, and the run-record tests that reuse it follow on the same
# worker while the other takes the next slowest.
SLOWEST_FIRST = ["test_learning", "test_stage_b_grpo", "test_run_record", "test_judge", "test_stage_a_faults",
                 "test_gpu_check", "test_evaluate", "test_entry_points", "test_sft", "test_stage_a_e2e",
                 "test_benchmarks", "test_swift_infer"]


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    # a stable sort: the other files keep their order
    items.sort(key=lambda item: rank.get(item.module.__name__.rpartition(".")[2], len(rank)))


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium. Missing here it skips; in CI (.ci/run installs it) it fails instead."""
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("CI"):
            pytest.fail("CI needs chromium and chromium-driver (apt-get install -y chromium chromium-driver)")
        pytest.skip("no chromium/chromedriver here: apt-get install -y chromium chromium-driver")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1600",
                 "--allow-file-access-from-files"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()
