"""One definition of the Stage-B selection: flags > exported GROUP_QC_* > the run's record > defaults,
each value remembering where it came from; bad values name their source."""
import argparse
import logging

import pytest

from stage_b.data.settings import KNOWN_ENV, Selection, SettingError, add_selection_args, selection_from

RUN = Selection.from_record({"stage_a_dir": "/runs/sa", "files": [], "missions": "BBU接地线检查", "val_ratio": 0.5,
                             "seed": 7, "balance_labels": True}, "run r.json")


@pytest.mark.parametrize("flags, environ, base, expected, origin", [
    ({}, {}, None, dict(val_ratio=0.2, seed=0, missions="all", stage_a_dir=None), dict(val_ratio="default")),
    ({}, {"GROUP_QC_VAL_RATIO": "0.3"}, None, dict(val_ratio=0.3), dict(val_ratio="GROUP_QC_VAL_RATIO")),
    ({"val_ratio": "0.4"}, {"GROUP_QC_VAL_RATIO": "0.3"}, None, dict(val_ratio=0.4), dict(val_ratio="--val_ratio")),
    ({}, {}, RUN, dict(val_ratio=0.5, seed=7, stage_a_dir="/runs/sa", missions="BBU接地线检查"),
     dict(val_ratio="run r.json", seed="run r.json")),
    ({}, {"GROUP_QC_SPLIT_SEED": "3"}, RUN, dict(val_ratio=0.5, seed=3), dict(seed="GROUP_QC_SPLIT_SEED")),
    ({"split_seed": "9", "mission": "all"}, {}, RUN, dict(seed=9, missions="all"), dict(seed="--split_seed")),
    # one Stage-A input: files named at a higher level replace the run's folder (and the other way round)
    ({}, {"GROUP_QC_STAGE_A_FILES": "a.jsonl,b.jsonl"}, RUN, dict(stage_a_dir=None, files=("a.jsonl", "b.jsonl")),
     dict(files="GROUP_QC_STAGE_A_FILES")),
    ({"stage_a_dir": "/new"}, {"GROUP_QC_STAGE_A_FILES": "a.jsonl"}, None, dict(stage_a_dir="/new", files=()),
     dict(stage_a_dir="--stage_a_dir")),
])
def test_precedence_flag_environment_run_default(flags, environ, base, expected, origin):
    selection = selection_from(flags, environ, base)
    for name, value in expected.items():
        assert getattr(selection, name) == value, name
    for name, where in origin.items():
        assert selection.where(name) == where, name


@pytest.mark.parametrize("environ, message", [
    ({"GROUP_QC_SPLIT_SEED": "abc"}, r"GROUP_QC_SPLIT_SEED='abc' is not an integer"),
    ({"GROUP_QC_VAL_RATIO": "1.5"}, r"GROUP_QC_VAL_RATIO='1.5' is out of range: use 0 <= ratio < 1"),
    ({"GROUP_QC_VAL_RATIO": "a fifth"}, r"GROUP_QC_VAL_RATIO='a fifth' is not a number"),
    ({"GROUP_QC_BALANCE_LABELS": "maybe"}, r"GROUP_QC_BALANCE_LABELS='maybe': use 1"),
])
def test_bad_values_name_their_variable(environ, message):
    with pytest.raises(SettingError, match=message):
        selection_from({}, environ)


def test_bad_flag_is_named_as_the_flag():
    with pytest.raises(SettingError, match=r"--val_ratio='-1' is out of range"):
        selection_from({"val_ratio": "-1"}, {})


def test_a_misspelt_variable_is_warned_about_naming_the_known_ones(caplog):
    with caplog.at_level(logging.WARNING, logger="group_qc.settings"):
        selection = selection_from({}, {"GROUP_QC_VAL_RAITO": "0.5"})
    assert selection.val_ratio == 0.2   # ignored, but not silently
    assert "GROUP_QC_VAL_RAITO is not a group-qc setting" in caplog.text
    assert "did you mean GROUP_QC_VAL_RATIO?" in caplog.text
    assert all(name in caplog.text for name in KNOWN_ENV)


def test_record_round_trip_and_flags_default_to_none():
    assert Selection.from_record(RUN.to_record(), "x") == RUN
    parser = argparse.ArgumentParser()
    add_selection_args(parser)
    args = parser.parse_args([])
    assert args.val_ratio is None and args.split_seed is None and args.stage_a_dir is None  # so env/run can fill in
    assert selection_from(args, {"GROUP_QC_VAL_RATIO": "0.1"}).val_ratio == 0.1
