"""Session fixtures: tiny random-weight Qwen-VL checkpoints (built once, offline) and synthetic photos."""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def load_script(name: str):
    """Import scripts/<name>.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"scripts_{name}", REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


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
