"""group-qc's ms-swift plugin: `swift rlhf ... --external_plugins swift_plugins/qc_plugin.py`.

Registers at import (idempotent, import-light; ms-swift imports this file as the top-level module
`qc_plugin` in every rank):
  datasets  `group_qc_train` and `group_qc_val`: Stage-A JSONL -> Stage-B rows, one subset per mission
            (`group_qc_train:BBU接地线检查`, `group_qc_train:all`, aliases accepted). Input, split and
            balancing come from the GROUP_QC_* environment (stage_b.settings; a YAML's ENV block sets them).
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

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:  # works from a checkout without `pip install -e .` too
    sys.path.insert(0, str(_REPO))

from swift.callbacks import callbacks_map  # noqa: E402
from swift.dataset import DatasetLoader, DatasetMeta, register_dataset  # noqa: E402
from swift.rewards import ORM, orms  # noqa: E402

from stage_a.missions import load_registry  # noqa: E402
from stage_b import dataset as qc_dataset  # noqa: E402
from stage_b.rewards import REWARDS  # noqa: E402
from stage_b.settings import selection_from  # noqa: E402
from swift_plugins import qc_callbacks  # noqa: E402

log = logging.getLogger("group_qc.plugin")
_root = logging.getLogger("group_qc")
if not _root.handlers:  # ms-swift configures only its own logger; make ours visible in its output
    _rank = f" rank {os.environ['RANK']}" if int(os.environ.get("WORLD_SIZE", "1")) > 1 else ""
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter(f"[%(levelname)s:%(name)s{_rank}] %(message)s"))
    _root.addHandler(_handler)
    _root.setLevel(logging.INFO)
DATASETS = {"group_qc_train": "train", "group_qc_val": "val"}


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
        subsets = list(dataset_syntax.subsets) if dataset_syntax and dataset_syntax.subsets else ["all"]
        selection = selection_from()   # GROUP_QC_* variables; bad values stop here, naming the variable
        # Absolute paths: the run record must still point at these files from another folder.
        selection = replace(selection, missions=",".join(subsets),
                            stage_a_dir=selection.stage_a_dir and os.path.abspath(selection.stage_a_dir),
                            files=tuple(os.path.abspath(os.path.expanduser(f)) for f in selection.files),
                            origin={**selection.origin, "missions": f"dataset group_qc_{self.split}"})
        rows, counts = qc_dataset.build_rows(selection, self.split)
        registry = load_registry()
        files = qc_dataset.stage_a_files(selection, registry.select(selection.missions), registry)
        qc_callbacks.LOADED[self.split] = (selection, counts, files)
        return Dataset.from_list(rows)


def _register_datasets() -> None:
    registry = load_registry()
    for name, split in DATASETS.items():
        loader = type(f"QCDatasetLoader_{split}", (QCDatasetLoader,), {"split": split})
        register_dataset(DatasetMeta(ms_dataset_id=name, hf_dataset_id=name, dataset_name=name,
                                     subsets=["all", *registry.names], loader=loader,
                                     help=f"group-qc Stage-B {split} rows from Stage-A JSONL"), exist_ok=True)


_register_datasets()

# ---------------------------------------------------------------- callbacks
callbacks_map.update(qc_callbacks.CALLBACKS)
qc_callbacks.attach_run_callback()
