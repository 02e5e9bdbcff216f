"""Discovery: group ids, natural order, ignored files, and the issues that go to the errors file."""
from pathlib import Path

import pytest

from stage_a.discovery import discover_mission, group_id_for, mission_folders, natural_key
from qc_core.missions import MissionError, load_registry

M = "BBU接地线检查"


def touch(path: Path, data: bytes = b"x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.mark.parametrize("folder, first, expected", [
    ("g1", "QC-ABC-20250101-7_1.jpg", "QC-ABC-20250101-7"),
    ("g1", "QC-tx-20241231-12345.jpeg", "QC-tx-20241231-12345"),
    ("组_甲", "IMG_0001.jpg", "组_甲"),               # no QC prefix: the folder's name
    ("g2", "QC-ABC-2025011-7.jpg", "g2"),              # 7 digits is not a date
    ("g3", "xQC-ABC-20250101-7.jpg", "g3"),            # prefix means prefix
])
def test_group_id(folder, first, expected):
    assert group_id_for(folder, first) == expected


def test_natural_order():
    names = ["10.jpg", "2.jpg", "1.JPG", "img_20.png", "img_3.png"]
    assert sorted(names, key=natural_key) == ["1.JPG", "2.jpg", "10.jpg", "img_3.png", "img_20.png"]


def discover(root: Path, mission=M, unlabeled=False, registry=None):
    registry = registry or load_registry()
    m = registry.resolve(mission)
    folders = mission_folders(root, registry, [m], strict_unknown=False)[m.name]
    return discover_mission(root, m, folders, registry, unlabeled=unlabeled)


def test_images_sorted_filtered_and_relative(tmp_path):
    g = tmp_path / M / "审核通过" / "QC-AB-20250101-1"
    for name in ["10.jpg", "2.JPEG", "1.Png", ".hidden.jpg", "notes.txt", "thumbs.db"]:
        touch(g / name)
    touch(g / "sub" / "3.jpg")  # sub-folders are ignored
    groups, issues = discover(tmp_path)
    assert issues == []
    (group,) = groups
    assert group.images == (f"{M}/审核通过/QC-AB-20250101-1/1.Png", f"{M}/审核通过/QC-AB-20250101-1/2.JPEG",
                            f"{M}/审核通过/QC-AB-20250101-1/10.jpg")
    assert (group.label, group.mission, group.group_id) == ("pass", M, "QC-AB-20250101-1")


def test_issues_empty_group_duplicate_id_unknown_label_and_the_rest_goes_on(tmp_path):
    touch(tmp_path / M / "审核通过" / "a" / "QC-X-20250101-1_1.jpg")
    touch(tmp_path / M / "审核不通过" / "b" / "QC-X-20250101-1_9.jpg")   # same id, other folder
    (tmp_path / M / "审核通过" / "empty").mkdir()
    touch(tmp_path / M / "审核通过" / "only_text" / "readme.txt")
    touch(tmp_path / M / "待审核" / "c" / "1.jpg")
    touch(tmp_path / M / "审核不通过" / "中文组" / "照片1.jpg")
    groups, issues = discover(tmp_path)
    # Discovery order is natural order of <label>/<group>: 审核不通过 sorts before 审核通过.
    assert [(g.group_id, g.folder) for g in groups] == [("中文组", f"{M}/审核不通过/中文组")]
    errors = sorted(i.error.split(":")[0].split(";")[0] for i in issues)
    assert errors == ["empty group", "empty group", "group id 'QC-X-20250101-1' is found 2 times",
                      "group id 'QC-X-20250101-1' is found 2 times",
                      "unknown label folder '待审核' in BBU接地线检查/待审核"]


def test_alias_folder_is_the_same_mission(tmp_path):
    touch(tmp_path / "BBU线缆布放" / "审核通过" / "g1" / "1.jpg")
    touch(tmp_path / "BBU线缆布放要求" / "审核不通过" / "g2" / "1.jpg")
    groups, _ = discover(tmp_path, "BBU线缆布放要求")
    assert {g.mission for g in groups} == {"BBU线缆布放要求"} and len(groups) == 2


