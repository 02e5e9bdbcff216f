"""Every `GROUP_QC_*` setting, and the one definition of a Stage-B selection. Pure (no torch/swift).
GROUP_QC_MISSIONS is defined by the mission registry (qc_core.missions), which Stage-A reads too: the core never
imports a stage above it.

A *selection* is what Stage-B reads and how it splits it: the Stage-A input (a folder or files), the
missions, the validation ratio, the split seed and label balancing. The plugin (inside `swift rlhf`),
preflight, evaluation and the launchers all build it here, so a value set in one place reaches every
component that needs it:

    command-line flag  >  exported GROUP_QC_* variable  >  the training run's record  >  default

(`base`, the run's record, exists only where a command is given a trained adapter.) Each value keeps
where it came from, so messages can say "val_ratio 0.5 (GROUP_QC_VAL_RATIO)".
"""
from __future__ import annotations

import argparse
import difflib
import logging
import os
from dataclasses import dataclass, field, fields, replace
from typing import Any, Callable, Mapping

from qc_core.errors import UserError
from qc_core.library_logs import ENV as LIBRARY_LOG_ENV
from qc_core.missions import ENV_MISSIONS

from stage_b.data.split import DEFAULT_VAL_RATIO

log = logging.getLogger("group_qc.settings")

ENV_STAGE_A_DIR = "GROUP_QC_STAGE_A_DIR"
ENV_STAGE_A_FILES = "GROUP_QC_STAGE_A_FILES"
ENV_VAL_RATIO = "GROUP_QC_VAL_RATIO"
ENV_SPLIT_SEED = "GROUP_QC_SPLIT_SEED"
ENV_BALANCE = "GROUP_QC_BALANCE_LABELS"
ENV_LORA_LAST_K = "GROUP_QC_LORA_LAST_K"
ENV_IMAGES = "GROUP_QC_STAGE_B_IMAGES"
ENV_MAX_PIXELS = "GROUP_QC_STAGE_B_MAX_PIXELS"
ENV_INPUT_DIR = "GROUP_QC_INPUT_DIR"
ENV_BARE_ENGINE = "GROUP_QC_BARE_ENGINE"
ENV_PREFIX = "GROUP_QC_"
# Photo-aware mode's per-photo budget: 256 x 28 x 28 pixels = 256 visual tokens per photo on Qwen2.5-VL (one token
# per 28x28 patch after the 2x2 merge; 196 on Qwen3-VL's 32-px merged patches). A 6-photo group then costs ~1.5k
# visual tokens next to ~0.4k of text: docs/training.md ("Stage-B that can look") works out why a 7B model's GRPO with
# 8 generations fits one 80 GB GPU at this budget.
DEFAULT_MAX_PIXELS = 256 * 28 * 28
MIN_MAX_PIXELS, MAX_MAX_PIXELS = 56 * 56, 16384 * 28 * 28
KNOWN_ENV = {
    ENV_STAGE_A_DIR: "folder of <mission>_stage_a.jsonl files",
    ENV_STAGE_A_FILES: "comma-separated Stage-A files or globs (wins over the folder)",
    ENV_VAL_RATIO: f"share of groups held out for validation, by group-id hash (default {DEFAULT_VAL_RATIO})",
    ENV_SPLIT_SEED: "seed of the train/validation split (default 0)",
    ENV_BALANCE: "1: training rows alternate 不通过/通过 so every step holds both verdicts",
    ENV_LORA_LAST_K: "qc_lora_guard stops a run unless exactly the last K language-model layers train",
    ENV_MISSIONS: "mission registry YAML (default configs/missions.yaml)",
    ENV_IMAGES: "1: Stage-B rows carry the group's photos beside the summaries (photo-aware GRPO); default 0",
    ENV_MAX_PIXELS: f"photo-aware mode's pixel budget per photo (default {DEFAULT_MAX_PIXELS} = 256 x 28 x 28)",
    ENV_BARE_ENGINE: "1: GRPO keeps ms-swift's stop test and transformers' call per vision window (our two engine "
                     "changes off; both keep every token, so this is for comparing)",
    ENV_INPUT_DIR: "photo folder (Stage-A's --input_dir) when the Stage-A records' own input_dir is not where they are",
    LIBRARY_LOG_ENV: "file that ms-swift's and transformers' own lines go to (scripts/launcher.sh sets it unless "
                     "verbose=1; qc_core.library_logs)",
}
DEFAULT_SPLIT_SEED = 0
TEXT_MODE, PHOTO_MODE = "summaries", "summaries+photos"   # what Stage-B's model reads
MODE_FIELDS = ("images", "max_pixels")   # a model trained or calibrated in one mode is scored in the same


class SettingError(UserError):
    """A setting with a value that cannot be used; the message names where it came from."""


