"""group-qc's ms-swift plugin: `swift rlhf ... --external_plugins swift_plugins/qc_plugin.py`.

Registers at import (idempotent, import-light; ms-swift imports this file as the top-level module
`qc_plugin` in every rank):
  datasets  `group_qc_train` and `group_qc_val`: Stage-A JSONL -> Stage-B prompt rows for GRPO, one subset per
            mission (`group_qc_train:BBU接地线检查`, `group_qc_train:all`, aliases accepted); `group_qc_sft`: the
            train split's rows with the two-line reply to learn (stage_b.data.sft), for `swift sft`. Input, split and
            balancing come from the GROUP_QC_* environment (stage_b.data.settings; a YAML's ENV block sets them).
            Inside `swift sft`/`swift rlhf` (and `swift infer`), the requested group_qc datasets are built before
            the model loads: no Stage-A input (swift has no flag for it: export GROUP_QC_STAGE_A_DIR), a wrong
            folder, an unknown subset, an empty split, unreviewed records, or a dataset that does not fit the
            command (prompt-only rows for SFT) stop the run at once with one `error:` line, and its empty run
            folder is removed.
  rewards   `qc_label`, `qc_format`, `qc_consistency` in `swift.rewards.orms` (logged under the same names).
  callbacks `qc_lora_guard`, `qc_order_guard` (listed in --callbacks) and `qc_run`, which every GRPO trainer
            gets: the run record group_qc_run.json, per-mission signal per step, greedy QC validation
            (swift_plugins/qc_callbacks.py).
"""
from __future__ import annotations

import logging
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:  # works from a checkout without `pip install -e .` too
    sys.path.insert(0, str(_REPO))

from swift.callbacks import callbacks_map  # noqa: E402
from swift.dataset import DatasetLoader, DatasetMeta, register_dataset  # noqa: E402
from swift.rewards import ORM, orms  # noqa: E402

from qc_core.missions import load_registry  # noqa: E402
from stage_b.data import dataset as qc_dataset  # noqa: E402
from stage_b.train.rewards import REWARDS  # noqa: E402
from stage_b.data.settings import (ENV_BARE_ENGINE, ENV_STAGE_A_DIR, ENV_STAGE_A_FILES, SettingError,  # noqa: E402
                                   parse_flag, selection_from)
from swift_plugins import qc_callbacks  # noqa: E402

log = logging.getLogger("group_qc.plugin")
_root = logging.getLogger("group_qc")
if not _root.handlers:  # ms-swift configures only its own logger; make ours visible in its output
    _rank = f" rank {os.environ['RANK']}" if int(os.environ.get("WORLD_SIZE", "1")) > 1 else ""
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter(f"[%(levelname)s:%(name)s{_rank}] %(message)s"))
    _root.addHandler(_handler)
    _root.setLevel(logging.INFO)
DATASETS = {"group_qc_train": "train", "group_qc_val": "val", "group_qc_sft": "sft"}
PROMPT_ONLY = ("group_qc_train", "group_qc_val")   # no assistant reply: what GRPO samples, what SFT cannot learn


# ---------------------------------------------------------------- rewards: thin ORM wrappers
def _orm(name: str, func) -> type:
    def __call__(self, completions, **kwargs):
        return func(completions, **kwargs)
    # The class name is what ms-swift logs: rewards/qc_label/mean, ...
    return type(name, (ORM,), {"__call__": __call__, "__doc__": func.__doc__, "__module__": __name__})


for _name, _func in REWARDS.items():
    orms[_name] = _orm(_name, _func)


# ---------------------------------------------------------------- datasets: built from Stage-A JSONL
class QCDatasetLoader(DatasetLoader):
    """Builds rows in memory from Stage-A JSONL; the subsets named after `:` select missions."""

    split = "train"

    def load(self, dataset_syntax=None, dataset_meta=None, *, use_hf=None):
        from datasets import Dataset
        try:   # where no check ran before the model loaded: one line, not a traceback through ms-swift's loader
            selection = _selection(list(dataset_syntax.subsets) if dataset_syntax else [], self.split)
            rows, counts = _rows(selection, self.split)
            registry = load_registry()
            files = qc_dataset.stage_a_files(selection, registry.select(selection.missions), registry)
        except ValueError as exc:   # DatasetError, SettingError, MissionError: each names the path or value
            log.error(str(exc))
            raise SystemExit(f"error: {exc}") from None
        qc_callbacks.LOADED[self.split] = (selection, counts, files)
        return Dataset.from_list(rows)


def _selection(subsets: list[str], split: str):
    selection = selection_from()   # GROUP_QC_* variables; bad values stop here, naming the variable
    # Absolute paths: the run record must still point at these files from another folder.
    return replace(selection, missions=",".join(subsets or ["all"]),
                   stage_a_dir=selection.stage_a_dir and os.path.abspath(selection.stage_a_dir),
                   files=tuple(os.path.abspath(os.path.expanduser(f)) for f in selection.files),
                   input_dir=selection.input_dir and os.path.abspath(os.path.expanduser(selection.input_dir)),
                   origin={**selection.origin, "missions": f"dataset group_qc_{split}"})


def _rows(selection, split: str):
    if not (selection.stage_a_dir or selection.files):
        raise qc_dataset.DatasetError(
            f"no Stage-A input for the group_qc datasets: swift has no flag for it, so export {ENV_STAGE_A_DIR}=<the "
            f"Stage-A output_dir> (or {ENV_STAGE_A_FILES}=<Stage-A files or globs>) before the swift command, or set "
            f"it in the YAML's ENV block")
    if split == "sft":   # the train split, with the reply to learn: validation groups stay held out
        return qc_dataset.build_rows(selection, "train", make_row=qc_dataset.sft_row)
    return qc_dataset.build_rows(selection, split)


