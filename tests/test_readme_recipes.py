"""The README's and its docs pages' recipes stay true: every `group-qc <command> …`, `python -m <module> …` and
`bash scripts/<launcher>.sh …` command in its bash blocks names a command, module or launcher that exists, and every
flag or key=value setting it uses is one that command knows (read from the command's own --help). A recipe that drifted
from the code fails here, not in a user's shell."""
from __future__ import annotations

import functools
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import doc_pages, docs_text

REPO = Path(__file__).resolve().parent.parent


def commands() -> list[tuple[str, str, str]]:
    """(kind, name, the rest of the command) for each documented command, continuation lines joined."""
    text = docs_text()
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = "" if line.lstrip().startswith("#") else line.split(" #")[0]
            for m in re.finditer(r"(?<![\w-])group-qc ([a-z][a-z-]*)(.*?)(?=$|&&|\||;|\))", line):
                out.append(("command", m.group(1), m.group(2)))
            for m in re.finditer(r"python -m ([\w.]+)(.*?)(?=$|&&|\||;|\))", line):
                out.append(("module", m.group(1), m.group(2)))
            for m in re.finditer(r"bash scripts/(\w+\.sh)(.*?)(?=$|&&|\||;)", line):
                out.append(("launcher", m.group(1), m.group(2)))
    return out


@functools.lru_cache(maxsize=None)
def help_of(kind: str, name: str) -> str:
    cmd = {"command": [sys.executable, "-m", "group_qc", name, "--help"],
           "module": [sys.executable, "-m", name, "--help"],
           "launcher": ["bash", str(REPO / "scripts" / name), "--help"]}[kind]
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "HOME": str(REPO), "PYTHON": sys.executable,
                                 "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 0, f"{name} --help failed: {result.stderr[-1000:]}"
    return result.stdout


def test_the_readme_documents_commands():
    kinds = {k for k, _, _ in commands()}
    assert {"command", "launcher"} <= kinds and len(commands()) > 20


@pytest.mark.parametrize("kind, name, rest", commands(), ids=lambda v: v if isinstance(v, str) and len(v) < 40 else "")
def test_each_documented_command_uses_only_what_it_knows(kind, name, rest):
    if kind == "module" and not (name.startswith(("stage_a", "stage_b", "group_qc_dev", "swift_plugins"))):
        pytest.skip(f"{name} is not ours")
    text = help_of(kind, name)
    if kind in ("command", "module"):
        used = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9_]*)", rest))
    else:
        used = {f"{k}=" for k in re.findall(r"(?<![\w.-])([a-z_]+)=", rest)}
    # whole words only: a misspelt --target_miss must not pass because --target_miss_rate is in the help
    unknown = sorted(u for u in used if not re.search(rf"(?<![\w-]){re.escape(u.rstrip('='))}(?![\w-])", text))
    assert not unknown, f"README: `{kind} {name}` uses {unknown}, which its --help does not name"


def test_every_page_is_reached_from_the_readme_and_every_link_resolves():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200, "the README is the start; the rest lives in docs/"
    assert {p.name for p in doc_pages()[1:]} <= set(re.findall(r"\(docs/([\w.]+\.md)\)", readme))
    broken = []
    for page in doc_pages():
        for target in re.findall(r"\]\(([^)#\s]+)\)", page.read_text(encoding="utf-8")):
            if not target.startswith(("http://", "https://")) and not (page.parent / target).exists():
                broken.append(f"{page.relative_to(REPO)} -> {target}")
    assert broken == []