# ---------------------------------------------------------------- value parsers (source = flag or variable)
def parse_ratio(text, source: str) -> float:
    try:
        ratio = float(text)
    except (TypeError, ValueError):
        raise SettingError(f"{source}={text!r} is not a number: use a validation share such as 0.2") from None
    if not 0.0 <= ratio < 1.0:
        raise SettingError(f"{source}={text!r} is out of range: use 0 <= ratio < 1 (the share of groups held out "
                           f"for validation)")
    return ratio


def parse_seed(text, source: str) -> int:
    try:
        return int(str(text).strip())
    except ValueError:
        raise SettingError(f"{source}={text!r} is not an integer: use a whole number such as 0 (the seed of the "
                           f"train/validation split)") from None


def parse_flag(text, source: str) -> bool:
    value = str(text).strip().lower()
    if value not in ("0", "1", "true", "false", ""):
        raise SettingError(f"{source}={text!r}: use 1 (on) or 0 (off)")
    return value in ("1", "true")


def parse_pixels(text, source: str) -> int:
    try:
        pixels = int(str(text).strip())
    except ValueError:
        raise SettingError(f"{source}={text!r} is not an integer: use a pixel count such as {DEFAULT_MAX_PIXELS} "
                           f"(256 x 28 x 28: 256 visual tokens per photo on Qwen2.5-VL)") from None
    if not MIN_MAX_PIXELS <= pixels <= MAX_MAX_PIXELS:
        raise SettingError(f"{source}={text!r} is out of range: use {MIN_MAX_PIXELS} (56 x 56) to {MAX_MAX_PIXELS:,} "
                           f"(16384 x 28 x 28, Qwen-VL's own ceiling) pixels per photo")
    return pixels


def parse_files(text, source: str) -> tuple[str, ...]:
    return tuple(f.strip() for f in str(text).split(",") if f.strip())


def parse_text(text, source: str) -> str | None:
    return str(text).strip() or None


@dataclass(frozen=True)
class Setting:
    field: str                          # Selection attribute
    flag: str                           # command-line flag (its argparse dest is the flag without --)
    env: str | None                     # environment variable, if any
    parse: Callable[[object, str], object]
    help: str

    @property
    def dest(self) -> str:
        return self.flag[2:]


SETTINGS = (
    Setting("stage_a_dir", "--stage_a_dir", ENV_STAGE_A_DIR, parse_text, "folder of <mission>_stage_a.jsonl"),
    Setting("files", "--stage_a_files", ENV_STAGE_A_FILES, parse_files,
            "comma-separated Stage-A files or globs (instead of --stage_a_dir)"),
    Setting("missions", "--mission", None, parse_text, "a mission, a comma-separated list, or 'all'"),
    Setting("val_ratio", "--val_ratio", ENV_VAL_RATIO, parse_ratio, "share of groups held out for validation"),
    Setting("seed", "--split_seed", ENV_SPLIT_SEED, parse_seed, "seed of the train/validation split"),
    Setting("balance_labels", "--balance_labels", ENV_BALANCE, parse_flag,
            "1: training rows alternate 不通过/通过"),
    Setting("images", "--images", ENV_IMAGES, parse_flag,
            "1: the model sees each group's photos beside their summaries (photo-aware mode)"),
    Setting("max_pixels", "--max_pixels", ENV_MAX_PIXELS, parse_pixels,
            "photo-aware mode: pixels per photo (larger photos are scaled down in the copies the model reads)"),
    Setting("input_dir", "--input_dir", ENV_INPUT_DIR, parse_text,
            "where the photos are (photo-aware runs default to the input_dir the Stage-A records name; review pages "
            "show photos only from this folder)"),
)
INPUT_FIELDS = ("stage_a_dir", "files")  # one Stage-A input: whichever level sets either sets both
SPLIT_FIELDS = ("val_ratio", "seed")


