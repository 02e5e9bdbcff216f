"""Thumbnails for review pages: upright (EXIF), long side THUMB_SIZE px, JPEG, made in parallel, reused on reruns.
PIL only (decoding goes through stage_a.images.load_photo, the same path Stage-A reads photos with).

A thumbnail's file name is a digest of the photo's resolved path, size and modification time, so a rerun
reuses it and a replaced photo gets a new one. A photo that is missing or cannot be decoded gets no file but
the reason, which the page shows in its place.
"""
from __future__ import annotations

import hashlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .images import PhotoError, load_photo

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


def thumb_name(photo: Path) -> str | None:
    try:
        st = photo.stat()
    except OSError:
        return None
    key = f"{photo.resolve()}\0{st.st_size}\0{st.st_mtime_ns}".encode("utf-8", "surrogateescape")
    return hashlib.sha1(key).hexdigest()[:20] + ".jpg"


def _make(photo: Path, out: Path) -> Thumb:
    name = thumb_name(photo)
    if name is None:
        return Thumb(None, f"photo not found: {photo}")
    target = out / name
    if target.exists():
        return Thumb(name, None)
    try:
        im = load_photo(photo, max_pixels=THUMB_SIZE * THUMB_SIZE * 2)
    except PhotoError as exc:
        return Thumb(None, str(exc))
    im.thumbnail((THUMB_SIZE, THUMB_SIZE))
    tmp = target.with_name(f".{name}.{os.getpid()}.tmp")
    im.save(tmp, "JPEG", quality=THUMB_QUALITY)
    os.replace(tmp, target)   # a killed run never leaves half a thumbnail under the final name
    return Thumb(name, None)


def make_thumbnails(photos, out: Path, workers: int = WORKERS) -> tuple[dict[Path, Thumb], ThumbReport]:
    """{photo: Thumb} for every distinct photo, and what it took."""
    out.mkdir(parents=True, exist_ok=True)
    photos = list(dict.fromkeys(Path(p) for p in photos))
    existing = {p.name for p in out.iterdir()}
    report = ThumbReport()
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="thumbs") as pool:
        thumbs = dict(zip(photos, pool.map(lambda p: _make(p, out), photos)))
    report.seconds = time.perf_counter() - start
    for t in thumbs.values():
        if t.name is None:
            report.failed += 1
        elif t.name in existing:
            report.reused += 1
        else:
            report.made += 1
    return thumbs, report
