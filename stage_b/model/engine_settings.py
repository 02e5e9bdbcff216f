"""How a Stage-B command loads and runs the verdict model: one typed settings object, and the one place its flags
are declared (`add_engine_args`), for `stage_b.evaluate`, `stage_b.judging.judge` and `stage_b.train.preflight`. Pure
(argparse
only); the engine itself (stage_b.model.generate, ms-swift) is imported when `engine()` builds one.

The flags: --model, --adapters, --model_type, --template, --batch_size, --max_new_tokens, and where the command has
them --infer_backend and --reason_citations. A command's `main` parses them and keeps `EngineSettings.from_args`;
nothing below `main` reads the argparse namespace.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass

from qc_core.errors import UserError
from qc_core.checkpoints import add_model_type_args, checkpoint_identities

from stage_b.contract.grounding import REASON_CITATIONS

BACKENDS = ("transformers", "vllm")


class EngineSettingError(UserError):
    """An engine setting out of range (names the flag and what to use)."""


@dataclass(frozen=True)
class EngineSettings:
    """The checkpoint and how to run it. `model` is None only for a command that can work without one (evaluate
    re-scoring a predictions file)."""
    model: str | None
    adapters: tuple[str, ...] = ()
    model_type: str | None = None
    template: str | None = None
    backend: str = "transformers"
    batch_size: int = 16
    max_new_tokens: int = 96
    reason_citations: str = "guided"

    def __post_init__(self):
        if self.batch_size < 1:
            raise EngineSettingError(f"--batch_size {self.batch_size} is out of range: use 1 or more")
        if self.max_new_tokens < 1:
            raise EngineSettingError(f"--max_new_tokens {self.max_new_tokens} is out of range: use 1 or more")

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "EngineSettings":
        return cls(model=args.model, adapters=tuple(args.adapters), model_type=args.model_type,
                   template=args.template, backend=getattr(args, "infer_backend", "transformers"),
                   batch_size=args.batch_size, max_new_tokens=args.max_new_tokens,
                   reason_citations=getattr(args, "reason_citations", "guided"))

    @property
    def guided(self) -> bool:
        """Whether a 不通过 reply's reason starts by citing every photo whose summary shows a defect."""
        return self.reason_citations == "guided"

    def describe(self) -> str:
        """The checkpoint as a title names it: the model, and its adapters after a +."""
        return f"{self.model}" + (f" + {' '.join(self.adapters)}" if self.adapters else "")

    def checkpoints(self) -> dict:
        """{"model", "adapters"} identities of the checkpoints (qc_core.checkpoints); a wrong path fails here."""
        return checkpoint_identities(self.model, self.adapters, self.model_type, self.template)

    def engine(self, temperature: float = 0.0, seed: int | None = None):
        """The VerdictEngine these settings describe (loads the model)."""
        from stage_b.model.generate import VerdictEngine   # heavy: the ms-swift adapter (swift, torch), on build
        return VerdictEngine(self.model, adapters=self.adapters, backend=self.backend, model_type=self.model_type,
                             template=self.template, batch_size=self.batch_size, max_new_tokens=self.max_new_tokens,
                             temperature=temperature, seed=seed)


def add_engine_args(parser: argparse.ArgumentParser, *, model_help: str = "checkpoint folder (base or merged)",
                    model_required: bool = True, max_new_tokens: int = 96, backend: bool = True,
                    reason_citations: str | None = None) -> None:
    """The engine flags. `backend`: the command offers --infer_backend (the judge runs transformers only);
    `reason_citations`: the command's help text for --reason_citations (None: the command has no such flag)."""
    parser.add_argument("--model", required=model_required, help=model_help)
    parser.add_argument("--adapters", nargs="*", default=[],
                        help="LoRA checkpoint(s) on top of --model, e.g. a GRPO checkpoint-N")
    add_model_type_args(parser)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--max_new_tokens", type=int, default=max_new_tokens)
    if backend:
        parser.add_argument("--infer_backend", default="transformers", choices=BACKENDS)
    if reason_citations:
        parser.add_argument("--reason_citations", choices=REASON_CITATIONS, default="guided", help=reason_citations)
