"""stage_b.train.launch's config=: a `swift rlhf` YAML read as plain data. A file that is not plain YAML (a Python tag,
a
syntax error) or not a mapping of settings is refused naming the file and line, never run and never a traceback."""
from __future__ import annotations

import pytest

from stage_b.train.launch_settings import read_config


@pytest.mark.parametrize("text, refusal", [
    ('x: !!python/object/apply:os.system ["touch {marker}"]\n', r":1 is not plain YAML .*python/object/apply"),
    ("x: [unclosed\n", r":2 is not plain YAML"),
    ("- a\n- b\n", "is not a mapping of settings"),
    ("ENV: [1, 2]\n", "is not a mapping of settings"),
])
def test_a_config_that_is_not_plain_settings_is_refused(tmp_path, text, refusal):
    marker = tmp_path / "ran"
    config = tmp_path / "c.yaml"
    config.write_text(text.format(marker=marker), encoding="utf-8")
    with pytest.raises(ValueError, match=refusal):
        read_config(config)
    assert not marker.exists()


def test_the_shipped_config_reads():
    env, args = read_config("configs/stage_b_grpo.yaml")
    assert isinstance(env, dict) and args.get("rlhf_type") == "grpo"