# ---------------------------------------------------------------- before the model loads
def dataset_problem(specs: list[str], command: str, eval_batch: tuple[int, int] | None = None) -> str | None:
    """Why the group_qc datasets requested (`--dataset`/`--val_dataset`) cannot serve this command, or None.
    Builds their rows: the loader will build them again after the model loads, in well under a second.
    `eval_batch`: GRPO's (per-device evaluation batch, processes); ms-swift refuses a total above the validation
    rows."""
    from swift.dataset.dataset_syntax import DatasetSyntax
    for spec in specs:
        syntax = DatasetSyntax.parse(spec)
        if syntax.dataset not in DATASETS:
            continue
        if command == "sft" and syntax.dataset in PROMPT_ONLY:
            return (f"--dataset {spec}: {syntax.dataset} rows are GRPO prompts with no assistant reply, so swift sft "
                    f"would mask every label and train nothing; use group_qc_sft (the verdict and a reason grounded in "
                    f"the summaries) for SFT")
        if command == "rlhf" and syntax.dataset == "group_qc_sft":
            return (f"--dataset {spec}: group_qc_sft holds replies to imitate; GRPO samples its own: use "
                    f"group_qc_train (and group_qc_val for validation)")
        try:
            rows, _ = _rows(_selection(list(syntax.subsets), DATASETS[syntax.dataset]), DATASETS[syntax.dataset])
        except ValueError as exc:   # DatasetError, SettingError, MissionError: each names the path or value
            return f"{spec}: {exc}"
        if command == "rlhf" and syntax.dataset == "group_qc_val" and eval_batch:
            per_device, processes = eval_batch
            if len(rows) < per_device * processes:
                return (f"--val_dataset {spec}: the validation split has {len(rows)} groups, fewer than the evaluation "
                        f"batch of {per_device} x {processes} process(es), which ms-swift refuses after loading the "
                        f"model: pass --per_device_eval_batch_size {max(1, len(rows) // processes)} (or less), "
                        f"or raise GROUP_QC_VAL_RATIO")
    return None


def training_setting_problem(command: str) -> str | None:
    """A training variable the datasets do not read (read by qc_run at train start), checked before the model loads."""
    if command != "rlhf":
        return None
    try:
        parse_flag(os.environ.get(ENV_BARE_ENGINE, ""), ENV_BARE_ENGINE)
    except SettingError as exc:
        return str(exc)
    return None


def _check_before_model(pipeline) -> None:
    if getattr(pipeline, "_group_qc_checked", False):
        return
    pipeline._group_qc_checked = True
    args = pipeline.args
    command = getattr(pipeline, "_group_qc_command", None) or ("rlhf" if getattr(args, "rlhf_type", None) else "sft")
    eval_batch = (int(getattr(args, "per_device_eval_batch_size", 0) or 0), int(os.environ.get("WORLD_SIZE", "1")))
    problem = training_setting_problem(command) or dataset_problem([*(args.dataset or []), *(args.val_dataset or [])],
                                                                   command, eval_batch)
    if problem is None:
        return
    output_dir = getattr(args, "output_dir", None) if command != "infer" else None
    if output_dir and os.path.isdir(output_dir) and not os.listdir(output_dir):
        os.rmdir(output_dir)   # the run folder ms-swift made for this run: a refused launch leaves none behind
    log.error(problem)
    raise SystemExit(f"error: {problem}")


# (module, pipeline class, the method it calls after parsing its arguments and before loading the model)
GUARDED = (("swift.pipelines.train.sft", "SwiftSft", "_prepare_model_tokenizer"),
           ("swift.pipelines.train.rlhf", "SwiftRLHF", "_prepare_model_tokenizer"),
           ("swift.pipelines.infer.infer", "SwiftInfer", "_set_seed"))


def guard_pipelines() -> None:
    """Run `_check_before_model` first in `swift sft`, `swift rlhf` and `swift infer`, which import this plugin while
    parsing their arguments, before the model loads: in `_prepare_model_tokenizer` for training, and in `_set_seed`,
    the step SwiftInfer takes between parsing and loading (ms-swift 4.6 has no hook for either). If an upgrade renames
    them, the dataset loader still stops with the same one-line error, after the model has loaded."""
    for module, name, method in GUARDED:
        # only inside those commands: nothing else is imported (an ms-swift class, untyped, or None)
        cls: Any = getattr(sys.modules.get(module), name, None)
        original = cls and (getattr(cls, method, None) if name == "SwiftInfer" else cls.__dict__.get(method))
        if original is None or getattr(original, "_group_qc", False):
            continue
        if name == "SwiftInfer":
            cls._group_qc_command = "infer"

        def checked(self, *args, _original=original, **kwargs):
            _check_before_model(self)
            return _original(self, *args, **kwargs)
        setattr(checked, "_group_qc", True)   # a marker on a function, which mypy cannot type
        setattr(cls, method, checked)


def _register_datasets() -> None:
    registry = load_registry()
    for name, split in DATASETS.items():
        loader = type(f"QCDatasetLoader_{split}", (QCDatasetLoader,), {"split": split})
        register_dataset(DatasetMeta(ms_dataset_id=name, hf_dataset_id=name, dataset_name=name,
                                     subsets=["all", *registry.names], loader=loader,
                                     help=f"group-qc Stage-B {split} rows from Stage-A JSONL"), exist_ok=True)


_register_datasets()
guard_pipelines()

# ---------------------------------------------------------------- callbacks
callbacks_map.update(qc_callbacks.CALLBACKS)
qc_callbacks.attach_run_callback()
