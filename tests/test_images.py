"""Photo loading: every failure names the file; big photos are resized, bombs refused."""
import time

import pytest
from PIL import Image

from qc_core.images import PhotoError, load_photo
from group_qc_dev.photos import broken, jpeg, png_header_only


@pytest.mark.parametrize("kind, message", [
    ("zero", "zero-byte file"),
    ("text", "not an image"),
    ("truncated", "truncated"),
])
def test_broken_photos_fail_with_the_file_named(tmp_path, kind, message):
    path = broken(tmp_path / "组1" / "坏照片.jpg", kind)
    with pytest.raises(PhotoError) as err:
        load_photo(path, max_pixels=10_000, display_name="m/审核通过/组1/坏照片.jpg")
    assert "m/审核通过/组1/坏照片.jpg" in str(err.value) and message in str(err.value)


def test_missing_photo_is_named(tmp_path):
    with pytest.raises(PhotoError, match="gone.jpg"):
        load_photo(tmp_path / "gone.jpg", max_pixels=10_000)


def test_decompression_bomb_is_refused_before_decoding(tmp_path):
    path = png_header_only(tmp_path / "bomb.png", 40_000, 40_000)
    with pytest.raises(PhotoError, match=r"bomb.png.*decompression bomb"):
        load_photo(path, max_pixels=10_000)


def test_100_megapixel_photo_is_resized_to_max_pixels_without_blowing_up(tmp_path):
    path = tmp_path / "big.jpg"
    Image.new("L", (12_000, 8_400), 128).save(path, "JPEG", quality=50)   # 100.8 MP
    start = time.perf_counter()
    im = load_photo(path, max_pixels=802_816)
    assert im.mode == "RGB" and im.width * im.height <= 802_816
    assert abs(im.width / im.height - 12_000 / 8_400) < 0.01
    assert time.perf_counter() - start < 10  # JPEG draft decode: no full-size RGB buffer


@pytest.mark.parametrize("orientation, size", [(1, (40, 20)), (6, (20, 40)), (8, (20, 40)), (3, (40, 20))])
def test_exif_orientation_is_applied(tmp_path, orientation, size):
    path = jpeg(tmp_path / "r.jpg", size=(40, 20), exif_orientation=orientation)
    assert load_photo(path, max_pixels=None).size == size


def test_small_photos_are_not_upscaled_and_transparency_becomes_white(tmp_path):
    path = tmp_path / "t.png"
    Image.new("RGBA", (30, 10), (0, 0, 0, 0)).save(path)
    im = load_photo(path, max_pixels=802_816)
    assert im.size == (30, 10) and im.mode == "RGB" and im.getpixel((0, 0)) == (255, 255, 255)


def test_header_over_our_limit_but_under_pils_is_refused_with_our_message(tmp_path):
    path = png_header_only(tmp_path / "wide.png", 20_000, 5_000)   # 100 MP, limit set to 50 MP
    with pytest.raises(PhotoError, match=r"wide.png is 20000x5000 = 100 MP, over the 50 MP limit"):
        load_photo(path, max_pixels=10_000, max_image_pixels=50_000_000)


# ------------------------------------------------------------------ every photo mode, as a viewer shows it
def _ramp(dtype, top, shape=(4, 8)):
    import numpy as np
    return np.linspace(0, top, shape[0] * shape[1]).reshape(shape).astype(dtype)


def _composite(values, alpha):
    """grey or RGB values composited on white by alpha (0..255), rounded as PIL pastes."""
    a = alpha.astype(float)[..., None] / 255 if values.ndim == 3 else alpha.astype(float) / 255
    return values * a + 255 * (1 - a)