def test_all_refuses_a_folder_naming_no_known_mission(tmp_path):
    touch(tmp_path / "RRU安装检查" / "审核通过" / "g" / "1.jpg")
    registry = load_registry()
    with pytest.raises(MissionError, match="RRU安装检查.*known missions"):
        mission_folders(tmp_path, registry, list(registry.missions), strict_unknown=True)


def test_missing_input_dir_is_named(tmp_path):
    registry = load_registry()
    with pytest.raises(FileNotFoundError, match="nope"):
        mission_folders(tmp_path / "nope", registry, list(registry.missions), strict_unknown=True)


# ------------------------------------------------------------------ nothing passed over without a trace (issue 13)
G = f"{M}/审核通过/QC-AB-20250101-1"


def _dangling(root):
    touch(root / G / "1.jpg")
    (root / G / "2.jpg").symlink_to(root / "nowhere.jpg")


def _looping(root):
    touch(root / G / "1.jpg")
    (root / G / "2.jpg").symlink_to(root / G / "3.jpg")
    (root / G / "3.jpg").symlink_to(root / G / "2.jpg")


def _group_is_a_file(root):
    touch(root / f"{M}/审核通过/QC-AB-20250101-1")


def _loose_photo(root):
    touch(root / f"{M}/审核通过/QC-AB-20250101-1_1.jpg")


def _group_link_loop(root):
    (root / f"{M}/审核通过").mkdir(parents=True)
    (root / G).symlink_to(root / G)


def _file_for_label(root):
    touch(root / f"{M}/审核通过")


@pytest.mark.parametrize("make, path, message", [
    (_dangling, G, "photo(s) 2.jpg in BBU接地线检查/审核通过/QC-AB-20250101-1 cannot be read as files"),
    (_looping, G, "photo(s) 2.jpg, 3.jpg in BBU接地线检查/审核通过/QC-AB-20250101-1 cannot be read as files"),
    (_group_is_a_file, G, f"{G} is a file, not a group folder (skipped)"),
    (_loose_photo, f"{M}/审核通过/QC-AB-20250101-1_1.jpg", "lies loose outside a group folder"),
    (_group_link_loop, G, f"{G} is a symlink that does not resolve (dangling or a loop), not a group folder"),
    (_file_for_label, f"{M}/审核通过", f"{M}/审核通过 is a file, not a label folder (skipped)"),
])
def test_what_cannot_be_a_whole_group_is_an_issue_naming_it(tmp_path, make, path, message):
    """A dangling photo link used to shrink its group silently; a file or a loose photo where a folder
    belongs, and a symlink loop, were passed over or crashed the run."""
    make(tmp_path)
    touch(tmp_path / M / "审核不通过" / "QC-AB-20250101-2" / "1.jpg")   # the rest goes on
    groups, issues = discover(tmp_path)
    assert [g.group_id for g in groups] == ["QC-AB-20250101-2"]
    assert [(i.path, message in i.error) for i in issues] == [(path, True)], [i.error for i in issues]


def test_an_unreadable_group_folder_fails_that_group_only(tmp_path, monkeypatch):
    """Root reads any folder, so the refusal the OS would give another user is raised for that one path."""
    import os
    touch(tmp_path / G / "1.jpg")
    touch(tmp_path / M / "审核不通过" / "QC-AB-20250101-2" / "1.jpg")
    real = os.scandir

    def scandir(path):
        if str(path).endswith("QC-AB-20250101-1"):
            raise PermissionError(13, "Permission denied")
        return real(path)
    monkeypatch.setattr(os, "scandir", scandir)
    groups, issues = discover(tmp_path)
    assert [g.group_id for g in groups] == ["QC-AB-20250101-2"]
    assert [(i.group_id, i.error) for i in issues] == [
        ("QC-AB-20250101-1", f"cannot read group folder {G}: Permission denied (skipped)")]


