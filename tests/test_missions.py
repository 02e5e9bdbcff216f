"""The mission registry is the only place that knows missions (configs/missions.yaml)."""
import pytest

from qc_core.missions import MissionError, load_registry

CANONICAL = ["BBU安装方式检查（正装）", "BBU接地线检查", "BBU线缆布放要求", "挡风板安装检查"]


def test_default_registry_ships_the_four_missions_in_order():
    assert load_registry().names == CANONICAL


@pytest.mark.parametrize("given, canonical", [
    ("BBU安装方式检查（正装）", "BBU安装方式检查（正装）"),
    ("BBU安装方式检查(正装)", "BBU安装方式检查（正装）"),   # half-width parentheses
    ("BBU线缆布放", "BBU线缆布放要求"),                   # short form from older data
    ("  BBU接地线检查 ", "BBU接地线检查"),
    ("挡风板安装检查", "挡风板安装检查"),
])
def test_names_and_aliases_resolve_to_the_canonical_mission(given, canonical):
    assert load_registry().resolve(given).name == canonical


@pytest.mark.parametrize("bad", ["RRU安装检查", "", "BBU"])
def test_unknown_mission_is_an_error_naming_the_known_ones(bad):
    with pytest.raises(MissionError) as err:
        load_registry().select(bad)
    for name in CANONICAL:
        assert name in str(err.value)


@pytest.mark.parametrize("spec, expected", [
    ("all", CANONICAL),
    ("BBU接地线检查", ["BBU接地线检查"]),
    ("挡风板安装检查,BBU线缆布放", ["BBU线缆布放要求", "挡风板安装检查"]),   # registry order
    (["BBU线缆布放要求", "BBU线缆布放"], ["BBU线缆布放要求"]),                 # no duplicates
])
def test_select(spec, expected):
    assert [m.name for m in load_registry().select(spec)] == expected


def test_every_mission_carries_stage_a_focus_and_stage_b_checkpoints():
    for mission in load_registry().missions:
        assert mission.focus and mission.checkpoints and mission.defect_terms


@pytest.mark.parametrize("folder, label", [("审核通过", "pass"), ("审核不通过", "fail"), ("待审核", None)])
def test_label_folders(folder, label):
    assert load_registry().label_of_folder(folder) == label


@pytest.mark.parametrize("text, message", [
    ("label_folders: {审核通过: pass}\nmissions: [{name: A, focus: f}]", "lacks 'checkpoints'"),
    ("label_folders: {通过: ok}\nmissions: []", "label_folders"),
    ("label_folders: {审核通过: pass}\nmissions:\n - {name: A, focus: f, checkpoints: [c]}\n"
     " - {name: B, aliases: [a], focus: f, checkpoints: [c]}\n - {name: C, aliases: [A], focus: f, checkpoints: [c]}",
     "names both"),
])
def test_broken_registry_files_are_refused_with_the_reason(tmp_path, text, message):
    path = tmp_path / "missions.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(MissionError, match=message):
        load_registry(path)


def test_missing_registry_file_names_the_path(tmp_path):
    with pytest.raises(MissionError, match="not found"):
        load_registry(tmp_path / "nope.yaml")
