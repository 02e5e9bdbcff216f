"""One settings object per concern (issue 38): each command's `main` parses its flags into one checked, typed object,
and the engine flags are declared once (stage_b.model.engine_settings)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
COMMANDS = ["stage_b/judging/settings.py", "stage_b/evaluate/cli.py", "stage_b/train/preflight.py"]


@pytest.mark.parametrize("command, argv", [
    ("stage_b.evaluate", ["--model", "/nonexistent", "--output_dir", "OUT", "--batch_size", "0"]),
    ("stage_b.judge", ["--model", "/nonexistent", "--output_dir", "OUT", "--threshold", "0.5", "--batch_size", "0"]),
    ("stage_b.preflight", ["--model", "/nonexistent", "--batch_size", "0"]),
    ("stage_b.evaluate", ["--model", "/nonexistent", "--output_dir", "OUT", "--max_new_tokens", "0"]),
])
def test_an_engine_setting_out_of_range_is_refused_by_every_command_before_anything_loads(command, argv, tmp_path,
                                                                                          capsys):
    import importlib
    main = importlib.import_module(command).main
    flag = argv[-2]
    assert main([a.replace("OUT", str(tmp_path / "o")) for a in argv]) == 2
    err = capsys.readouterr().err
    assert f"{flag} 0 is out of range: use 1 or more" in err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("path", COMMANDS)
def test_the_engine_flags_are_declared_once(path):
    """Every command that loads the verdict model takes its engine flags from add_engine_args, declaring none itself."""
    source = (REPO / path).read_text(encoding="utf-8")
    assert "add_engine_args(" in source
    assert [f for f in ("--model", "--adapters", "--batch_size", "--max_new_tokens", "--infer_backend",
                        "--reason_citations") if f'add_argument("{f}"' in source] == []


@pytest.mark.parametrize("path", COMMANDS)
def test_no_argparse_namespace_travels_below_main(path):
    """Only `main` and the settings' `from_args` see the namespace (a parameter named `args`); every other function
    takes typed settings."""
    tree = ast.parse((REPO / path).read_text(encoding="utf-8"))
    takers = [f"{path}:{node.lineno} {node.name}" for node in ast.walk(tree)
              if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name not in ("main", "from_args")
              and any(a.arg == "args" for a in node.args.args + node.args.kwonlyargs)]
    assert takers == []
