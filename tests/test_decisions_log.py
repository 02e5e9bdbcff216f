"""stage_b.labels.decisions_log: the labels folder's decisions log is tamper-evident. Every read recomputes the hash
chain,
so a decision flipped, removed, reordered or added by hand is refused naming its line, by the import and by the
monitor (which then fails closed: judge.sh judges no day on an edited log). A reformatted line is the same line."""
from __future__ import annotations

import json

import pytest

from stage_b.labels.decisions_log import CHAIN, DecisionsLogError, append_log, read_log
from tests.helpers import M
from stage_b.contract.verdict import PASS


def decision(k: int, answer: str = "通过") -> dict:
    return {"group_id": f"g{k}", "mission": M, "decision": answer, "note": "", "reviewer": "王工",
            "decided_at": f"2026-11-27T10:0{k}:00+00:00", "verdict": "通过", "p_fail": 0.1,
            "source": {"file": "day1/x_verdicts.jsonl", "sha256": "ab"}, "record": {"group_id": f"g{k}"}}


def lines_of(path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def flip(lines):
    rec = json.loads(lines[1])
    rec["decision"] = "不通过"
    return lines[:1] + [json.dumps(rec, ensure_ascii=False)] + lines[2:]


def unchained_insert(lines):
    return lines[:2] + [json.dumps(decision(9), ensure_ascii=False)] + lines[2:]


def chain_dropped(lines):
    rec = json.loads(lines[3])
    rec.pop(CHAIN)
    return lines[:3] + [json.dumps(rec, ensure_ascii=False)]


def reformatted(lines):   # an editor that re-sorts keys and spaces out a line changes no content
    return [lines[0], json.dumps(json.loads(lines[1]), ensure_ascii=False, sort_keys=True, indent=None,
                                 separators=(", ", ": "))] + lines[2:]


@pytest.mark.parametrize("edit, refused_at, says", [
    (lambda lines: lines, None, None),
    (reformatted, None, None),
    (flip, 2, "was changed, removed or reordered"),                          # planted: no chain check -> read as 不通过
    (lambda lines: lines[:1] + lines[2:], 2, "was changed, removed or reordered"),          # a line removed
    (lambda lines: [lines[0], lines[2], lines[1], lines[3]], 2, "changed, removed or reordered"),   # two swapped
    (lambda lines: lines[:2] + lines[1:], 3, "changed, removed or reordered"),              # a line given twice
    (unchained_insert, 3, "without its chain digest after line 1"),
    (chain_dropped, 4, "without its chain digest"),
])
def test_every_read_checks_the_chain(tmp_path, edit, refused_at, says):
    path = tmp_path / "decisions.jsonl"
    chain = append_log(path, [decision(k) for k in range(1, 5)], "")
    records, last = read_log(path)
    assert [r["group_id"] for r in records] == ["g1", "g2", "g3", "g4"] and last == chain
    path.write_text("\n".join(edit(lines_of(path))) + "\n", encoding="utf-8")
    if refused_at is None:
        assert read_log(path)[1] == chain
        return
    with pytest.raises(DecisionsLogError, match=f"decisions.jsonl:{refused_at}: .*{says}"):
        read_log(path)


def test_a_log_from_before_the_chain_is_read_and_sealed_by_the_next_append(tmp_path):
    path = tmp_path / "decisions.jsonl"
    path.write_text("".join(json.dumps(decision(k), ensure_ascii=False) + "\n" for k in (1, 2)), encoding="utf-8")
    records, chain = read_log(path)             # unchained lines: read as they are
    append_log(path, [decision(3)], chain)      # the first chained line covers both
    assert len(read_log(path)[0]) == 3
    path.write_text("\n".join(flip(lines_of(path))) + "\n", encoding="utf-8")   # an old line edited after the seal
    with pytest.raises(DecisionsLogError, match="decisions.jsonl:3: "):
        read_log(path)


def test_an_edited_log_stops_the_import_and_the_monitor_and_neither_writes(tmp_path, synthetic):
    from qc_core.missions import load_registry
    from stage_b.labels.decisions import import_decisions
    from stage_b.labels.decision_lines import DecisionsError
    from stage_b.monitoring.days import MonitorError, read_labels
    from tests.helpers import judged_day, write_decision_file
    out, verdicts = judged_day(tmp_path, synthetic)
    labels = tmp_path / "labels"
    for k, v in enumerate(verdicts[:2]):
        import_decisions([write_decision_file(tmp_path, out, v, decision="通过", name=f"d{k}.jsonl")], labels)
    assert set(read_labels(labels, load_registry()).values()) == {PASS}
    path = labels / "decisions.jsonl"
    path.write_text("\n".join(flip(lines_of(path))) + "\n", encoding="utf-8")
    before = {p.name: p.read_bytes() for p in labels.iterdir()}
    with pytest.raises(MonitorError, match="decisions.jsonl:2: .*cannot vouch for any promise"):
        read_labels(labels, load_registry())
    with pytest.raises(DecisionsError, match="decisions.jsonl:2: "):
        import_decisions([write_decision_file(tmp_path, out, verdicts[2], name="d2.jsonl")], labels)
    assert {p.name: p.read_bytes() for p in labels.iterdir()} == before


def test_the_import_chains_every_line_it_appends(tmp_path, synthetic):
    from stage_b.labels.decisions import import_decisions
    from tests.helpers import judged_day, write_decision_file
    out, verdicts = judged_day(tmp_path, synthetic)
    files = [write_decision_file(tmp_path, out, v, name=f"d{k}.jsonl") for k, v in enumerate(verdicts[:3])]
    for f in files:
        import_decisions([f], tmp_path / "labels")
    lines = [json.loads(x) for x in lines_of(tmp_path / "labels" / "decisions.jsonl")]
    assert len(lines) == 3 and all(CHAIN in x for x in lines)
    assert len(read_log(tmp_path / "labels" / "decisions.jsonl")[0]) == 3


def _strip_chains(lines):
    out = []
    for line in lines:
        rec = json.loads(line)
        rec.pop(CHAIN, None)
        out.append(json.dumps(rec, ensure_ascii=False))
    return out


def _rewritten(lines):   # the last line cut, another appended in its place by hand with a chain of its own making
    from stage_b.labels.decisions_log import next_chain
    previous = json.loads(lines[2])[CHAIN]
    rec = decision(8, "不通过")
    return lines[:3] + [json.dumps({**rec, CHAIN: next_chain(previous, rec)}, ensure_ascii=False)]


@pytest.mark.parametrize("edit, keep_head, says", [
    (lambda lines: lines[:2], True, r"its last 2 line\(s\) were cut off"),        # the tail cut: what is left chains
    (lambda lines: [], True, "says it held 4 decisions"),                         # emptied
    (None, True, "says it held 4 decisions"),                                     # deleted
    (_strip_chains, True, "chains were stripped"),                                # "written before the chain existed"
    (_rewritten, True, "does not chain to what"),
    (lambda lines: lines[:2], False, "a monitor's head says it held 4"),          # the head deleted too
    (_strip_chains, False, "chains were stripped"),
    (None, False, "a monitor read 4 decisions"),
])
def test_a_log_whose_tail_was_cut_or_chains_stripped_is_refused(tmp_path, edit, keep_head, says):
    """The chain guards lines; the head guards the log: a log shorter than the head beside it or a head a monitor
    recorded, emptied, deleted, or stripped of its chains is refused, naming what is missing (planted: read_log
    without the head check -> the cut tail reads as a log of 2 decisions)."""
    from stage_b.labels.decisions_log import HEAD, head
    path = tmp_path / "decisions.jsonl"
    append_log(path, [decision(k) for k in range(1, 5)], "")
    monitor_saw = head(*read_log(path))
    if edit is None:
        path.unlink()
    else:
        text = "\n".join(edit(lines_of(path)))
        path.write_text(text + "\n" if text else "", encoding="utf-8")
    if not keep_head:
        (tmp_path / HEAD).unlink()
    with pytest.raises(DecisionsLogError, match=says):
        read_log(path, [monitor_saw] if not keep_head else [])


def test_a_log_that_grew_or_began_before_the_chain_reads_and_labels_without_a_log_do_not(tmp_path):
    path = tmp_path / "decisions.jsonl"
    path.write_text("".join(json.dumps(decision(k), ensure_ascii=False) + "\n" for k in (1, 2)), encoding="utf-8")
    records, chain = read_log(path)              # written before the chain: read as it is, no head yet
    append_log(path, [decision(3)], chain, records)
    seen = json.loads((tmp_path / "decisions.head.json").read_text(encoding="utf-8"))
    assert seen == {"lines": 3, "chain": read_log(path)[1], "unchained": 2}
    append_log(path, [decision(4)], read_log(path)[1])   # grew: still read, against the older head too
    assert len(read_log(path, [seen])[0]) == 4
    other = tmp_path / "other" / "decisions.jsonl"
    other.parent.mkdir()
    (other.parent / f"{M}_stage_a.jsonl").write_text("{}\n", encoding="utf-8")
    with pytest.raises(DecisionsLogError, match="labels without the log they come from"):
        read_log(other)
