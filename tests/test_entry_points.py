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

from qc_core.renamed import OLD_SCRIPTS

# measured in make test on a clean clone, 2026-11-29 (tests/conftest.py runs the longest files first)
pytestmark = pytest.mark.file_seconds(108)

REPO = Path(__file__).resolve().parent.parent


OLD_MODULES = sorted([f"stage_b.{p.stem}" for p in (REPO / "stage_b").glob("*.py") if p.stem != "__init__"]
                     + ["stage_b.evaluate", "stage_a.review"])


def test_the_one_entry_and_its_older_console_scripts():
    """pyproject.toml installs `group-qc` and, for one release, the older `group-qc-*` scripts: each a name
    qc_core.renamed maps to a routed command, all started through group_qc.cli.old_script."""
    import tomllib
    from group_qc.cli import COMMANDS
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts.pop("group-qc") == "group_qc.cli:main"
    assert scripts == {name: "group_qc.cli:old_script" for name in OLD_SCRIPTS}
    assert set(OLD_SCRIPTS.values()) <= set(COMMANDS)
    installed = {e.name: e.value for e in entry_points(group="console_scripts") if e.name.startswith("group-qc")}
    assert installed == {**scripts, "group-qc": "group_qc.cli:main"}, "reinstall: pip install -e ."


def _help(run, capsys):
    """What a command printed for --help, which it ends with exit status 0 (argparse exits; some return)."""
    try:
        code = run()
    except SystemExit as done:
        code = done.code
    assert code in (0, None)
    return capsys.readouterr()


@pytest.mark.parametrize("old", sorted(OLD_SCRIPTS))
def test_an_older_console_script_says_its_new_name_and_runs_it(old, monkeypatch, capsys):
    from group_qc.cli import old_script
    monkeypatch.setattr(sys, "argv", [f"/venv/bin/{old}", "--help"])
    out = _help(old_script, capsys)
    assert out.err.startswith(f"note: `{old}` is an older name of `group-qc {OLD_SCRIPTS[old]}`")
    assert f"group-qc {OLD_SCRIPTS[old]}" in out.out


@pytest.mark.parametrize("old", OLD_MODULES)
def test_an_older_module_name_says_its_new_name_and_runs_it(old, monkeypatch, capsys):
    """`python -m stage_b.judge --help` (each shim in stage_b/, stage_b.evaluate, stage_a.review): the note on stderr,
    then the routed command's own help."""
    import runpy
    from group_qc.cli import COMMANDS
    monkeypatch.setattr(sys, "argv", [old, "--help"])
    out = _help(lambda: runpy.run_module(old, run_name="__main__", alter_sys=False), capsys)
    note = f"note: `python -m {old}` is an older name of `group-qc "
    assert out.err.startswith(note), out.err
    command = out.err[len(note):].split("`")[0]
    assert command in COMMANDS and f"group-qc {command}" in out.out


def test_the_docs_use_the_new_names():
    """Every `group-qc <command>` the README and docs name is routed; the older names appear only where they are
    the subject: docs/commands.md's paragraph about them and the layout table (docs/architecture.md) naming their
    files."""
    import re
    from group_qc.cli import COMMANDS
    from tests.helpers import doc_pages
    named, old = set(), []
    for page in doc_pages():
        text = page.read_text(encoding="utf-8")
        code = "\n".join(re.findall(r"```bash\n(.*?)```", text, re.S))   # commands: in bash blocks or `quoted`
        named |= set(re.findall(r"(?<![\w-])group-qc ([a-z][a-z-]*[a-z])", code))
        named |= set(re.findall(r"`group-qc ([a-z][a-z-]*[a-z])", text))
        if page.name not in ("commands.md", "architecture.md"):
            old += [f"{page.name}: {m}" for m in re.findall(r"python -m (?:stage_b|stage_a)\.[\w.]+|group-qc-[a-z-]+",
                                                             text)]
    assert named - set(COMMANDS) == set() and len(named) > 10
    assert old == []
    listed = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    assert [c for c in COMMANDS if f"`{c}`" not in listed] == []


