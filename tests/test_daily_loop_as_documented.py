"""The daily loop runs as docs/from_photos_to_the_daily_loop.md writes it: steps 3 (certify), 4 (the first day, the
review app's accounts and server, the reviewers' decisions) and 5 (certify again with --replaces, then the next day),
each bash block run as it stands from a project folder, on a copy of a real GRPO run, the tiny model and synthetic
work orders. Only what the page leaves to people comes from the test: `M` (the page's first block names a real
checkpoint), the server block run in a terminal of its own (here: in the background until the reviewers are done)
and the people's decisions in the app, made over HTTP as its pages send them (group_qc_dev.play_served)."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from qc_core.jsonl import file_sha256
from stage_b.rules.point_identity import point_identity
from tests.helpers import clean_env

# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = [pytest.mark.slow, pytest.mark.file_seconds(459)]
REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "from_photos_to_the_daily_loop.md"


def bash_blocks(step: str) -> list[str]:
    """The bash blocks of the page's section `## <step>. …`, in order."""
    sections = re.split(r"^## ", PAGE.read_text(encoding="utf-8"), flags=re.M)
    (section,) = [s for s in sections if s.startswith(f"{step}. ")]
    return re.findall(r"```bash\n(.*?)```", section, re.S)


def run_block(block: str, cwd: Path, env: dict) -> str:
    """One block, in the reader's one shell session: the variables an earlier block of the page set (BEST=…) are
    still set, as they are in a terminal where the page is followed step by step."""
    carried = sorted(set(re.findall(r"^([A-Z][A-Z0-9_]*)=", PAGE.read_text(encoding="utf-8"), flags=re.M)) - {"M"})
    script = (f"[ -f .page_vars ] && source .page_vars\n{block}\n"
              + "".join(f'[ -n "${{{name}+x}}" ] && declare -p {name} >> .page_vars.new\n' for name in carried)
              + "mv -f .page_vars.new .page_vars 2>/dev/null || true\n")
    result = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, capture_output=True, text=True,
                            timeout=900, env=env)
    assert result.returncode == 0, f"{block}\n{(result.stdout + result.stderr)[-4000:]}"
    return result.stdout + result.stderr


def reviewers_decide(project: Path, day: str, passwords: dict[str, str], serve: str, env: dict) -> str:
    """The page's server block run in the background (a terminal of its own), the two reviewers deciding their queues
    in the app and the lead waiting for the labels (group_qc_dev.play_served), then Ctrl-C."""
    import signal
    import time
    import urllib.error
    import urllib.request
    import socket
    accounts = project / "accounts.json"
    accounts.write_text(json.dumps(passwords, ensure_ascii=False), encoding="utf-8")
    with socket.socket() as probe:   # the page's address: another program answering there would not be this server
        assert probe.connect_ex(("127.0.0.1", 8080)) != 0, "port 8080 is in use: stop what serves there first"
    server = subprocess.Popen(["bash", "-e", "-c", f"exec {serve.split('#')[0].strip()}"], cwd=project, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen("http://127.0.0.1:8080/api/me")
            except urllib.error.HTTPError:
                assert server.poll() is None, server.stdout.read()
                break   # 401: it answers
            except OSError:
                assert server.poll() is None, server.stdout.read()
                time.sleep(0.1)
        play = subprocess.run([sys.executable, "-m", "group_qc_dev.play_served", "--server", "http://127.0.0.1:8080",
                               "--accounts", str(accounts), "--photos", str(project / "data" / "days" / day),
                               "--day", f"days/{day}", "--day_folder", str(project / "output" / "days" / day),
                               "--reviewers", "王工", "李工", "--lead", "组长"], cwd=REPO, capture_output=True,
                              text=True, timeout=300, env={**env, "PYTHONPATH": str(REPO)})
        assert play.returncode == 0, play.stdout + play.stderr
        return play.stdout
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=60)


def test_steps_3_to_5_run_as_written(recorded_run, synthetic, tmp_path):
    if sys.prefix == sys.base_prefix:
        pytest.skip("the page runs .venv/bin/python: the suite must run from the project's virtual environment")
    project, home = tmp_path / "project", tmp_path / "home"
    project.mkdir()
    (project / "scripts").symlink_to(REPO / "scripts")
    (project / ".venv").symlink_to(Path(sys.prefix))
    # the run and the Stage-A files it trained on, where step 2 leaves them (its record names them relative)
    run_copy = project / "output" / "stage_b_grpo" / recorded_run["run_dir"].name
    shutil.copytree(recorded_run["run_dir"], run_copy)
    shutil.copytree(recorded_run["stage_a"], project / "output" / "stage_a")
    for seed, day in ((21, "2026-11-28"), (22, "2026-11-29")):
        synthetic.generate(project / "data" / "days" / day, seed=seed, groups_per_label=1, unlabeled=True)
    env = clean_env(M=str(recorded_run["model"]), HOME=str(home))
    env.pop("PYTHON")   # the launchers find .venv/bin/python as a user's shell has them do

    (certify,) = bash_blocks("3")
    run_block(certify, project, env)
    first = project / "output" / "eval" / "grpo" / "operating_point.json"
    assert first.is_file()

    judge_day, add_accounts, serve = bash_blocks("4")
    run_block(judge_day, project, env)
    day1 = project / "output" / "days" / "2026-11-28"
    assert (day1 / "review" / "index.html").is_file() and list(day1.glob("*_verdicts.jsonl"))
    added = run_block(add_accounts, project, env)
    passwords = dict(zip(("老板", "组长", "王工", "李工"), re.findall(r"^password: (\S+)$", added, flags=re.M)))
    assert len(passwords) == 4
    out = reviewers_decide(project, "2026-11-28", passwords, serve, env)
    assert "王工" in out and "李工" in out and "every one in the labels" in out
    assert list((project / "output" / "labels").glob("*_stage_a.jsonl"))
    table = {r["reviewer"] for r in map(json.loads, (project / "output" / "labels" / "reviewers.jsonl").open())}
    assert {"王工", "李工"} <= table

    (again,) = bash_blocks("5")
    run_block(again, project, env)
    second = project / "output" / "eval" / "recertified" / "operating_point.json"
    old, new = (json.loads(p.read_text(encoding="utf-8")) for p in (first, second))
    # the targets the owner signed are kept, not silently changed by flags the page leaves out
    assert new["replaces"]["sha256"] == file_sha256(first) and new["confidence"] == old["confidence"] == 0.8
    assert new["replaces"]["identity"] == point_identity(old)
    for mission, entry in new["missions"].items():
        assert entry.get("target_miss_rate") == old["missions"][mission].get("target_miss_rate") == 0.2
        assert entry.get("target_overkill_rate") == old["missions"][mission].get("target_overkill_rate")
    day2 = project / "output" / "days" / "2026-11-29"
    lines = [json.loads(x) for p in sorted(day2.glob("*_verdicts.jsonl"))
             for x in p.read_text(encoding="utf-8").splitlines()]
    assert lines and {v["operating_point"] for v in lines} == {point_identity(new)}
    # labels= given, and no day judged at the re-certified point before: the judge is told so in words
    assert {v["no_monitor"] for v in lines} == {
        "first day at this operating point under output/days: no day judged at it before"}
    assert not os.path.exists(REPO / "output")
