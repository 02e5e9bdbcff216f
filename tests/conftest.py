"""Session fixtures: tiny random-weight Qwen-VL checkpoints (built once, offline) and synthetic photos; the stand-in
engine and checkpoint folder of the in-process judge and evaluation tests; the test order. Plain builders are in
helpers.py."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(autouse=True)
def environment_restored():
    """Each test's changes to the process environment end with it. ms-swift's argument classes write into os.environ
    when they are built (TENSORBOARD_LOGGING_DIR: that run's folder); a test that built them in-process handed it to
    every later test's subprocess on the same worker, and a DDP run wrote its TensorBoard events into another test's
    folder (tests.helpers.restored_environment)."""
    from tests.helpers import restored_environment
    with restored_environment():
        yield


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


@pytest.fixture
def no_group_qc_environment(monkeypatch):
    """No GROUP_QC_* setting from the environment of whoever runs the tests (the modules that want this name it in
    `pytestmark = pytest.mark.usefixtures(...)`)."""
    for name in [n for n in os.environ if n.startswith("GROUP_QC_")]:
        monkeypatch.delenv(name)


@pytest.fixture
def engine(monkeypatch):
    """tests.helpers.StandInEngine, in place of stage_b.model.generate.VerdictEngine for every command that builds one,
    with nothing asked and no p_fail set yet."""
    from stage_b.model import generate
    from tests.helpers import StandInEngine
    monkeypatch.setattr(generate, "VerdictEngine", StandInEngine)
    monkeypatch.setattr(StandInEngine, "asked", [])
    monkeypatch.setattr(StandInEngine, "P_FAIL", {})
    return StandInEngine


@pytest.fixture
def model(tmp_path) -> Path:
    """A checkpoint folder as qc_core.checkpoints.resolve_model checks it (config.json naming a Qwen-VL type);
    nothing loads it."""
    import json
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}), encoding="utf-8")
    return folder


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

    from tests.helpers import run_command

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


@pytest.fixture(scope="session")
def recorded_run(tmp_path_factory, synthetic, start_point) -> dict:
    """2 GRPO steps from the demo's start point (a coin on the verdict, so rewards spread and LoRA moves),
    launched the way a user types it: swift rlhf by hand, the split exported, validated at step 2 (so its record names
    a best checkpoint, as the docs' `run_record best` needs). Built once per test run; the tests that use it read it
    and write elsewhere."""
    import subprocess

    from stage_b.train.lora import target_regex
    from tests.helpers import LAST_K, SEED, VAL_RATIO, clean_env, stage_a_from_truth

    def build(root: Path) -> None:
        stage_a = stage_a_from_truth(root / "stage_a", synthetic, seed=5, groups_per_label=3)
        swift = str(Path(sys.executable).parent / "swift")
        env = clean_env(GROUP_QC_STAGE_A_DIR=str(stage_a), GROUP_QC_VAL_RATIO=str(VAL_RATIO),
                        GROUP_QC_SPLIT_SEED=str(SEED), GROUP_QC_BALANCE_LABELS="1", GROUP_QC_LORA_LAST_K=str(LAST_K))
        result = subprocess.run(
            [swift, "rlhf", "--rlhf_type", "grpo", "--model", str(start_point), "--model_type", "qwen2_5_vl",
             "--template", "qwen2_5_vl", "--external_plugins", "swift_plugins/qc_plugin.py",
             "--dataset", "group_qc_train:all", "--split_dataset_ratio", "0", "--reward_funcs", "qc_label",
             "--tuner_type", "lora", "--target_regex", target_regex(start_point, LAST_K), "--torch_dtype", "float32",
             "--num_generations", "8", "--per_device_train_batch_size", "16", "--max_completion_length", "3",
             "--temperature", "1.0", "--learning_rate", "1e-3", "--max_steps", "2", "--save_steps", "2",
             "--logging_steps", "1", "--dataset_shuffle", "false", "--dynamic_sample", "false", "--report_to", "none",
             "--check_model", "false", "--val_dataset", "group_qc_val:all", "--eval_strategy", "steps",
             "--eval_steps", "2", "--num_generations_eval", "1", "--per_device_eval_batch_size", "16",
             "--output_dir", str(root / "grpo")],
            cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=900, env=env)
        (root / "grpo.log").write_text(result.stdout + result.stderr, encoding="utf-8")
        assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]

    root = built_once(tmp_path_factory, "recorded_run", build)
    (run_dir,) = (root / "grpo").glob("v*")
    return {"root": root, "stage_a": root / "stage_a", "run_dir": run_dir, "checkpoint": run_dir / "checkpoint-2",
            "model": start_point, "log": (root / "grpo.log").read_text(encoding="utf-8")}


# `make test` runs two pytest-xdist workers that take whole files in collection order (--dist loadfile
# --no-loadscope-reorder: xdist's default order, most tests first, left the slowest file, one 430 s test, to the end
# of a 28-minute run). So the slowest files go first: a file states its measured time with a module-level marker,
# `pytestmark = [pytest.mark.slow, pytest.mark.file_seconds(N)]` (N: the file's seconds in `make test`, from
# `--durations=0`), and the files run longest first (tests.helpers.run_order); files without one keep their order
# after them. Each worker starts with two files, and the shared start point is built by whichever needs it first
# while a second worker that also needs it waits on its lock: so that worker's two are files that do not need it.
def file_seconds(item) -> float:
    mark = item.get_closest_marker("file_seconds")
    return float(mark.args[0]) if mark else 0.0


SHARED_BUILDS = {"start_point", "recorded_run"}   # built once per run under a lock (built_once)


def pytest_collection_modifyitems(config, items):
    from tests.helpers import run_order
    seconds: dict = {}
    waits: dict = {}
    for item in items:
        seconds[item.path] = max(seconds.get(item.path, 0.0), file_seconds(item))
        waits[item.path] = waits.get(item.path, False) or bool(SHARED_BUILDS & set(item.fixturenames))
    order = run_order([(path, seconds[path], waits[path]) for path in seconds])
    position = {path: i for i, path in enumerate(order)}
    items.sort(key=lambda item: position[item.path])   # a stable sort: a file's tests keep their order


FILE_TIMES: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Each test's setup, call and teardown seconds, per file (on the xdist controller: every worker's reports)."""
    name = report.nodeid.split("::")[0]
    FILE_TIMES[name] = FILE_TIMES.get(name, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter):
    """The slowest files, so that their file_seconds markers can be kept true (measured in this run)."""
    slowest = sorted(FILE_TIMES.items(), key=lambda kv: -kv[1])[:15]
    if slowest and slowest[0][1] >= 30:
        terminalreporter.write_sep("-", "slowest files (seconds, setup + call + teardown; file_seconds markers)")
        for name, seconds in slowest:
            terminalreporter.write_line(f"{seconds:8.1f}  {name}")


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


def chrome(window: str = "1280,1600"):
    """A headless Chromium of its own (its own profile: its own cookies and storage). Missing here it skips; in CI
    (.ci/run installs it) it fails instead."""
    if not (CHROMIUM and CHROMEDRIVER):
        if os.environ.get("CI"):
            pytest.fail("CI needs chromium and chromium-driver (apt-get install -y chromium chromium-driver)")
        pytest.skip("no chromium/chromedriver here: apt-get install -y chromium chromium-driver")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 f"--window-size={window}", "--allow-file-access-from-files", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium (chrome())."""
    driver = chrome()
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def second_browser():
    """Another headless Chromium, for a second person signed in at the same time."""
    driver = chrome()
    yield driver
    driver.quit()


# ----------------------------------------------------------------------------------------------------------------
# The review app's databases: every store and server test runs on SQLite and on PostgreSQL
# ----------------------------------------------------------------------------------------------------------------
POSTGRES = os.environ.get("GROUP_QC_TEST_POSTGRES")   # .ci/run starts a server and sets it


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request, tmp_path):
    """A new, empty database: a SQLite file, or a schema of its own on the PostgreSQL server GROUP_QC_TEST_POSTGRES
    names (dropped after the test). Without that server the PostgreSQL half skips here and fails under CI."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'group-qc.db'}"
        return
    yield from _postgres()


@pytest.fixture
def postgres_url():
    """A schema of its own on the PostgreSQL server (db_url's PostgreSQL half), for the tests of PostgreSQL alone."""
    yield from _postgres()


def _postgres():
    if not POSTGRES:
        if os.environ.get("CI"):
            pytest.fail("CI needs PostgreSQL: .ci/run starts one and sets GROUP_QC_TEST_POSTGRES")
        pytest.skip("no PostgreSQL here: set GROUP_QC_TEST_POSTGRES=postgresql://USER:PASSWORD@HOST/DB")
    from tests.served import postgres_schema
    with postgres_schema(POSTGRES) as url:
        yield url


@pytest.fixture
def fast_passwords():
    """argon2id at its lowest cost for the tests of the review app (a sign-in in 1 ms instead of 110 ms); the
    production parameters are argon2-cffi's defaults (tests/test_review_store.py checks the hash they give)."""
    from argon2 import PasswordHasher

    from review_app import accounts
    saved = list(accounts._HASHER)
    accounts._HASHER[:] = [PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)]
    yield
    accounts._HASHER[:] = saved