def test_the_plugin_path_works_from_any_folder(tmp_path):
    printed = subprocess.run([sys.executable, "-m", "group_qc", "plugin-path"], cwd=tmp_path, capture_output=True,
                             text=True, check=True).stdout.strip()
    assert Path(printed).is_absolute() and Path(printed) == REPO / "swift_plugins" / "qc_plugin.py"
    script = Path(sys.executable).parent / "group-qc"
    if script.exists():   # the installed console command, run from a folder that is not the repository
        assert subprocess.run([str(script), "plugin-path"], cwd=tmp_path, capture_output=True, text=True,
                              check=True).stdout.strip() == printed


def _checkpoint(tmp_path: Path, config: dict, name: str = "ckpt") -> str:
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return str(folder)


TEXT_ONLY = {"model_type": "qwen2", "num_hidden_layers": 24}
RENAMED_VL = {"model_type": "my_qwen_vl", "vision_config": {}, "text_config": {"num_hidden_layers": 6}}


def test_a_text_only_checkpoint_gets_no_lora_regex(tmp_path):
    from stage_b.train.lora import main
    result = subprocess.run([sys.executable, "-m", "group_qc", "lora", "--model", _checkpoint(tmp_path, TEXT_ONLY),
                             "--last_k", "2"], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2 and "no vision_config" in result.stderr and "model.language_model" in result.stderr
    assert result.stdout == ""   # no regex that would match nothing
    assert main(["--model", _checkpoint(tmp_path, RENAMED_VL, "vl"), "--last_k", "2"]) == 0   # a VL one does


@pytest.mark.parametrize("command", ["stage-a", "evaluate", "judge", "preflight"])
def test_the_unknown_architecture_message_names_flags_each_command_has(command, tmp_path):
    from qc_core.checkpoints import ModelPathError, resolve_model
    with pytest.raises(ModelPathError) as err:
        resolve_model(_checkpoint(tmp_path, RENAMED_VL))
    assert "--model_type and --template" in str(err.value)
    help_text = subprocess.run([sys.executable, "-m", "group_qc", command,
                                "--help"], cwd=REPO, capture_output=True, text=True,
                               env={**os.environ, "HF_HUB_OFFLINE": "1"}).stdout
    assert "--model_type" in help_text and "--template" in help_text
    spec = resolve_model(str(tmp_path / "ckpt"), (), "qwen2_5_vl", "qwen2_5_vl")   # and forcing them works
    assert (spec.model_type, spec.template) == ("qwen2_5_vl", "qwen2_5_vl")


def test_run_grpo_takes_model_type_and_template(tmp_path):
    from stage_b.train.launch import build_command
    from stage_b.train.launch_settings import LaunchSettings
    model = _checkpoint(tmp_path, RENAMED_VL)
    settings = LaunchSettings.from_tokens([f"model={model}", "model_type=qwen2_5_vl", "template=qwen2_5_vl",
                                           "cuda=cpu"])
    _, argv, _ = build_command(settings, environ={})
    assert argv[argv.index("--model_type") + 1] == "qwen2_5_vl" and argv[argv.index("--template") + 1] == "qwen2_5_vl"
    with pytest.raises(ValueError, match="--model_type and --template"):
        build_command(LaunchSettings(model=model, cuda="cpu"), environ={})


@pytest.mark.parametrize("variant, file", [("cpu_config", "stage_b_grpo_cpu.yaml"),
                                           ("hf_config", "stage_b_grpo_hf.yaml")])
def test_the_cpu_and_no_vllm_yamls_are_the_gpu_recipe(variant, file):
    """configs/stage_b_grpo_cpu.yaml (CPU) and configs/stage_b_grpo_hf.yaml (GPUs without vLLM or DeepSpeed) are
    generated from the GPU YAML: a change to one recipe that the others lack would make them train something else."""
    from stage_b.train.launch import variant_text
    assert (REPO / "configs" / file).read_text(encoding="utf-8") == variant_text(variant), \
        f"regenerate it: group-qc grpo {variant} > configs/{file}"


def test_swift_args_carry_everything_swift_rlhf_needs_beside_the_model(tiny_qwen2_5_vl, tmp_path):
    out = subprocess.run([sys.executable, "-m", "group_qc", "lora", "--model", str(tiny_qwen2_5_vl), "--last_k", "2",
                          "--swift_args"], cwd=tmp_path, capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)}).stdout.split()
    flags = dict(zip(out[::2], out[1::2]))
    assert set(flags) == {"--model_type", "--template", "--target_regex", "--external_plugins"}
    assert flags["--model_type"] == "qwen2_5_vl" == flags["--template"]
    assert Path(flags["--external_plugins"]).is_absolute() and Path(flags["--external_plugins"]).is_file()
    assert not any(c in flags["--target_regex"] for c in " *?[")   # safe unquoted in $(...)


