"""group-qc's ms-swift trainer callbacks (imported by qc_plugin.py; torch only inside the hooks).

  qc_lora_guard   stops before training unless LoRA sits exactly on the LLM's last GROUP_QC_LORA_LAST_K layers
  qc_order_guard  stops before training if GROUP_QC_BALANCE_LABELS=1 rows would be reshuffled or cut oddly
  qc_run          added by the plugin to every GRPO trainer that reads group_qc_train (listing it is optional):
                  - writes group_qc_run.json at train start (main rank) and completes it at train end;
                  - logs per mission, each step, the label reward mean and the zero-advantage share
                    (stage_b.stats.training_signal), as `qc/...` beside ms-swift's own metrics;
                  - makes ms-swift's evaluation on group_qc_val greedy (one sample per group) and logs the
                    QC metrics of its verdicts as `eval_qc_val/...`, so `metric_for_best_model qc_val/
                    balanced_accuracy` keeps the best checkpoint.
The per-step and evaluation numbers come from the rows, completions and rewards ms-swift itself scored:
`qc_run` wraps the trainer's `_compute_advantages`, the one place that sees all of them after dynamic
sampling and after the gather across ranks (ms-swift 4.6 has no public hook for per-task statistics).
"""
from __future__ import annotations

import copy
import hashlib
import logging
import os

from swift.callbacks import TrainerCallback

from qc_core.paths import stored
from stage_b.data import dataset as qc_dataset
from stage_b.train.lora import audit_trainable
from stage_b.train.run_record import build_run_record, write_run_record
from stage_b.data.settings import ENV_BALANCE, ENV_BARE_ENGINE, ENV_LORA_LAST_K, parse_flag, parse_seed
from stage_b.stats.training_signal import step_signal, validation_metrics

log = logging.getLogger("group_qc.plugin")
# What the plugin's dataset loaders built in this process: {"train"|"val": (Selection, counts, files)}.
LOADED: dict[str, tuple] = {}
FROZEN_PART = "visual."   # vision tower and aligner (merger, deepstack mergers) live under it


def lora_last_k() -> int | None:
    value = os.environ.get(ENV_LORA_LAST_K, "").strip()
    return parse_seed(value, ENV_LORA_LAST_K) if value else None


def num_llm_layers(model) -> int:
    return int(model.config.get_text_config().num_hidden_layers)