@dataclass(frozen=True)
class Selection:
    """What Stage-B reads and how it splits it. `origin` says where each value came from."""
    stage_a_dir: str | None = None
    files: tuple[str, ...] = ()
    missions: str = "all"
    val_ratio: float = DEFAULT_VAL_RATIO
    seed: int = DEFAULT_SPLIT_SEED
    balance_labels: bool = False
    images: bool = False
    max_pixels: int = DEFAULT_MAX_PIXELS
    input_dir: str | None = None
    origin: Mapping[str, str] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def where(self, name: str) -> str:
        return self.origin.get(name, "default")

    def describe_split(self) -> str:
        return (f"val_ratio {self.val_ratio:g} ({self.where('val_ratio')}), "
                f"split_seed {self.seed} ({self.where('seed')})")

    @property
    def mode(self) -> str:
        """What the model reads: `summaries` (the default) or `summaries+photos`."""
        return PHOTO_MODE if self.images else TEXT_MODE

    def describe_mode(self) -> str:
        return (f"summaries and photos ({self.where('images')}), max_pixels {self.max_pixels} "
                f"({self.where('max_pixels')})" if self.images else "summaries only")

    def same_split(self, other: "Selection") -> bool:
        return all(getattr(self, f) == getattr(other, f) for f in SPLIT_FIELDS)

    def to_record(self) -> dict:
        """JSON-ready values (group_qc_run.json, metrics.json)."""
        return {f.name: list(getattr(self, f.name)) if f.name == "files" else getattr(self, f.name)
                for f in fields(self) if f.name != "origin"}

    @classmethod
    def from_record(cls, record: Mapping, source: str) -> "Selection":
        """The selection a run recorded (`to_record`); every value's origin is `source`, the run file."""
        values: dict[str, Any] = {}
        for s in SETTINGS:
            if s.field in record:
                value = record[s.field]
                values[s.field] = (tuple(value) if s.field == "files" else
                                   None if value is None else s.parse(value, f"{source}: {s.field}"))
        return cls(**values, origin={name: source for name in values})

    def to_env(self) -> dict[str, str]:
        """The GROUP_QC_* variables that carry this selection into `swift rlhf` (missions travel in the
        dataset name, `group_qc_train:<missions>`)."""
        env = {ENV_VAL_RATIO: f"{self.val_ratio:g}", ENV_SPLIT_SEED: str(self.seed),
               ENV_BALANCE: "1" if self.balance_labels else "0", ENV_IMAGES: "1" if self.images else "0",
               ENV_MAX_PIXELS: str(self.max_pixels)}
        if self.stage_a_dir:
            env[ENV_STAGE_A_DIR] = self.stage_a_dir
        if self.files:
            env[ENV_STAGE_A_FILES] = ",".join(self.files)
        if self.input_dir:
            env[ENV_INPUT_DIR] = self.input_dir
        return env


def unknown_env_names(environ: Mapping[str, str]) -> list[str]:
    return sorted(n for n in environ if n.startswith(ENV_PREFIX) and n not in KNOWN_ENV)


_warned: set[str] = set()


def warn_unknown_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """A warning per GROUP_QC_* variable that is no setting (a typo would otherwise be ignored); logged once
    per process and name, returned every time."""
    environ = os.environ if environ is None else environ
    warnings = []
    for name in unknown_env_names(environ):
        close = difflib.get_close_matches(name, KNOWN_ENV, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        warnings.append(f"{name} is not a group-qc setting and is ignored{hint}; known: {', '.join(KNOWN_ENV)}")
    for name, message in zip(unknown_env_names(environ), warnings):
        if name not in _warned:
            _warned.add(name)
            log.warning(message)
    return warnings


def add_selection_args(parser: argparse.ArgumentParser, *, balance: bool = False, split: bool = True) -> None:
    """Adds the selection flags (the split's only with `split`: judging reads every group). Their defaults are
    None: an unset flag falls back to the environment, then to the trained run's record, then to the default
    (see `selection_from`)."""
    for s in SETTINGS:
        if (s.field == "balance_labels" and not balance) or (s.field in SPLIT_FIELDS and not split):
            continue
        default = Selection.__dataclass_fields__[s.field].default
        fallbacks = ([f"${s.env}"] if s.env else []) + ["the trained run's value", repr(default)]
        parser.add_argument(s.flag, default=None, help=f"{s.help} (if unset: {', else '.join(fallbacks)})")


def selection_flags(args: argparse.Namespace) -> dict:
    """{flag dest: value or None} of the selection flags a command's parser has (add_selection_args): what its `main`
    keeps of the namespace for `selection_from`."""
    return {s.dest: getattr(args, s.dest, None) for s in SETTINGS}


def selection_from(flags: Mapping | argparse.Namespace | None = None, environ: Mapping[str, str] | None = None,
                   base: Selection | None = None) -> Selection:
    """The selection from command-line flags (None = not given), the environment and a base (the run's
    record), in that order of precedence. Raises SettingError naming the flag or variable."""
    environ = os.environ if environ is None else environ
    flags = vars(flags) if isinstance(flags, argparse.Namespace) else dict(flags or {})
    warn_unknown_env(environ)
    levels = [({s.field: (flags[s.dest], s.flag) for s in SETTINGS if flags.get(s.dest) is not None}),
              ({s.field: (environ[s.env], s.env) for s in SETTINGS if s.env and environ.get(s.env, "").strip()})]
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for level in levels:
        if any(f in level for f in INPUT_FIELDS):
            if any(f in values for f in INPUT_FIELDS):   # a higher level named the input already
                level = {k: v for k, v in level.items() if k not in INPUT_FIELDS}
            else:
                values.update(stage_a_dir=None, files=())  # this level names the Stage-A input
        for s in SETTINGS:
            if s.field in level and s.field not in origin:
                text, source = level[s.field]
                values[s.field], origin[s.field] = s.parse(text, source), source
    base = base or Selection()
    return replace(base, **values, origin={**{k: v for k, v in base.origin.items() if k not in values}, **origin})
