"""Smaller copies of photos, decoded as Stage-A decodes them: thumbnails for review pages (long side THUMB_SIZE
px) and the copies photo-aware Stage-B feeds the model (stage_b.data.photos: within a pixel budget). Upright (EXIF),
8-bit RGB, JPEG, made in parallel, reused on reruns. PIL only (decoding goes through qc_core.images.load_photo,
the same path Stage-A reads photos with).

A copy's file name is a digest of the photo's resolved path, size and modification time and of the copy's size
rule, so a rerun reuses it and a replaced photo gets a new one. A photo that is missing or cannot be decoded gets
no file but the reason (review pages show it in the photo's place; Stage-B refuses the group, naming it).
"""
from __future__ import annotations

import hashlib
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from qc_core.images import PhotoError, load_photo

THUMB_SIZE = 320
THUMB_QUALITY = 80
WORKERS = min(8, (os.cpu_count() or 1) * 2)   # decoding releases the GIL; a little oversubscription hides disk waits


@dataclass(frozen=True)
class Thumb:
    name: str | None      # file name under the thumbs folder, or None
    error: str | None     # why there is none (missing, unreadable), shown on the page


@dataclass
class ThumbReport:
    made: int = 0
    reused: int = 0
    failed: int = 0
    seconds: float = 0.0

    @property
    def photos_per_s(self) -> float:
        return self.made / self.seconds if self.seconds else 0.0


@dataclass(frozen=True)
class CopyRule:
    """How a copy is made: at most `max_pixels` (aspect kept), then fitted in a `box` x `box` square if given."""
    max_pixels: int
    box: int | None = None
    quality: int = THUMB_QUALITY

    def __str__(self) -> str:
        return f"{self.max_pixels}/{self.box}/{self.quality}"


THUMBNAIL = CopyRule(max_pixels=THUMB_SIZE * THUMB_SIZE * 2, box=THUMB_SIZE)


def copy_name(photo: Path, rule: CopyRule = THUMBNAIL) -> str | None:
    try:
        st = photo.stat()
    except OSError:
        return None
    key = f"{photo.resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0{rule}".encode("utf-8", "surrogateescape")
    return hashlib.sha1(key).hexdigest()[:20] + ".jpg"


def _make(photo: Path, out: Path, rule: CopyRule) -> Thumb:
    name = copy_name(photo, rule)
    if name is None:
        return Thumb(None, f"photo not found: {photo}")
    target = out / name
    if target.exists():
        return Thumb(name, None)
    try:
        im = load_photo(photo, max_pixels=rule.max_pixels)
    except PhotoError as exc:
        return Thumb(None, str(exc))
    if rule.box:
        im.thumbnail((rule.box, rule.box))
    # one writer per temp file: two paths to one photo (a symlinked duplicate) have one name, on two threads
    tmp = target.with_name(f".{name}.{os.getpid()}.{threading.get_ident()}.tmp")
    # 4:4:4 chroma above thumbnail quality: a copy the model reads keeps the colour detail of thin cables
    im.save(tmp, "JPEG", quality=rule.quality, subsampling=0 if rule.quality >= 90 else -1)
    os.replace(tmp, target)   # a killed run never leaves half a copy under the final name
    return Thumb(name, None)


def make_thumbnails(photos, out: Path, workers: int = WORKERS, rule: CopyRule = THUMBNAIL
                    ) -> tuple[dict[Path, Thumb], ThumbReport]:
    """{photo: Thumb} for every distinct photo (a copy by `rule`), and what it took."""
    out.mkdir(parents=True, exist_ok=True)
    photos = list(dict.fromkeys(Path(p) for p in photos))
    existing = {p.name for p in out.iterdir()}
    report = ThumbReport()
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="thumbs") as pool:
        thumbs = dict(zip(photos, pool.map(lambda p: _make(p, out, rule), photos)))
    report.seconds = time.perf_counter() - start
    for t in thumbs.values():
        if t.name is None:
            report.failed += 1
        elif t.name in existing:
            report.reused += 1
        else:
            report.made += 1
    return thumbs, report