def tensor_digest(named_tensors) -> str | None:
    """sha256 over (name, float32 bytes) in name order; None when a tensor is partitioned (ZeRO-3).
    float32 so a bf16/fp16 checkpoint and its upcast copy give the same digest. A single tensor's value
    alone: `tensor_digest([("", tensor)])`."""
    import torch
    digest = hashlib.sha256()
    for name, tensor in sorted(named_tensors, key=lambda kv: kv[0]):
        if getattr(tensor, "ds_numel", None) is not None:
            return None
        digest.update(name.encode("utf-8"))
        digest.update(tensor.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return digest.hexdigest()


def bare_engine_asked(environ) -> bool:
    """GROUP_QC_BARE_ENGINE=1 turns our engine changes off; unset, empty or 0 leaves them on."""
    return parse_flag(environ.get(ENV_BARE_ENGINE, ""), ENV_BARE_ENGINE)


def use_engine_changes(trainer) -> dict:
    """Our two engine changes, each tested to keep every token (stage_a.vision_windows: the vision tower's windows
    attended one call per length; stage_a.stopping: the stop test at one device copy per step), on the GRPO trainer's
    model (rollouts, log-probs and the loss forward) and on its own TransformersEngine's rollouts (rollout=hf; vLLM
    rolls out with its own code). GROUP_QC_BARE_ENGINE=1 leaves both off. Returns what was switched, for the record."""
    if bare_engine_asked(os.environ):
        return {"window_batches": 0, "host_stop_words": False, "off_by": f"{ENV_BARE_ENGINE}=1"}
    from swift.infer_engine import TransformersEngine

    # heavy: torch, transformers and ms-swift hooks (vision_windows registers its attention at import); loaded only
    # when the engine changes are on
    from stage_a.stopping import use_host_stop_words
    from stage_a.vision_windows import use_window_batches
    engine = getattr(trainer, "engine", None)
    host_stop_words = False
    if isinstance(engine, TransformersEngine):
        use_host_stop_words(engine.template)
        host_stop_words = True
    return {"window_batches": use_window_batches(trainer.model), "host_stop_words": host_stop_words}


def adapter_key(name: str) -> str:
    """A trainable LoRA parameter's key in the saved adapter (PEFT drops the adapter name)."""
    return name.replace(".default.", ".")


def rng_states() -> tuple:
    import random

    import numpy as np
    import torch
    return (random.getstate(), np.random.get_state(), torch.get_rng_state(),
            torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)


def restore_rng_states(states: tuple) -> None:
    import random

    import numpy as np
    import torch
    random.setstate(states[0])
    np.random.set_state(states[1])
    torch.set_rng_state(states[2])
    if states[3] is not None:
        torch.cuda.set_rng_state_all(states[3])


def target_modules(model):
    """What LoRA was told to target (the anchored regex run_grpo.sh builds), from the PEFT config."""
    config = getattr(model, "peft_config", {}).get("default")
    targets = getattr(config, "target_modules", None)
    return sorted(targets) if isinstance(targets, (set, list, tuple)) else targets


def frozen_parts(model):
    """(name after 'visual.', tensor) for the vision tower and aligner: names match a checkpoint's keys
    whatever wraps the model (PEFT, DDP)."""
    return [(n[n.index(FROZEN_PART):], p) for n, p in model.named_parameters() if FROZEN_PART in n]


class QCLoraGuard(TrainerCallback):
    """Fails fast when LoRA is not exactly on the LLM's last K layers (vision/aligner frozen)."""

    def on_init_end(self, args, state, control, model=None, **kwargs):
        # Runs at the end of Trainer.__init__: after LoRA is applied, before any step.
        model = model if model is not None else self.trainer.model
        num_layers = num_llm_layers(model)
        trainable = [(n, p.numel()) for n, p in model.named_parameters() if p.requires_grad]
        per_layer, problems = audit_trainable(trainable, num_layers, lora_last_k())
        log.info("trainable parameters per LLM layer (of %d): %s", num_layers, per_layer)
        if problems:
            raise RuntimeError("group-qc LoRA guard: " + "; ".join(problems[:5]) +
                               (f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""))


class QCOrderGuard(TrainerCallback):
    """With GROUP_QC_BALANCE_LABELS=1 the train rows alternate 不通过/通过 (stage_b.data.dataset.balance_by_label);
    fails fast when the trainer would shuffle them away or cut steps at an odd number of prompts."""

    def on_init_end(self, args, state, control, **kwargs):
        train = LOADED.get("train")
        if train is None or not train[0].balance_labels:
            return
        problems = []
        if getattr(args, "dataset_shuffle", True):
            problems.append("dataset_shuffle is true, which reshuffles the alternating rows: "
                            "set --dataset_shuffle false")
        num_generations = getattr(args, "num_generations", None) or 1
        generation_batch = getattr(args, "generation_batch_size", None) or args.per_device_train_batch_size
        prompts = generation_batch // num_generations
        if prompts % 2:
            problems.append(f"{prompts} prompts per generation batch (generation_batch_size {generation_batch} / "
                            f"num_generations {num_generations}) is odd, so batches cannot hold as many fails as "
                            f"passes: use an even prompts_per_step")
        if problems:
            raise RuntimeError(f"group-qc order guard ({ENV_BALANCE}=1): " + "; ".join(problems))
        log.info("label-balanced training order: %d prompts per generation batch, half 不通过, half 通过", prompts)


class QCRunCallback(TrainerCallback):
    """The run record, per-mission training signal and greedy QC validation (see the module docstring)."""

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self.active = "train" in LOADED   # a GRPO run on other data: nothing to do
        if not self.active:
            return
        trainer = self.trainer
        self.val_rows: list[dict] = []
        self.history: list[dict] = []
        original = trainer._compute_advantages

        def compute_advantages(samples, rewards_per_func, batch_encoded_inputs):
            advantages = original(samples, rewards_per_func, batch_encoded_inputs)
            self._observe(samples, rewards_per_func)
            self._check_photos(samples, batch_encoded_inputs)
            return advantages
        trainer._compute_advantages = compute_advantages
        if "val" in LOADED:
            original_loop, original_loader = trainer.evaluation_loop, trainer.get_eval_dataloader

            def evaluation_loop(*a, **kw):
                return self._greedy_evaluation(original_loop, *a, **kw)

            def get_eval_dataloader(*a, **kw):
                # ms-swift sets dataloader_drop_last for GRPO, which would leave the last validation groups
                # out of every evaluation; evaluation keeps them (a padded batch repeats groups, counted once).
                keep, trainer.args.dataloader_drop_last = trainer.args.dataloader_drop_last, False
                try:
                    return original_loader(*a, **kw)
                finally:
                    trainer.args.dataloader_drop_last = keep
            trainer.evaluation_loop, trainer.get_eval_dataloader = evaluation_loop, get_eval_dataloader
        model = trainer.model
        self.frozen_at_start = tensor_digest(frozen_parts(model))
        changes = use_engine_changes(trainer)
        log.info("engine changes: vision windows by length on %d vision config(s), stop test at one copy per step %s",
                 changes["window_batches"], "on" if changes["host_stop_words"] else "off")
        if state.is_world_process_zero:
            self.record = self._record(args, model)
            self.record["engine_changes"] = changes
            path = write_run_record(args.output_dir, self.record)
            log.info("wrote %s", path)

    def on_train_end(self, args, state, control, **kwargs):
        if not getattr(self, "active", False) or not state.is_world_process_zero:
            return
        frozen = self.record["frozen_parts_sha256"]
        frozen["at_end"] = tensor_digest(frozen_parts(self.trainer.model))
        if frozen["at_end"] != frozen["at_start"]:
            log.error("group-qc: the vision tower or aligner changed during training (sha256 %s -> %s): it was meant "
                      "to stay frozen; do not use this run's checkpoints", frozen["at_start"], frozen["at_end"])
        self.record["validation"].update(
            history=self.history, best_step=state.best_global_step, best_value=state.best_metric,
            best_checkpoint=stored(state.best_model_checkpoint, args.output_dir) if state.best_model_checkpoint
            else None)
        write_run_record(args.output_dir, self.record)
        if state.best_model_checkpoint:
            log.info("best checkpoint by %s: %s (%s = %s)", args.metric_for_best_model, state.best_model_checkpoint,
                     args.metric_for_best_model, state.best_metric)

    # ------------------------------------------------------------ what the policy read
    def _check_photos(self, samples, batch_encoded_inputs) -> None:
        """Counts the visual tokens in what the trainer actually encoded (`qc/photo_tokens_per_sample`, and the first
        step's count in the run record), and stops a run whose inputs contradict its mode: photo-aware rows with no
        visual token (the photos never reached the policy) or summary rows with some."""
        token_id = getattr(self.trainer.template, "image_token_id", None)
        if token_id is None or not samples:
            return
        # ms-swift 4.6: {"model_inputs", "grpo_batch"}
        batches = [b.get("model_inputs", b) for b in batch_encoded_inputs]
        photo = sum(int((b["input_ids"] == token_id).sum()) for b in batches if "input_ids" in b)
        per_sample = photo / len(samples)
        if self.trainer.model.training:
            self.trainer._metrics["train"]["qc/photo_tokens_per_sample"].append(per_sample)
        images = LOADED["train"][0].images
        if images != (photo > 0):
            raise RuntimeError(f"group-qc: the trainer's inputs hold {photo} visual tokens for {len(samples)} samples, "
                               f"but the rows are {'photo-aware' if images else 'summaries only'}: the photos "
                               f"{'never reached' if images else 'reached'} the policy")
        if hasattr(self, "record") and "photo_tokens_per_sample" not in self.record:
            self.record["photo_tokens_per_sample"] = per_sample

    # ------------------------------------------------------------ what ms-swift scored
    def _observe(self, samples, rewards_per_func) -> None:
        from accelerate.utils import gather_object
        trainer = self.trainer
        extra = gather_object([(s.extra.get("mission"), s.extra.get("solution"), s.extra.get("group_id"))
                               for s in samples])
        if trainer.model.training:
            names = list(trainer.reward_func_names)
            totals = (rewards_per_func * trainer.reward_weights.unsqueeze(0)).nansum(dim=1).tolist()
            label = rewards_per_func[:, names.index("qc_label")].tolist() if "qc_label" in names else None
            signal = step_signal([e[0] for e in extra], [e[1] for e in extra], label, totals, trainer.num_generations)
            for key, value in signal.items():
                trainer._metrics["train"][key].append(value)
        else:
            completions = gather_object([self._text(s.messages[-1]["content"]) for s in samples])
            self.val_rows += [{"mission": m, "solution": sol, "group_id": g, "completion": c}
                              for (m, sol, g), c in zip(extra, completions)]

    def _text(self, content) -> str:
        if isinstance(content, str):
            return content
        ids = content["token_ids"] if isinstance(content, dict) else content
        return self.trainer.processing_class.decode(ids, skip_special_tokens=True)

    def _greedy_evaluation(self, original_loop, *args, **kwargs):
        """ms-swift's evaluation loop with greedy decoding; then the QC metrics of its verdicts, once per group.
        The random generators are put back afterwards, so validating does not change what training samples
        next (measured on the demo: without this, the rollouts after the first evaluation differed)."""
        trainer = self.trainer
        sampling = trainer.request_config
        trainer.request_config = copy.copy(sampling)
        trainer.request_config.temperature = 0.0
        self.val_rows = []
        rng = rng_states()
        try:
            output = original_loop(*args, **kwargs)
        finally:
            trainer.request_config = sampling
            restore_rng_states(rng)
        unique = list({(r["mission"], r["group_id"]): r for r in self.val_rows}.values())
        expected = sum(c["rows"] for c in LOADED["val"][1].values())
        if len(unique) != expected and trainer.state.is_world_process_zero:
            log.warning("validation scored %d of the %d group_qc_val groups (per_device_eval_batch_size and the "
                        "number of processes decide which fit): the QC metrics cover those only", len(unique), expected)
        metrics = validation_metrics(unique)
        for key, value in metrics.items():
            trainer._metrics["eval"][key].append(value)
        # A fingerprint of the replies: with unchanged weights, greedy evaluations must repeat it exactly.
        replies = sorted((r["mission"], r["group_id"], r["completion"]) for r in unique)
        self.history.append({"step": trainer.state.global_step, **metrics,
                             "completions_sha256": hashlib.sha256(repr(replies).encode("utf-8")).hexdigest()[:16]})
        return output

    # ------------------------------------------------------------ group_qc_run.json
    def _record(self, args, model) -> dict:
        selection, train_counts, files = LOADED["train"]
        val_counts = LOADED["val"][1] if "val" in LOADED else \
            qc_dataset.build_rows(selection, "val", allow_empty=True)[1]
        trainable = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        num_layers = num_llm_layers(model)
        per_layer, problems = audit_trainable([(n, p.numel()) for n, p in trainable], num_layers, lora_last_k())
        lora = {"last_k": lora_last_k(), "num_llm_layers": num_layers, "trained_layers": per_layer,
                "target_modules": target_modules(model), "problems": problems,
                # each tensor's value, keyed as in the saved adapter: a test checks every one of them moved
                "trainable_sha256_at_start": {adapter_key(n): tensor_digest([("", p)]) for n, p in trainable}}
        record = build_run_record(selection, train_counts, val_counts, files,
                                  rewards=list(self.trainer.reward_func_names),
                                  reward_weights=self.trainer.reward_weights.tolist(), lora=lora,
                                  world_size=args.world_size, output_dir=args.output_dir)
        record["frozen_parts_sha256"] = {"at_start": self.frozen_at_start, "at_end": None}
        record["validation"] = {"enabled": "val" in LOADED, "metric": getattr(args, "metric_for_best_model", None),
                                "eval_steps": getattr(args, "eval_steps", None)}
        return record


CALLBACKS = {"qc_lora_guard": QCLoraGuard, "qc_order_guard": QCOrderGuard, "qc_run": QCRunCallback}


def attach_run_callback() -> None:
    """Adds qc_run to every GRPO trainer ms-swift builds in this process, so `swift rlhf` by hand with the
    plugin records its run too. ms-swift 4.6 builds a trainer's callbacks only from --callbacks, with no
    hook for a plugin: this wraps that one method (tests/test_run_record.py runs swift rlhf without
    --callbacks to catch an ms-swift change)."""
    from swift.trainers.mixin import SwiftMixin
    if getattr(SwiftMixin._get_callbacks, "_group_qc", False):
        return
    original = SwiftMixin._get_callbacks

    def _get_callbacks(self, args):
        callbacks = original(self, args)
        if getattr(args, "num_generations", None) and "qc_run" not in (args.callbacks or []):
            callbacks.append(QCRunCallback(args, self))
        return callbacks
    setattr(_get_callbacks, "_group_qc", True)   # a marker on a function, which mypy cannot type
    SwiftMixin._get_callbacks = _get_callbacks

