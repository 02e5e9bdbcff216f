"""Photo files for tests: good, broken, huge, rotated. Written with PIL, no fixtures on disk."""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

from PIL import Image


def jpeg(path: Path, size=(64, 48), color=(120, 80, 40), exif_orientation: int | None = None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    im = Image.new("RGB", size, color)
    kwargs = {}
    if exif_orientation:
        exif = Image.Exif()
        exif[0x0112] = exif_orientation
        kwargs["exif"] = exif.tobytes()
    im.save(path, "JPEG", quality=85, **kwargs)
    return path


def png_header_only(path: Path, width: int, height: int) -> Path:
    """A PNG whose header claims width x height: what a decompression bomb looks like on open."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    body = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64)) + chunk(b"IEND", b"")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return path


def broken(path: Path, kind: str) -> Path:
    """zero | text | truncated: files with an image extension that are not usable images."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "zero":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("这不是图片 / not an image")
    elif kind == "truncated":
        jpeg(path, size=(256, 256))
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    else:
        raise ValueError(kind)
    return path
