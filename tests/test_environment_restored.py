"""Each test's changes to os.environ end with it (the autouse `environment_restored` fixture, tests/conftest.py):
ms-swift's argument classes write TENSORBOARD_LOGGING_DIR into the environment when built in-process, and a later
test's `swift rlhf` subprocess then wrote its TensorBoard events into that earlier test's folder."""
from __future__ import annotations

import os

import pytest

from tests.helpers import restored_environment

NAME = "GROUP_QC_TEST_ENVIRONMENT_RESTORED"


@pytest.mark.parametrize("before, change", [
    (None, lambda: os.environ.__setitem__(NAME, "added")),          # added: removed again
    ("kept", lambda: os.environ.__setitem__(NAME, "changed")),      # changed: put back
    ("kept", lambda: os.environ.pop(NAME)),                         # removed: put back
])
def test_the_environment_is_as_it_was_after_the_block(monkeypatch, before, change):
    if before is None:
        monkeypatch.delenv(NAME, raising=False)
    else:
        monkeypatch.setenv(NAME, before)
    with restored_environment():
        change()
    assert os.environ.get(NAME) == before


def test_also_when_the_block_raises(monkeypatch):
    monkeypatch.delenv(NAME, raising=False)
    with pytest.raises(RuntimeError), restored_environment():
        os.environ[NAME] = "added"
        raise RuntimeError
    assert NAME not in os.environ


def test_every_test_runs_inside_it(request):
    assert "environment_restored" in request.fixturenames


def test_building_ms_swift_arguments_in_process_is_undone(tiny_qwen2_5_vl, tmp_path):
    """What leaked: RLHFArguments' __post_init__ sets TENSORBOARD_LOGGING_DIR to its run's folder."""
    from swift.arguments import RLHFArguments
    from swift.utils.utils import _patch_get_type_hints
    from transformers import HfArgumentParser
    before = os.environ.get("TENSORBOARD_LOGGING_DIR")
    with _patch_get_type_hints():
        parser = HfArgumentParser([RLHFArguments])
    with restored_environment():
        parser.parse_args_into_dataclasses(["--rlhf_type", "grpo", "--model", str(tiny_qwen2_5_vl), "--model_type",
                                            "qwen2_5_vl", "--template", "qwen2_5_vl", "--torch_dtype", "float32",
                                            "--output_dir", str(tmp_path / "out"), "--use_vllm", "false",
                                            "--dataset", "AI-ModelScope/alpaca-gpt4-data-en", "--num_generations", "2",
                                            "--per_device_train_batch_size", "2"])
        assert str(tmp_path / "out") in os.environ["TENSORBOARD_LOGGING_DIR"]
    assert os.environ.get("TENSORBOARD_LOGGING_DIR") == before
