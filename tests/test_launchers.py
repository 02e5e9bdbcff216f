"""The launchers in scripts/ take key=value settings one way (stage_a.key_values), find Python one way
(scripts/launcher.sh), and print their header on --help."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from stage_a.key_values import KeyValueError, parse_key_values

REPO = Path(__file__).resolve().parent.parent
LAUNCHERS = ["stage_a_infer.sh", "run_grpo.sh", "eval.sh", "judge.sh"]
HELPED = [*LAUNCHERS, "demo.sh"]


@pytest.mark.parametrize("tokens, required, expected", [
    (["a=1", "b=x y"], (), {"a": "1", "b": "x y"}),
    (["a=1", "a=2"], (), {"a": "2"}),                       # the last one wins, as in a shell
    (["a=", "b=c=d"], (), {"a": "", "b": "c=d"}),           # empty values; '=' inside a value
    (["a"], (), KeyValueError("unknown argument 'a'; expected key=value with key in a, b")),
    (["c=1"], (), KeyValueError("unknown argument 'c=1'")),
    (["a=1"], ("b",), KeyValueError("b=… is required")),
    ([], ("a", "b"), KeyValueError("a=…, b=… are required")),
    (["a="], ("a",), KeyValueError("a=… is required")),    # an empty required value counts as missing
])
def test_key_values(tokens, required, expected):
    if isinstance(expected, Exception):
        with pytest.raises(KeyValueError, match=str(expected).replace("(", r"\(")):
            parse_key_values(tokens, ["a", "b"], required)
    else:
        assert parse_key_values(tokens, ["a", "b"], required) == expected


def _run(script, *args, cwd=REPO):
    # DEMO_OUT elsewhere: a demo.sh that failed to stop at --help must not clear the repository's demo_out
    env = {**os.environ, "PYTHON": sys.executable, "DEMO_OUT": str(Path(cwd) / "demo_out_of_a_test")}
    return subprocess.run(["bash", str(REPO / "scripts" / script), *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


@pytest.mark.parametrize("script", LAUNCHERS)
def test_every_launcher_refuses_an_unknown_setting_naming_the_known_ones(script, tmp_path):
    result = _run(script, "model=m", "colour=blue", cwd=tmp_path)   # from another folder, too
    assert result.returncode == 2
    assert "unknown argument 'colour=blue'; expected key=value with key in" in result.stderr
    assert "mission" in result.stderr


@pytest.mark.parametrize("script", HELPED)
def test_every_launcher_prints_its_header_on_help_and_does_nothing_else(script, tmp_path):
    """--help anywhere among the arguments; for the demo above all, which starts by clearing stale outputs."""
    result = _run(script, "--help", cwd=tmp_path)
    header = (REPO / "scripts" / script).read_text(encoding="utf-8").splitlines()[1:]
    header = header[:next(i for i, line in enumerate(header) if not line.startswith("#"))]
    assert result.returncode == 0 and result.stdout.splitlines() == header


def test_the_demo_refuses_arguments_before_touching_anything(tmp_path):
    result = subprocess.run(["bash", str(REPO / "scripts" / "demo.sh"), "fast=1"], capture_output=True, text=True,
                            timeout=60, env={**os.environ, "DEMO_OUT": str(tmp_path / "out")})
    assert result.returncode == 2 and "demo.sh takes no arguments" in result.stderr
    assert not (tmp_path / "out").exists()


def test_values_with_spaces_and_quotes_reach_the_command_intact(tmp_path):
    """Settings go through the shell twice (parsed, then eval'd): a value with spaces, quotes or $ must arrive at
    the Python command as typed. PYTHON is a wrapper that prints what stage_b.evaluate would have been given."""
    wrapper = tmp_path / "python"
    wrapper.write_text(f"""#!/usr/bin/env bash
if [ "$2" = stage_b.evaluate ]; then shift 2; for a in "$@"; do printf '%s\\n' "$a"; done; exit 0; fi
exec {sys.executable} "$@"
""")
    wrapper.chmod(0o755)
    odd = "out dir 'quoted' \"double\" $HOME `date`"
    result = subprocess.run(["bash", str(REPO / "scripts" / "eval.sh"), "model=/m", f"output_dir={odd}",
                             "target_miss_rate=0.05 BBU接地线检查=0.1", "overwrite=1"], capture_output=True, text=True,
                            timeout=120, env={**os.environ, "PYTHON": str(wrapper)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["--model", "/m", "--output_dir", odd, "--target_miss_rate", "0.05",
                                          "BBU接地线检查=0.1", "--overwrite"]