@pytest.mark.parametrize("layout, unlabeled", [
    # one folder name in two Unicode normalisations (macOS writes NFD): one NFC id, found twice
    ([f"{M}/审核通过/组\u0041\u030a/1.jpg", f"{M}/审核通过/组\u00c5/1.jpg"], False),
    # the same id under both labels
    ([f"{M}/审核通过/QC-AB-20250101-1/1.jpg", f"{M}/审核不通过/QC-AB-20250101-1/1.jpg"], False),
    # the same id in both spellings of one mission folder
    (["BBU线缆布放/审核通过/g/1.jpg", "BBU线缆布放要求/审核通过/g/1.jpg"], False),
    # unreviewed groups (issue 14) follow the same rules: NFD and NFC twins, one id in two folders, two spellings
    ([f"{M}/组\u0041\u030a/1.jpg", f"{M}/组\u00c5/1.jpg"], True),
    ([f"{M}/a/QC-AB-20250101-1_1.jpg", f"{M}/b/QC-AB-20250101-1_1.jpg"], True),
    (["BBU线缆布放/g/1.jpg", "BBU线缆布放要求/g/1.jpg"], True),
])
def test_a_group_id_found_twice_fails_every_copy_naming_all(tmp_path, layout, unlabeled):
    import unicodedata
    mission = layout[0].split("/")[0]
    for rel in layout:
        touch(tmp_path / rel.encode().decode("unicode_escape").encode("latin-1").decode("utf-8"))
    groups, issues = discover(tmp_path, mission, unlabeled=unlabeled)
    assert groups == [] and len(issues) == 2
    ids = {i.group_id for i in issues}
    assert len(ids) == 1 and unicodedata.is_normalized("NFC", ids.pop())
    for issue in issues:
        assert "is found 2 times" in issue.error and all(i.path in issue.error for i in issues)


def test_group_ids_are_nfc(tmp_path):
    import unicodedata
    touch(tmp_path / M / "审核通过" / unicodedata.normalize("NFD", "组Å") / "1.jpg")
    (group,) = discover(tmp_path)[0]
    assert group.group_id == unicodedata.normalize("NFC", "组Å") != unicodedata.normalize("NFD", "组Å")
    assert (tmp_path / group.images[0]).is_file()   # the photo's own path is kept for reading it


# ------------------------------------------------------------------ unreviewed work orders: --unlabeled (issue 14)
@pytest.mark.parametrize("photos, expected", [
    # <mission>/<group>/: label None, photos in natural order, other files ignored
    ([f"{M}/g1/QC-AB-20250101-1_10.jpg", f"{M}/g1/QC-AB-20250101-1_2.JPG", f"{M}/g1/notes.txt"],
     [("QC-AB-20250101-1", ["QC-AB-20250101-1_2.JPG", "QC-AB-20250101-1_10.jpg"])]),
    # no QC prefix on the first photo: the folder's name; .jpeg and .png count
    ([f"{M}/组乙/b.png", f"{M}/组乙/a.jpeg"], [("组乙", ["a.jpeg", "b.png"])]),
    # groups in natural order of their folders
    ([f"{M}/g10/1.jpg", f"{M}/g2/1.jpg"], [("g2", ["1.jpg"]), ("g10", ["1.jpg"])]),
])
def test_unlabeled_reads_groups_directly_under_the_mission_with_label_none(tmp_path, photos, expected):
    for rel in photos:
        touch(tmp_path / rel)
    groups, issues = discover(tmp_path, unlabeled=True)
    assert issues == []
    assert [(g.group_id, [Path(p).name for p in g.images]) for g in groups] == expected
    assert all(g.label is None and g.mission == M and g.folder.count("/") == 1 for g in groups)


def _with_label_folder(name):
    """The default registry plus one more label folder: every folder the registry names is a label folder."""
    from dataclasses import replace
    registry = load_registry()
    return replace(registry, label_folders={**registry.label_folders, name: "pass"})


