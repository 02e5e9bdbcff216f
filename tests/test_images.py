"""Photo loading: every failure names the file; big photos are resized, bombs refused."""
import time

import pytest
from PIL import Image

from stage_a.images import PhotoError, load_photo
from tests.photos import broken, jpeg, png_header_only


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
