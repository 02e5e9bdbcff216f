"""How a user reaches group-qc (issue 16): console commands, the plugin path from any folder, model_type/template on
every command that loads a checkpoint, and refusals that name flags that exist."""
from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def test_every_console_command_is_a_module_main():
    commands = {e.name: e for e in entry_points(group="console_scripts") if e.name.startswith("group-qc-")}
    assert {"group-qc-stage-a", "group-qc-eval", "group-qc-judge", "group-qc-grpo", "group-qc-plugin-path"} <= set(commands)
    for e in commands.values():
        module, _, attr = e.value.partition(":")
        assert callable(getattr(importlib.import_module(module), attr)), e.value


def test_the_plugin_path_works_from_any_folder(tmp_path):
    printed = subprocess.run([sys.executable, "-m", "swift_plugins"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.strip()
    assert Path(printed).is_absolute() and Path(printed) == REPO / "swift_plugins" / "qc_plugin.py"
    script = Path(sys.executable).parent / "group-qc-plugin-path"
    if script.exists():   # installed console command, run from a folder that is not the repository
        assert subprocess.run([str(script)], cwd=tmp_path, capture_output=True, text=True,
                              check=True).stdout.strip() == printed


def _checkpoint(tmp_path: Path, config: dict, name: str = "ckpt") -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return str(folder)


TEXT_ONLY = {"model_type": "qwen2", "num_hidden_layers": 24}
RENAMED_VL = {"model_type": "my_qwen_vl", "vision_config": {}, "text_config": {"num_hidden_layers": 6}}


def test_a_text_only_checkpoint_gets_no_lora_regex(tmp_path):
    from stage_b.lora import main
    result = subprocess.run([sys.executable, "-m", "stage_b.lora", "--model", _checkpoint(tmp_path, TEXT_ONLY),
                             "--last_k", "2"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2 and "no vision_config" in result.stderr and "model.language_model" in result.stderr
    assert result.stdout == ""   # no regex that would match nothing
    assert main(["--model", _checkpoint(tmp_path, RENAMED_VL, "vl"), "--last_k", "2"]) == 0   # a VL one does


@pytest.mark.parametrize("command", ["stage_a.cli", "stage_b.evaluate", "stage_b.judge", "stage_b.preflight"])
def test_the_unknown_architecture_message_names_flags_each_command_has(command, tmp_path):
    from stage_a.engine import ModelPathError, resolve_model
    with pytest.raises(ModelPathError) as err:
        resolve_model(_checkpoint(tmp_path, RENAMED_VL))
    assert "--model_type and --template" in str(err.value)
    help_text = subprocess.run([sys.executable, "-m", command, "--help"], cwd=REPO, capture_output=True, text=True,
                               env={**os.environ, "HF_HUB_OFFLINE": "1"}).stdout
    assert "--model_type" in help_text and "--template" in help_text
    spec = resolve_model(str(tmp_path / "ckpt"), (), "qwen2_5_vl", "qwen2_5_vl")   # and forcing them works
    assert (spec.model_type, spec.template) == ("qwen2_5_vl", "qwen2_5_vl")


def test_run_grpo_takes_model_type_and_template(tmp_path):
    from stage_b.launch import build_command, parse_settings
    model = _checkpoint(tmp_path, RENAMED_VL)
    settings = parse_settings([f"model={model}", "model_type=qwen2_5_vl", "template=qwen2_5_vl", "cuda=cpu"])
    _, argv, _ = build_command(**settings, environ={})
    assert argv[argv.index("--model_type") + 1] == "qwen2_5_vl" and argv[argv.index("--template") + 1] == "qwen2_5_vl"
    with pytest.raises(ValueError, match="--model_type and --template"):
        build_command(model=model, cuda="cpu", environ={})
