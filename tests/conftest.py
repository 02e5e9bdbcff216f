"""Session fixtures: tiny random-weight Qwen-VL checkpoints (built once, offline) and synthetic photos."""
from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def load_script(name: str):
    """scripts/<name>.py as a module, imported the way the scripts import each other (scripts/ on
    sys.path), so a script and the tests share one copy of it."""
    if str(REPO / "scripts") not in sys.path:
        sys.path.insert(0, str(REPO / "scripts"))
    return importlib.import_module(name)


@pytest.fixture(scope="session")
def tiny_model_factory(tmp_path_factory):
    cache: dict[str, Path] = {}
    make = load_script("make_tiny_model")

    def get(arch: str) -> Path:
        if arch not in cache:
            cache[arch] = make.build_tiny_model(arch, tmp_path_factory.mktemp(f"tiny-{arch}") / "model",
                                                force=True)
        return cache[arch]
    return get


@pytest.fixture(scope="session")
def tiny_qwen2_5_vl(tiny_model_factory) -> Path:
    return tiny_model_factory("qwen2_5_vl")


@pytest.fixture(scope="session")
def tiny_qwen3_vl(tiny_model_factory) -> Path:
    return tiny_model_factory("qwen3_vl")


@pytest.fixture(scope="session")
def synthetic():
    return load_script("make_synthetic_qc")
