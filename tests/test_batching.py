"""The writer's bookkeeping (stage_a.batching), no threads, no model: batches cross group boundaries, every
photo is recorded once, groups come out whole and in the order they went in."""
from collections import namedtuple

import pytest

from stage_a.batching import GroupBatcher

G = namedtuple("G", "group_id images")


def group(name, n):
    return G(name, tuple(f"{name}/{k}.jpg" for k in range(n)))


def run(sizes, batch_size, fail=()):
    """Feeds groups of the given photo counts as the runner does; returns (batches as 'group:k' lists,
    finished groups in order as (group_id, summaries or None, error))."""
    batcher = GroupBatcher(batch_size)
    todo = [group(f"g{i}", n) for i, n in enumerate(sizes)]
    batches, finished = [], []
    while True:
        while todo and batcher.wants_more():
            g = todo.pop(0)
            batcher.add(g, [f"pixels of {p}" for p in g.images])
        batch = batcher.next_batch()
        if not batch:
            break
        batches.append([f"{s.state.group.group_id}:{s.index}" for s in batch])
        for slot in batch:
            if slot.path in fail:
                batcher.record(slot, error=f"bad {slot.path}")
            else:
                batcher.record(slot, summary=f"summary of {slot.photo}")
        finished += [(f.group.group_id, f.summaries, f.error) for f in batcher.finished()]
    assert batcher.idle
    return batches, finished


@pytest.mark.parametrize("sizes, batch_size, batches", [
    ([1, 1, 1], 2, [["g0:0", "g1:0"], ["g2:0"]]),
    ([3, 2], 2, [["g0:0", "g0:1"], ["g0:2", "g1:0"], ["g1:1"]]),            # a batch crosses group boundaries
    ([5], 16, [["g0:0", "g0:1", "g0:2", "g0:3", "g0:4"]]),
    ([2, 2, 2], 1, [["g0:0"], ["g0:1"], ["g1:0"], ["g1:1"], ["g2:0"], ["g2:1"]]),
    ([1, 6, 1], 4, [["g0:0", "g1:0", "g1:1", "g1:2"], ["g1:3", "g1:4", "g1:5", "g2:0"]]),
])
def test_batches_are_full_until_the_last_and_keep_discovery_order(sizes, batch_size, batches):
    got, finished = run(sizes, batch_size)
    assert got == batches
    assert [f[0] for f in finished] == [f"g{i}" for i in range(len(sizes))]   # whole groups, in order
    assert all(f[1] == [f"summary of pixels of g{i}/{k}.jpg" for k in range(sizes[i])]
               for i, f in enumerate(finished))


@pytest.mark.parametrize("sizes, batch_size, fail, expected", [
    # a failed photo fails its group (first error reported), never a group with fewer summaries
    ([2, 1], 2, {"g0/1.jpg"}, [("g0", None, "bad g0/1.jpg"), ("g1", ["summary of pixels of g1/0.jpg"], None)]),
    ([3], 1, {"g0/0.jpg", "g0/2.jpg"}, [("g0", None, "bad g0/0.jpg")]),
])
def test_a_failed_photo_fails_its_whole_group(sizes, batch_size, fail, expected):
    assert run(sizes, batch_size, fail)[1] == expected


def test_a_group_comes_out_only_when_all_its_photos_are_recorded():
    batcher = GroupBatcher(2)
    batcher.add(group("a", 3), ["p0", "p1", "p2"])
    first = batcher.next_batch()
    for slot in first:
        batcher.record(slot, summary="s")
    assert batcher.finished() == [] and not batcher.idle
    (last,) = batcher.next_batch()
    batcher.record(last, summary="s")
    assert [f.group.group_id for f in batcher.finished()] == ["a"] and batcher.idle


@pytest.mark.parametrize("misuse, message", [
    (lambda b, s: b.record(s, summary="again"), "recorded twice"),
    (lambda b, s: b.add(group("empty", 0), []), "has no photo"),
])
def test_misuse_is_refused(misuse, message):
    batcher = GroupBatcher(1)
    batcher.add(group("a", 1), ["p"])
    (slot,) = batcher.next_batch()
    batcher.record(slot, summary="s")
    with pytest.raises(ValueError, match=message):
        misuse(batcher, slot)
