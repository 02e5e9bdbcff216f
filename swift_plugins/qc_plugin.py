"""group-qc's ms-swift plugin: `swift rlhf ... --external_plugins swift_plugins/qc_plugin.py`.

Registers at import (idempotent, import-light; ms-swift imports this file as the top-level module
`qc_plugin` in every rank):
  datasets  `group_qc_train` and `group_qc_val`: Stage-A JSONL -> Stage-B rows, one subset per mission
            (`group_qc_train:BBU接地线检查`, `group_qc_train:all`, aliases accepted). Input and split
            come from the environment (a YAML's ENV block): GROUP_QC_STAGE_A_DIR or
            GROUP_QC_STAGE_A_FILES, GROUP_QC_VAL_RATIO, GROUP_QC_SPLIT_SEED.
  rewards   `qc_label`, `qc_format`, `qc_consistency` in `swift.rewards.orms` (logged under the same names).
  callbacks `qc_lora_guard` (`--callbacks qc_lora_guard`): logs trainable parameters per LLM layer and
            stops before training if a vision/aligner parameter is trainable or the trained layers are
            not the last GROUP_QC_LORA_LAST_K.
            `qc_order_guard`: with GROUP_QC_BALANCE_LABELS=1 (train rows alternate 不通过/通过), stops
            before training if the trainer would reshuffle them or batch an odd number of prompts.
"""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:  # works from a checkout without `pip install -e .` too
    sys.path.insert(0, str(_REPO))

from swift.callbacks import TrainerCallback, callbacks_map  # noqa: E402
from swift.dataset import DatasetLoader, DatasetMeta, register_dataset  # noqa: E402
from swift.rewards import ORM, orms  # noqa: E402

from stage_a.missions import load_registry  # noqa: E402
from stage_b import dataset as qc_dataset  # noqa: E402
from stage_b.lora import audit_trainable  # noqa: E402
from stage_b.rewards import REWARDS  # noqa: E402

log = logging.getLogger("group_qc.plugin")
_root = logging.getLogger("group_qc")
if not _root.handlers:  # ms-swift configures only its own logger; make ours visible in its output
    _handler = logging.StreamHandler()
    _handler.setFormatter(logging.Formatter("[%(levelname)s:%(name)s] %(message)s"))
    _root.addHandler(_handler)
    _root.setLevel(logging.INFO)
ENV_LORA_LAST_K = "GROUP_QC_LORA_LAST_K"
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
        missions = list(dataset_syntax.subsets) if dataset_syntax and dataset_syntax.subsets else ["all"]
        rows, _ = qc_dataset.build_rows(qc_dataset.Source.from_env(), missions, self.split)
        return Dataset.from_list(rows)


def _register_datasets() -> None:
    registry = load_registry()
    for name, split in DATASETS.items():
        loader = type(f"QCDatasetLoader_{split}", (QCDatasetLoader,), {"split": split})
        register_dataset(DatasetMeta(ms_dataset_id=name, hf_dataset_id=name, dataset_name=name,
                                     subsets=["all", *registry.names], loader=loader,
                                     help=f"group-qc Stage-B {split} rows from Stage-A JSONL"), exist_ok=True)


_register_datasets()


# ---------------------------------------------------------------- callback: LoRA placement guard
class QCLoraGuard(TrainerCallback):
    """Fails fast when LoRA is not exactly on the LLM's last K layers (vision/aligner frozen)."""

    def on_init_end(self, args, state, control, model=None, **kwargs):
        # Runs at the end of Trainer.__init__: after LoRA is applied, before any step.
        model = model if model is not None else self.trainer.model
        config = getattr(model, "config", None)
        text_config = getattr(config, "text_config", None) or config
        num_layers = int(getattr(text_config, "num_hidden_layers"))
        last_k = os.environ.get(ENV_LORA_LAST_K)
        trainable = [(n, p.numel()) for n, p in model.named_parameters() if p.requires_grad]
        per_layer, problems = audit_trainable(trainable, num_layers, int(last_k) if last_k else None)
        log.info("trainable parameters per LLM layer (of %d): %s", num_layers, per_layer)
        if problems:
            raise RuntimeError("group-qc LoRA guard: " + "; ".join(problems[:5]) +
                               (f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""))


callbacks_map["qc_lora_guard"] = QCLoraGuard


# ---------------------------------------------------------------- callback: label-balanced order guard
class QCOrderGuard(TrainerCallback):
    """With GROUP_QC_BALANCE_LABELS=1 the train rows alternate 不通过/通过 (stage_b.dataset.balance_by_label);
    fails fast when the trainer would shuffle them away or cut steps at an odd number of prompts."""

    def on_init_end(self, args, state, control, **kwargs):
        if not qc_dataset.Source.from_env().balance_labels:
            return
        problems = []
        if getattr(args, "dataset_shuffle", True):
            problems.append("dataset_shuffle is true, which reshuffles the alternating rows: set --dataset_shuffle false")
        num_generations = getattr(args, "num_generations", None) or 1
        generation_batch = getattr(args, "generation_batch_size", None) or args.per_device_train_batch_size
        prompts = generation_batch // num_generations
        if prompts % 2:
            problems.append(f"{prompts} prompts per generation batch (generation_batch_size {generation_batch} / "
                            f"num_generations {num_generations}) is odd, so batches cannot hold as many fails as "
                            f"passes: use an even prompts_per_step")
        if problems:
            raise RuntimeError(f"group-qc order guard ({qc_dataset.ENV_BALANCE}=1): " + "; ".join(problems))
        log.info("label-balanced training order: %d prompts per generation batch, half 不通过, half 通过", prompts)


callbacks_map["qc_order_guard"] = QCOrderGuard
