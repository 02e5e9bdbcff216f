"""Photo loading: validate, apply EXIF orientation, bound memory, resize to max_pixels. PIL only.

Every failure is a PhotoError whose message names the file, so the group lands in the errors
file with a reason a person can act on, and the run goes on.
"""
from __future__ import annotations

import math
import warnings
from pathlib import Path

from PIL import Image, ImageOps, UnidentifiedImageError

DEFAULT_MAX_IMAGE_PIXELS = 150_000_000  # a 108 MP phone photo passes; a decompression bomb does not


class PhotoError(ValueError):
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
            with Image.open(path) as im:
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
                im = _to_rgb(im)
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


def _to_rgb(im: Image.Image) -> Image.Image:
    if im.mode == "RGB":
        return im
    if im.mode in ("RGBA", "LA") or (im.mode == "P" and "transparency" in im.info):
        # Transparent areas become white, not black: black reads as "dark cabinet" to a VLM.
        rgba = im.convert("RGBA")
        background = Image.new("RGB", rgba.size, (255, 255, 255))
        background.paste(rgba, mask=rgba.getchannel("A"))
        return background
    return im.convert("RGB")
