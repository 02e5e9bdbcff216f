"""The writer's bookkeeping, apart from threads and models. Pure.

Photos of whole groups go into batches of `batch_size` that cross group boundaries (a batch is never short
because a group ended); each photo's summary or error is recorded against its group; groups come out
complete, in the order they went in, so the output file keeps discovery order; a group with any error comes
out as failed, never with fewer summaries. `stage_a.runner` feeds it from the preparation threads and the
engine.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Final, Literal

from qc_core.errors import UserError
from qc_core.records import Group


@dataclass
class GroupInFlight:
    group: Group                       # as stage_a.discovery found it
    photos: list                       # what prepare() made of each photo, until summarised (then None)
    summaries: list = field(init=False)
    remaining: int = field(init=False)
    error: str | None = None

    def __post_init__(self):
        self.summaries = [None] * len(self.photos)
        self.remaining = len(self.photos)


@dataclass(frozen=True)
class Slot:
    """One photo of one group in a batch."""
    state: GroupInFlight
    index: int

    @property
    def photo(self):
        return self.state.photos[self.index]

    @property
    def path(self) -> str:
        return self.state.group.images[self.index]


@dataclass(frozen=True)
class Finished:
    group: Group
    summaries: list[str] | None        # every photo's, in order; None when the group failed
    error: str | None


class GroupBatcher:
    def __init__(self, batch_size: int):
        if batch_size < 1:
            raise UserError(f"batch_size {batch_size} must be at least 1")
        self.batch_size = batch_size
        self._in_flight: deque[GroupInFlight] = deque()
        self._pending: deque[Slot] = deque()

    def wants_more(self) -> bool:
        """True while the next batch is not full yet: add another group first."""
        return len(self._pending) < self.batch_size

    def add(self, group, photos: list) -> None:
        if not photos:
            raise ValueError(f"group {getattr(group, 'group_id', group)} has no photo")
        state = GroupInFlight(group, list(photos))
        self._in_flight.append(state)
        self._pending.extend(Slot(state, k) for k in range(len(photos)))

    def next_batch(self) -> list[Slot]:
        """Up to batch_size photos, oldest first; empty when nothing is pending."""
        return [self._pending.popleft() for _ in range(min(self.batch_size, len(self._pending)))]

    def record(self, slot: Slot, summary: str | None = None, error: str | None = None) -> None:
        """A photo's outcome: its summary, or an error (the group's first error is the one reported)."""
        state = slot.state
        if state.photos[slot.index] is None:
            raise ValueError(f"{slot.path} was recorded twice")
        state.photos[slot.index] = None   # free the prepared photo now
        state.remaining -= 1
        if error is not None:
            state.error = state.error or error
        else:
            state.summaries[slot.index] = summary

    def finished(self) -> list[Finished]:
        """Groups whose every photo is recorded, from the oldest on, stopping at the first unfinished one."""
        out = []
        while self._in_flight and self._in_flight[0].remaining == 0:
            state = self._in_flight.popleft()
            out.append(Finished(state.group, None if state.error else state.summaries, state.error))
        return out

    @property
    def idle(self) -> bool:
        return not self._in_flight and not self._pending


# --batch_size auto: the largest batch the GPU's free memory holds, from a probe of the engine (stage_a.engine).
AUTO: Final = "auto"
Auto = Literal["auto"]   # a --batch_size before it is resolved: a number, or AUTO
# On a CPU there is no device memory to probe: auto is this fixed size there, the demo's. Measured on 2 cores, tiny
# model, every reply 32 tokens long (group_qc_dev.bench_stage_a --photos 128 --batch_sizes 16 32 64, bare photos/s):
# 19.4 / 22.3 / 25.8, about +15% per doubling; a real checkpoint on a CPU holds far more per photo in flight (fp32
# KV cache and vision activations) and its replies differ in length, so a batch waits for its longest: give a number
# above 16 where the machine is known to hold it.
CPU_AUTO_BATCH = 16
# Host memory bounds the batch too: the runner holds about 2 x batch + 4 photos encoded (~19 MB each at the default
# max_pixels), so 128 keeps that under 5 GB.
AUTO_MAX_BATCH = 128
AUTO_HEADROOM = 0.85   # share of the free memory a batch may use; the rest absorbs fragmentation and longer replies
GIB = 2 ** 30


def parse_batch_size(value) -> int | Auto:
    """A --batch_size value: a whole number of photos per engine call, or 'auto'."""
    text = str(value).strip().lower()
    if text == AUTO:
        return AUTO
    try:
        return int(text)
    except ValueError:
        raise UserError(f"--batch_size {value!r}: expected a whole number of photos per engine call (e.g. 16), or "
                         f"auto (the largest batch the GPU's free memory holds, found by a probe)") from None


def auto_batch_size(free_bytes: float, fixed_bytes: float, per_photo_bytes: float, *, device: str = "the GPU",
                    headroom: float = AUTO_HEADROOM, cap: int = AUTO_MAX_BATCH) -> int:
    """The largest batch whose peak (fixed_bytes + n x per_photo_bytes, both measured by a probe above the loaded
    model) stays within headroom x free_bytes, at most `cap`. Raises ValueError, naming the memory, when not even
    one photo fits."""
    budget = headroom * free_bytes - max(fixed_bytes, 0.0)
    per_photo = max(per_photo_bytes, 1.0)
    if budget < per_photo:
        raise UserError(f"--batch_size auto: {device} has {free_bytes / GIB:.2f} GiB free after loading the model, "
                         f"and one photo needs {(max(fixed_bytes, 0.0) + per_photo) / GIB:.2f} GiB "
                         f"at this --max_pixels "
                         f"(with {1 - headroom:.0%} kept free): lower --max_pixels, free the GPU, or use a larger one")
    return max(1, min(cap, int(budget // per_photo)))