def _readme_line(start: str) -> str:
    """The README's one command starting with `start`, its backslash-continued lines joined."""
    from tests.helpers import docs_text
    lines = docs_text().splitlines()
    found = [i for i, line in enumerate(lines) if line.startswith(start)]
    assert len(found) == 1, f"the README should print exactly one command starting {start!r}"
    i, command = found[0], ""
    while True:
        line = lines[i].split("   # ")[0].rstrip()   # a trailing comment is no part of the command
        if not line.endswith("\\"):
            return command + line
        command += line[:-1]
        i += 1


@pytest.mark.slow
def test_the_readme_by_hand_cpu_command_runs_as_printed(tiny_qwen2_5_vl, tmp_path):
    """The README's `swift rlhf configs/stage_b_grpo_cpu.yaml …` line, run by bash as printed (M = the tiny model;
    one short step appended), trains and records the run. Before: four ms-swift errors in turn on CPU."""
    from tests.helpers import stage_a_folder
    command = _readme_line("swift rlhf configs/stage_b_grpo_cpu.yaml")
    stage_a = stage_a_folder(tmp_path / "sa", n=60)
    venv_bin = str(Path(sys.executable).parent)
    result = subprocess.run(["bash", "-c", f"M={tiny_qwen2_5_vl}; {command} --max_steps 1 --max_completion_length 16 "
                                           f"--output_dir {tmp_path / 'out'}"],
                            cwd=REPO, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "PATH": f"{venv_bin}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1",
                                 "GROUP_QC_STAGE_A_DIR": str(stage_a), "GROUP_QC_VAL_RATIO": "0.5"})
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    run = next((tmp_path / "out").glob("v*"))
    assert (run / "group_qc_run.json").is_file() and (run / "checkpoint-1").is_dir()


@pytest.mark.slow
def test_the_readme_sft_infer_and_rescore_commands_run_as_printed(tiny_qwen2_5_vl, tmp_path):
    """From a folder that is not the repository, with the README's relative paths: SFT on group_qc_sft (two steps
    appended), ms-swift's batch inference on group_qc_val, and its result re-scored by our evaluation."""
    from tests.helpers import stage_a_folder
    stage_a_folder(tmp_path / "output" / "stage_a", n=30)
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1",
           "CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": str(REPO)}
    steps = [(_readme_line("GROUP_QC_STAGE_A_DIR=output/stage_a swift sft"), " --max_steps 2 --max_length 1024"),
             ("export GROUP_QC_STAGE_A_DIR=output/stage_a; " + _readme_line("swift infer --model $M"),
              " --max_new_tokens 8"),
             (_readme_line(".venv/bin/group-qc evaluate --predictions output/infer.jsonl"), "")]
    for command, more in steps:
        result = subprocess.run(["bash", "-c", f"M={tiny_qwen2_5_vl}; {command}{more}"], cwd=tmp_path,
                                capture_output=True, text=True, timeout=900, env=env)
        assert result.returncode == 0, (command, (result.stdout + result.stderr)[-3000:])
    logs = next((tmp_path / "output" / "stage_b_sft").glob("v*/logging.jsonl")).read_text().splitlines()
    assert any(json.loads(line).get("loss", 0) > 0 for line in logs)   # SFT trained on the replies
    metrics = json.loads((tmp_path / "output" / "eval" / "infer" / "metrics.json").read_text(encoding="utf-8"))
    assert metrics["overall"]["n"] == len((tmp_path / "output" / "infer.jsonl").read_text().splitlines()) > 0


def test_group_qc_routes_each_command_to_its_module():
    """`group-qc <command>` runs the command's own main (group_qc.cli); an unknown command says which exist."""
    from group_qc.cli import COMMANDS, main
    for name, (module, _) in COMMANDS.items():
        assert callable(importlib.import_module(module).main), name
    assert main(["--help"]) == 0 and main(["no-such-command"]) == 2
    run = subprocess.run([sys.executable, "-m", "group_qc", "users", "--help"], capture_output=True, text=True,
                         cwd=REPO, timeout=120)
    assert run.returncode == 0 and "group-qc users" in run.stdout