def _case(mode):
    """(PIL image to save, file suffix, save kwargs, expected RGB array)."""
    import numpy as np
    grey = _ramp(np.uint8, 255)
    rgb = lambda g: np.repeat(np.asarray(g, dtype=float)[..., None], 3, axis=2)  # noqa: E731
    if mode == "1":
        bits = (np.indices((4, 8)).sum(0) % 2).astype(bool)
        return Image.fromarray(bits), ".png", {}, rgb(bits * 255)
    if mode == "L":
        return Image.fromarray(grey), ".png", {}, rgb(grey)
    if mode == "L+transparent value":
        expected = rgb(np.where(grey == grey[1, 1], 255, grey))
        return Image.fromarray(grey), ".png", {"transparency": int(grey[1, 1])}, expected
    if mode == "LA":
        alpha = _ramp(np.uint8, 255)[::-1]
        return Image.fromarray(np.stack([grey, alpha], -1), "LA"), ".png", {}, rgb(_composite(grey, alpha))
    if mode in ("P", "P+transparent index"):
        palette = np.array([[10, 20, 30], [200, 100, 0], [0, 150, 250], [90, 90, 90]], dtype=np.uint8)
        index = (np.indices((4, 8)).sum(0) % 4).astype(np.uint8)
        im = Image.fromarray(index, "P")
        im.putpalette(palette.ravel().tolist())
        expected = palette[index].astype(float)
        if mode == "P":
            return im, ".png", {}, expected
        expected[index == 2] = 255
        return im, ".png", {"transparency": 2}, expected
    if mode == "I;16":
        deep = _ramp(np.uint16, 65535)
        return Image.fromarray(deep), ".png", {}, rgb(np.round(deep / 257))
    if mode == "I":
        deep = _ramp(np.int32, 1_000_000) - 200_000   # beyond 16 bits: stretched from min to max
        return Image.fromarray(deep), ".tif", {}, rgb(np.round((deep - deep.min()) * 255 / (deep.max() - deep.min())))
    if mode == "F":
        light = _ramp(np.float32, 1.0)
        return Image.fromarray(light), ".tif", {}, rgb(np.round(light * 255))
    if mode == "CMYK":
        inks = np.array([[0, 0, 0, 0], [255, 0, 0, 0], [0, 255, 255, 0], [0, 0, 0, 255]], dtype=np.uint8)
        seen = np.array([[255, 255, 255], [0, 255, 255], [255, 0, 0], [0, 0, 0]], dtype=float)
        index = (np.indices((4, 8)).sum(0) % 4)
        return Image.fromarray(inks[index], "CMYK"), ".tif", {}, seen[index]
    if mode == "RGBA":
        colour = np.stack([grey, grey[::-1], np.full_like(grey, 60)], -1)
        alpha = _ramp(np.uint8, 255)
        return (Image.fromarray(np.concatenate([colour, alpha[..., None]], -1), "RGBA"), ".png", {},
                _composite(colour.astype(float), alpha))
    if mode == "RGB+transparent colour":
        colour = np.stack([grey, grey, np.full_like(grey, 60)], -1)
        expected = colour.astype(float)
        expected[(grey == grey[2, 3])] = 255
        return Image.fromarray(colour, "RGB"), ".png", {"transparency": (int(grey[2, 3]),) * 2 + (60,)}, expected
    raise ValueError(mode)


@pytest.mark.parametrize("mode", ["1", "L", "L+transparent value", "LA", "P", "P+transparent index", "I;16", "I", "F",
                                  "CMYK", "RGBA", "RGB+transparent colour"])
def test_every_photo_mode_decodes_to_what_a_viewer_shows(tmp_path, mode):
    """16-bit grey scaled (not clipped to white), transparency on white in every mode (not black for grey)."""
    import numpy as np
    image, suffix, save, expected = _case(mode)
    path = tmp_path / f"photo{suffix}"
    image.save(path, **save)
    decoded = load_photo(path, max_pixels=None)
    assert decoded.mode == "RGB" and decoded.size == (8, 4)
    got = np.asarray(decoded).astype(float)
    assert np.abs(got - expected).max() <= 1, (f"{mode}: got {got[..., 0].tolist()}, "
                                               f"expected {expected[..., 0].tolist()}")