@pytest.mark.parametrize("unlabeled, photo, registry, folder, says", [
    # --unlabeled on a reviewed mission: each label folder is named, with the flag to drop
    (True, f"{M}/审核通过/QC-AB-20250101-1/1.jpg", None, f"{M}/审核通过",
     "is a label folder of reviewed groups: this mission looks labelled; drop --unlabeled"),
    (True, f"{M}/审核不通过/QC-AB-20250101-1/1.jpg", None, f"{M}/审核不通过", "looks labelled; drop --unlabeled"),
    (True, f"{M}/Approved/QC-AB-20250101-1/1.jpg", _with_label_folder("Approved"), f"{M}/Approved",
     "looks labelled; drop --unlabeled"),
    # a photo outside any group folder is named either way
    (True, f"{M}/QC-AB-20250101-1_1.jpg", None, f"{M}/QC-AB-20250101-1_1.jpg", "lies loose outside a group folder"),
    # without --unlabeled, a folder of photos directly under a mission is an unreviewed group: pass the flag
    (False, f"{M}/QC-AB-20250101-1/1.jpg", None, f"{M}/QC-AB-20250101-1",
     "holds photos directly: it looks like a group folder of unreviewed photos, not a label folder (审核通过, "
     "审核不通过); pass --unlabeled"),
    # a folder that is neither keeps the plain message
    (False, f"{M}/待审核/QC-AB-20250101-1/1.jpg", None, f"{M}/待审核", "unknown label folder '待审核'"),
])
def test_a_folder_of_the_other_layout_is_an_issue_naming_it_and_the_rest_goes_on(tmp_path, unlabeled, photo,
                                                                                  registry, folder, says):
    """Mixing is an error for that folder, not a guess: a label folder read as a group would lose the reviewer's
    label, and a group folder read as a label folder would be skipped unseen."""
    touch(tmp_path / photo)
    good = f"{M}/QC-AB-20250101-2" if unlabeled else f"{M}/审核通过/QC-AB-20250101-2"
    touch(tmp_path / good / "1.jpg")
    groups, issues = discover(tmp_path, unlabeled=unlabeled, registry=registry)
    assert [g.folder for g in groups] == [good]
    assert [i.path for i in issues] == [folder]
    assert folder in issues[0].error and says in issues[0].error, issues[0].error


# ------------------------------------------------------------------ property: every photo is accounted for
def _fuzz_name():
    from hypothesis import strategies as st
    pieces = st.sampled_from(["a", "B", "7", "组", " ", ".", "-", "Å", "A\u030a", "_1", "QC-AB-20250101-"])
    return st.lists(pieces, min_size=1, max_size=4).map("".join).filter(lambda n: n.strip(". ") != "")


def _tree():
    from hypothesis import strategies as st
    kinds = st.sampled_from(["photo", "photo", "photo", "text", "dir_named_photo", "dangling", "loop", "empty_dir"])
    group = st.tuples(_fuzz_name(), st.lists(st.tuples(_fuzz_name(), kinds), max_size=4),
                      st.sampled_from(["dir", "dir", "dir", "file", "loop"]))
    label = st.tuples(st.sampled_from(["审核通过", "审核不通过", "待审核"]), st.lists(group, max_size=4),
                      st.booleans())   # booleans: a loose photo in the label folder
    return st.tuples(st.lists(label, max_size=3), st.sampled_from([M, "BBU接地线检查"]))


def _build(root: Path, tree) -> set[str]:
    """Writes the tree; returns the relative paths of the photo files a person would expect to be handled."""
    import os
    labels, mission = tree
    photos = set()
    for label, groups, loose in labels:
        label_dir = root / mission / label
        label_dir.mkdir(parents=True, exist_ok=True)
        if loose:
            touch(label_dir / "loose.jpg")
            photos.add(f"{mission}/{label}/loose.jpg")
        for name, entries, kind in groups:
            group_dir = label_dir / name
            if os.path.lexists(group_dir):
                continue
            if kind == "file":
                touch(group_dir)
                continue
            if kind == "loop":
                group_dir.symlink_to(group_dir)
                continue
            group_dir.mkdir()
            for entry, what in entries:
                path = group_dir / (entry + (".txt" if what == "text" else ".jpg"))
                if os.path.lexists(path) or what == "empty_dir":
                    continue
                if what == "photo":
                    touch(path)
                elif what == "dir_named_photo":
                    path.mkdir()
                elif what == "dangling":
                    path.symlink_to(root / "missing.jpg")
                elif what == "loop":
                    path.symlink_to(path)
                if what != "text" and not path.name.startswith(".") and not name.startswith("."):
                    photos.add(path.relative_to(root).as_posix())   # hidden files and folders: ignored (README)
    return photos


