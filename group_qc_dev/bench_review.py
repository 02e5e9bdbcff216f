#!/usr/bin/env python
"""Review-page costs, measured in one run (a script, not a test).

    python -m group_qc_dev.bench_review [--groups 1000] [--photo_scale 1]

Makes --groups synthetic photo groups (--photo_scale 12 blows each up to about a phone photo's 3000 px), then:
thumbnails/s (first run) and the rerun that reuses them; the review
folder's size per 1,000 photos; and, in headless Chromium (chromium + chromium-driver), the load time of a page of
200 cards (the renderer's cap) and of one page holding every card, from navigation start to the load event, with
lazy thumbnails as a browser loads them.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

from review.page import render_review  # noqa: E402
from stage_b.pages.cards import EVALUATION_OUTCOMES  # noqa: E402


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def load_seconds(page: Path, repeats: int = 3) -> float | None:
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver_path):
        return None
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1280,1600"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        times = []
        for _ in range(repeats):
            driver.get("about:blank")
            driver.get(page.as_uri())   # returns after the load event
            times.append(driver.execute_script(
                "const t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd - t.startTime;") / 1000)
        return min(times)
    finally:
        driver.quit()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--groups", type=int, default=1000)
    p.add_argument("--photo_scale", type=int, default=1, help="upscale every photo this many times (JPEG, q90)")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args(argv)
    from group_qc_dev import synthetic
    from PIL import Image
    with tempfile.TemporaryDirectory(prefix="bench-review-") as tmp:
        tmp = Path(tmp)
        per_label = max(1, args.groups // 8)
        truth = synthetic.generate(tmp / "photos", seed=9, groups_per_label=per_label)
        groups = synthetic.groups_of(truth)
        if args.photo_scale > 1:
            for t in truth:
                path = tmp / "photos" / t["image"]
                with Image.open(path) as im:
                    big = im.resize((im.width * args.photo_scale, im.height * args.photo_scale))
                big.save(path, "JPEG", quality=90)
        cards = [{"group_id": g["group_id"], "mission": g["mission"], "outcome": ["miss", "overkill", "correct"][n % 3],
                  "facts": [("reviewer", g["label"]), ("p_fail", f"{(n % 100) / 100:.3f}")], "reason": "图片_1 依据",
                  "error": None, "images": g["images"], "summaries": g["summaries"]} for n, g in enumerate(groups)]
        photos = sum(len(c["images"]) for c in cards)
        first = render_review(tmp / "capped", title="bench", cards=cards, outcomes=EVALUATION_OUTCOMES,
                              input_dirs=[tmp / "photos"])
        t = time.perf_counter()
        again = render_review(tmp / "capped", title="bench", cards=cards, outcomes=EVALUATION_OUTCOMES,
                              input_dirs=[tmp / "photos"])
        rerun_s = time.perf_counter() - t
        one_page = render_review(tmp / "one_page", title="bench", cards=cards, outcomes=EVALUATION_OUTCOMES,
                                 input_dirs=[tmp / "photos"], per_page=len(cards))
        review = tmp / "capped" / "review"
        with Image.open(tmp / "photos" / truth[0]["image"]) as im:
            size = im.size
        result = {"groups": len(cards), "photos": photos, "photo_size": list(size),
                  "thumbnails_per_s": first["thumbs"].photos_per_s, "thumbnail_seconds": first["thumbs"].seconds,
                  "rerun_seconds": rerun_s, "rerun_reused": again["thumbs"].reused,
                  "review_bytes_per_1000_photos": folder_bytes(review) / photos * 1000,
                  "html_bytes_per_200_card_page": (review / "index.html").stat().st_size,
                  "pages": len(first["pages"]),
                  "load_s_200_cards": load_seconds(review / "index.html"),
                  f"load_s_{len(cards)}_cards_one_page": load_seconds(one_page["index"])}
    print(f"\nReview-page benchmark: {result['groups']} groups, {result['photos']} photos of "
          f"{result['photo_size'][0]}x{result['photo_size'][1]}")
    print(f"  thumbnails: {result['thumbnails_per_s']:.0f} photos/s ({result['thumbnail_seconds']:.1f} s); "
          f"rerun {result['rerun_seconds']:.1f} s, {result['rerun_reused']} reused")
    print(f"  review folder: {result['review_bytes_per_1000_photos'] / 2**20:.2f} MiB per 1,000 photos; "
          f"{result['pages']} pages of at most 200 cards "
          f"({result['html_bytes_per_200_card_page'] / 1024:.0f} KiB each)")
    for key in result:
        if key.startswith("load_s_"):
            value = result[key]
            print(f"  headless Chromium, {key[7:].replace('_', ' ')}: "
                  + ("no chromium here" if value is None else f"{value:.2f} s to the load event"))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
