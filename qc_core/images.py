"""Photo loading: validate, apply EXIF orientation, decode to 8-bit RGB as a viewer shows it (to_rgb8),
bound memory, resize to max_pixels. PIL only.

Every failure is a PhotoError whose message names the file, so the group lands in the errors
file with a reason a person can act on, and the run goes on.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import cast

from PIL import Image, ImageOps, UnidentifiedImageError

from .errors import UserError

DEFAULT_MAX_IMAGE_PIXELS = 150_000_000  # a 108 MP phone photo passes; a decompression bomb does not


class PhotoError(UserError):
    """A photo that cannot be used; the message names the file."""


def _scale_for(width: int, height: int, max_pixels: int | None) -> float:
    if not max_pixels or width * height <= max_pixels:
        return 1.0
    return math.sqrt(max_pixels / (width * height))


def load_photo(path: str | Path, *, max_pixels: int | None, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
               display_name: str | None = None) -> Image.Image:
    """Decoded RGB image, upright, with at most `max_pixels` pixels (aspect ratio kept)."""
    path = Path(path)
    name = display_name or str(path)
    hint = "replace or remove the file, then rerun with --retry_errors"
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise PhotoError(f"cannot read photo {name}: {exc.strerror}") from None
    if size == 0:
        raise PhotoError(f"unreadable photo {name}: zero-byte file; {hint}")
    try:
        with warnings.catch_warnings():
            # We apply our own, clearer pixel limit below; PIL's warning would only add noise.
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as opened:
                im: Image.Image = opened
                width, height = im.size
                if width * height > max_image_pixels:
                    raise PhotoError(
                        f"photo {name} is {width}x{height} = {width * height / 1e6:.0f} MP, over the "
                        f"{max_image_pixels / 1e6:.0f} MP limit (possible decompression bomb); "
                        f"raise --max_image_pixels if the photo is genuine")
                scale = _scale_for(width, height, max_pixels)
                if scale < 1.0 and im.format == "JPEG":
                    # Decode at 1/2, 1/4 or 1/8 scale straight from the DCT: a 100 MP photo never
                    # needs 300 MB of RGB in memory.
                    im.draft("RGB", (max(1, math.ceil(width * scale)), max(1, math.ceil(height * scale))))
                im.load()
                im = ImageOps.exif_transpose(im)
                im = to_rgb8(im)
    except PhotoError:
        raise
    except Image.DecompressionBombError as exc:
        # PIL's own hard limit (2x Image.MAX_IMAGE_PIXELS, ~179 MP) fires first for huge headers.
        raise PhotoError(f"photo {name} refused as a possible decompression bomb: {exc}") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        reason = "not an image" if isinstance(exc, UnidentifiedImageError) else str(exc) or type(exc).__name__
        raise PhotoError(f"unreadable photo {name}: {reason}; {hint}") from None
    scale = _scale_for(*im.size, max_pixels)
    if scale < 1.0:
        target = (max(1, int(im.width * scale)), max(1, int(im.height * scale)))
        im = im.resize(target, Image.Resampling.BICUBIC)
    return im


# Photo modes whose values go beyond 8 bits: scaled, never clipped (convert("RGB") clips 16-bit grey to white).
HIGH_DEPTH = ("I;16", "I;16L", "I;16B", "I;16N", "I", "F")
WHITE = (255, 255, 255)


def to_rgb8(im: Image.Image) -> Image.Image:
    """8-bit RGB as a person sees the photo in a viewer:
    - transparency (an alpha channel, or a transparent colour or palette entry in any mode) is composited on
      white, the same for every mode: black would read as a dark cabinet to a VLM;
    - 16-bit grey (I;16*) is scaled by 255/65535; 32-bit integer (I) the same when its values fit 16 bits,
      as 8-bit when they fit 8 bits, else stretched from its minimum to its maximum; float (F) as 0..1 when
      its values lie there, as 0..255 when they lie there, else stretched likewise;
    - bilevel, grey, palette, CMYK and the rest through PIL's own conversion."""
    transparent = im.info.get("transparency")
    if im.mode in HIGH_DEPTH:
        mask = _value_mask(im, transparent) if isinstance(transparent, (int, float)) else None
        im = _scale_to_l(im)
        if mask is not None:
            im = Image.merge("LA", (im, mask))
        transparent = None
    if im.mode == "RGB" and transparent is None:
        return im
    if im.mode in ("RGBA", "LA", "PA", "RGBa", "La") or transparent is not None:
        rgba = im.convert("RGBA")
        background = Image.new("RGB", rgba.size, WHITE)
        background.paste(rgba, mask=rgba.getchannel("A"))
        return background
    return im.convert("RGB")


def _scale_to_l(im: Image.Image) -> Image.Image:
    """A high-depth single-channel image as 8-bit grey (see to_rgb8 for the rule)."""
    low: float
    high: float
    if im.mode.startswith("I;16"):
        low, high = 0, 65535
    else:
        lo, hi = cast(tuple[float, float], im.getextrema())   # one band: (min, max)
        if im.mode == "F" and lo >= 0 and hi <= 1:
            low, high = 0.0, 1.0
        elif lo >= 0 and hi <= 255:
            low, high = 0, 255
        elif im.mode == "I" and lo >= 0 and hi <= 65535:
            low, high = 0, 65535
        else:
            low, high = lo, (hi if hi > lo else lo + 1)
    scale = 255.0 / (high - low)
    return im.convert("F").point(lambda v: (v - low) * scale + 0.5).convert("L")


def _value_mask(im: Image.Image, value) -> Image.Image:
    """An L mask: 0 where a pixel is the transparent value, 255 elsewhere (PIL's point() on 32-bit modes
    takes linear maps only, so this rare case uses numpy)."""
    import numpy as np
    return Image.fromarray(np.where(np.asarray(im) == value, 0, 255).astype(np.uint8), "L")