def test_every_photo_ends_in_one_written_group_or_an_issue():
    """Random trees (NFD and NFC names, dots, spaces, symlinks, loops, empty folders, files where folders
    belong): discovery never raises, and every photo file is in exactly one written group or under a path
    that an issue names."""
    import shutil
    import tempfile
    from hypothesis import HealthCheck, given, settings

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_tree())
    def check(tree):
        root = Path(tempfile.mkdtemp())
        try:
            photos = _build(root, tree)
            groups, issues = discover(root)
            written = [p for g in groups for p in g.images]
            assert len(written) == len(set(written))
            named = {i.path for i in issues}
            for photo in photos:
                in_groups = written.count(photo)
                covered = any(photo == n or photo.startswith(n + "/") for n in named)
                assert in_groups + covered == 1, (photo, written, [i.error for i in issues])
            assert set(written) <= photos
        finally:
            shutil.rmtree(root)
    check()


# ------------------------------------------------------------------ names that are not UTF-8 (issue 26, items 3 and 9)
def btouch(path: bytes, data: bytes = b"x"):
    """Writes a file by its bytes path: the name a Windows archive leaves when unzipped (GBK, not UTF-8)."""
    import os
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def _encodable(groups, issues):
    """Every group and issue as the JSONL line Stage-A writes: UTF-8 all the way (the bug: surrogates)."""
    import json
    from qc_core.records import error_record, make_record
    for g in groups:
        json.dumps(make_record(g, ["ok"] * len(g.images), "m"), ensure_ascii=False).encode("utf-8")
    for i in issues:
        json.dumps(error_record(M, i.error, group_id=i.group_id, path=i.path, stage="discovery"),
                   ensure_ascii=False).encode("utf-8")


@pytest.mark.parametrize("unlabeled", [False, True])
def test_names_from_a_windows_archive_are_issues_naming_the_path_and_every_other_group_is_written(tmp_path,
                                                                                                  unlabeled):
    import os
    parent = os.fsencode(tmp_path / M) + (b"" if unlabeled else "/审核通过".encode())
    shown = f"{M}" + ("" if unlabeled else "/审核通过")
    btouch(parent + b"/a/1.jpg")
    btouch(parent + b"/" + "照片组".encode("gbk") + b"/1.jpg")          # a group folder
    btouch(parent + b"/" + "说明".encode("gbk") + b".txt")               # a stray file beside the groups
    btouch(parent + b"/m/" + "组".encode("gbk") + b".jpg")               # a photo: its group is never cut short
    btouch(parent + b"/m/2.jpg")
    btouch(parent + b"/n/1.jpg")
    btouch(parent + b"/n/" + "说明".encode("gbk") + b".txt")             # a note in a group: ignored, like any
    btouch(parent + b"/zz/1.jpg")                                         # sorts after every bad name
    groups, issues = discover(tmp_path, unlabeled=unlabeled)
    assert [(g.group_id, g.images) for g in groups] == [(n, (f"{shown}/{n}/1.jpg",)) for n in ("a", "n", "zz")]
    by_path = {i.path: i for i in issues}
    assert set(by_path) == {f"{shown}/\\xd5\\xd5Ƭ\\xd7\\xe9", f"{shown}/˵\\xc3\\xf7.txt", f"{shown}/m"}
    folder = by_path[f"{shown}/\\xd5\\xd5Ƭ\\xd7\\xe9"].error
    assert "name not valid UTF-8" in folder and "read as GBK: \\xd5\\xd5Ƭ\\xd7\\xe9 = '照片组'" in folder
    assert "convmv -f gbk -t utf-8" in folder and "unzip -O gbk" in folder
    photo = by_path[f"{shown}/m"]
    assert photo.group_id == "m" and f"{shown}/m/\\xd7\\xe9.jpg" in photo.error and "'组.jpg'" in photo.error
    assert "--retry_errors" in photo.error
    _encodable(groups, issues)


def test_all_names_an_unknown_mission_folder_in_a_windows_encoding_printably(tmp_path):
    import os
    btouch(os.fsencode(tmp_path) + b"/" + "机房".encode("gbk") + b"/a/1.jpg")
    registry = load_registry()
    with pytest.raises(MissionError, match=r"name no known mission: \\xbb\\xfa\\xb7\\xbf") as exc:
        mission_folders(tmp_path, registry, list(registry.missions), strict_unknown=True)
    str(exc.value).encode("utf-8")


# Name pieces as bytes: ASCII, UTF-8 Chinese, NFD, the GBK bytes of Chinese, bytes no UTF-8 holds.
_BYTE_PIECES = [b"a", b"B", b"7", b" ", b"-", b"_1", b"QC-AB-20250101-", "组".encode(), "Å".encode(),
                "A\u030a".encode(), "组".encode("gbk"), "照片".encode("gbk"), b"\xff", b"\x80", b"\xe7\xbb"]


def _byte_name():
    from hypothesis import strategies as st
    return st.lists(st.sampled_from(_BYTE_PIECES), min_size=1, max_size=4).map(b"".join).filter(
        lambda n: n.strip(b". ") != b"" and not n.startswith(b"."))


def _byte_tree():
    from hypothesis import strategies as st
    entry = st.tuples(_byte_name(), st.sampled_from(["photo", "photo", "text", "dangling"]))
    group = st.tuples(_byte_name(), st.lists(entry, max_size=4), st.sampled_from(["dir", "dir", "dir", "file"]))
    label = st.tuples(st.sampled_from(["审核通过".encode(), "审核不通过".encode(), "审核通过".encode("gbk")]),
                      st.lists(group, max_size=4), st.booleans())   # booleans: a loose photo beside the groups
    return st.tuples(st.lists(label, min_size=1, max_size=3), st.booleans())   # booleans: --unlabeled


def _build_bytes(root: bytes, tree) -> set[bytes]:
    """Writes the tree by bytes paths; returns the relative bytes path of every photo a person expects handled."""
    import os
    labels, unlabeled = tree
    photos = set()
    mission = M.encode()
    for label, groups, loose in labels:
        parent = mission if unlabeled else mission + b"/" + label
        os.makedirs(root + b"/" + parent, exist_ok=True)
        if loose:
            btouch(root + b"/" + parent + b"/loose.jpg")
            photos.add(parent + b"/loose.jpg")
        for name, entries, kind in groups:
            group = parent + b"/" + name
            if os.path.lexists(root + b"/" + group):
                continue
            if kind == "file":
                btouch(root + b"/" + group)
                continue
            os.mkdir(root + b"/" + group)
            for entry, what in entries:
                rel = group + b"/" + entry + (b".txt" if what == "text" else b".jpg")
                if os.path.lexists(root + b"/" + rel):
                    continue
                if what == "dangling":
                    os.symlink(root + b"/missing.jpg", root + b"/" + rel)
                else:
                    btouch(root + b"/" + rel)
                if what != "text":
                    photos.add(rel)
    return photos


def test_every_photo_of_a_tree_of_byte_names_ends_in_one_written_group_or_an_errors_line():
    """Random trees named in bytes, valid UTF-8 or not (GBK, stray bytes), both layouts: discovery never raises,
    every group and issue goes through Stage-A's own writer as UTF-8 JSONL, and every photo file is in exactly one
    written group or under the (printable) path of exactly one errors-file line."""
    import os
    import shutil
    import tempfile
    from hypothesis import HealthCheck, given, settings
    from stage_a.discovery import printable_path
    from qc_core.jsonl import JsonlAppender, iter_jsonl
    from qc_core.records import error_record, make_record

    @settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_byte_tree())
    def check(tree):
        root = tempfile.mkdtemp()
        try:
            photos = _build_bytes(os.fsencode(root) + b"/in", tree)
            groups, issues = discover(Path(root) / "in", unlabeled=tree[1])
            out = Path(root) / "out.jsonl"
            errors = Path(root) / "out.errors.jsonl"
            with JsonlAppender(out) as main, JsonlAppender(errors) as errs:
                for g in groups:
                    main.write(make_record(g, ["ok"] * len(g.images), "m"))
                for i in issues:
                    errs.write(error_record(M, i.error, group_id=i.group_id, path=i.path, stage="discovery"))
            written = [p for _, r in iter_jsonl(out, allow_torn_tail=False) for p in r["images"]]
            named = [r["path"] for _, r in iter_jsonl(errors, allow_torn_tail=False)]
            assert len(written) == len(set(written))
            shown = {printable_path(os.fsdecode(p)): p for p in photos}
            assert len(shown) == len(photos)
            for photo in shown:
                covered = sum(photo == n or photo.startswith(n + "/") for n in named)
                assert written.count(photo) + covered == 1, (photo, written, named)
            assert set(written) <= set(shown)
            for p in written:   # a written path is the photo's own path: it opens
                assert os.path.isfile(os.path.join(root, "in", p))
        finally:
            shutil.rmtree(root)
    check()
