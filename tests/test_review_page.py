"""The review page in a real browser (headless Chromium through chromedriver): cards per outcome, thumbnails that
load, the placeholder of a missing photo, the filters, a screenshot that is not blank, no network address."""
from __future__ import annotations

import re
import time
from pathlib import Path


from review.page import render_review
from stage_b.grounding import defect_photos
from stage_b.cards import EVALUATION_OUTCOMES, JUDGE_OUTCOMES, evaluation_cards, judge_cards
from stage_b.verdict import FAIL, PASS



def _fixture_report(tmp_path: Path, synthetic) -> tuple[Path, dict, str]:
    """Predictions with known outcomes over real synthetic photos; one photo deleted on purpose."""
    photos = tmp_path / "photos"
    truth = synthetic.generate(photos, seed=4, groups_per_label=3, missions="BBU接地线检查,挡风板安装检查")
    groups = synthetic.groups_of(truth)
    predicted = {}   # per group in turn: a miss, an overkill, an unparseable reply, a correct verdict, or a correct
    # verdict whose reason is not grounded
    kinds = ["miss", "overkill", "invalid", "correct", "ungrounded"]
    preds, records = [], {}
    for n, g in enumerate(groups):
        expected = FAIL if g["label"] == "fail" else PASS
        kind = kinds[n % len(kinds)]
        if kind == "miss" and expected != FAIL or kind == "overkill" and expected != PASS:
            kind = "correct"
        defects = defect_photos(g["summaries"], g["mission"])
        correct = f"不通过\n理由: 图片_{defects[0]} 缺失" if expected == FAIL else "通过\n理由: 图片_1 符合要求"
        ungrounded = "不通过\n理由: 图片_99 缺失" if expected == FAIL else "通过\n理由: 接地线缺失"
        reply = {"miss": "通过\n理由: 图片_1 符合要求", "overkill": "不通过\n理由: 图片_1 不符合",
                 "invalid": "乱码", "correct": correct, "ungrounded": ungrounded}[kind]
        predicted[g["group_id"]] = kind
        preds.append({"group_id": g["group_id"], "mission": g["mission"], "expected": expected,
                      "predicted": None if kind == "invalid" else reply.split("\n")[0], "completion": reply,
                      "rewards": {"qc_label": 1.0 if kind == "correct" else 0.0}, "summaries": g["summaries"],
                      "p_fail": 0.1 * (n % 10)})
        records[(g["mission"], g["group_id"])] = {"images": g["images"]}
    missing = groups[0]["images"][0]
    (photos / missing).unlink()
    cards = evaluation_cards(preds, records, review_all=True)
    result = render_review(tmp_path / "out", title="fixture", cards=cards, outcomes=EVALUATION_OUTCOMES,
                           input_dirs=[photos], intro=["fixture"])
    expected_counts = {k: sum(v == k for v in predicted.values()) for k, _ in EVALUATION_OUTCOMES}
    assert result["missing_photos"] == [str((photos / missing).resolve())]
    return result["index"], expected_counts, missing


def test_the_review_page_in_headless_chromium(browser, tmp_path, synthetic):
    index, counts, missing = _fixture_report(tmp_path, synthetic)
    browser.get(index.as_uri())
    time.sleep(0.3)
    # every thumbnail is made to load (they are lazy), then checked
    browser.execute_script("window.scrollTo(0, document.body.scrollHeight)")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not browser.execute_script(
            "return Array.from(document.images).every(i => i.complete)"):
        time.sleep(0.1)
    cards = browser.execute_script("""return Array.from(document.querySelectorAll('.card'))
        .map(c => c.dataset.outcome)""")
    assert {k: cards.count(k) for k in counts} == counts and all(counts.values())
    widths = browser.execute_script("return Array.from(document.querySelectorAll('.photo img'))"
                                    ".map(i => i.naturalWidth)")
    assert widths and all(w > 0 for w in widths)
    placeholders = browser.execute_script("""return Array.from(document.querySelectorAll('.placeholder'))
        .map(p => p.parentElement.querySelector('.file').textContent)""")
    assert placeholders == [missing]
    assert "photo not found" in browser.find_element("css selector", ".placeholder").text
    # filters: outcome buttons and the mission select change what is shown
    total = len(cards)
    def visible():
        return browser.execute_script(
            "return Array.from(document.querySelectorAll('.card')).filter(c => c.style.display !== 'none').length")
    browser.find_element("css selector", "[data-outcome-filter='miss']").click()
    assert visible() == counts["miss"] == int(browser.find_element("id", "visible-count").text)
    browser.find_element("css selector", "[data-outcome-filter='']").click()
    assert visible() == total
    browser.execute_script("var s = document.getElementById('mission-filter'); s.value = 'BBU接地线检查';"
                           "s.dispatchEvent(new Event('change'))")
    assert 0 < visible() < total
    # a screenshot that is not blank, kept beside the page
    browser.execute_script("window.scrollTo(0, 0)")
    shot = index.parent / "screenshot.png"
    browser.save_screenshot(str(shot))
    from PIL import Image, ImageStat
    assert max(ImageStat.Stat(Image.open(shot).convert("L")).var) > 500
    # nothing on the page reaches a network address
    dom = browser.page_source
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", dom), "the page refers to a network address"


def test_pages_are_capped_and_say_what_is_left(tmp_path):
    cards = [{"group_id": f"g{k}", "mission": "BBU接地线检查", "outcome": "miss", "facts": [], "reason": "r",
              "error": None, "images": [], "summaries": []} for k in range(25)]
    result = render_review(tmp_path, title="t", cards=cards, outcomes=EVALUATION_OUTCOMES, input_dirs=[tmp_path],
                           per_page=10)
    assert [p.name for p in result["pages"]] == ["index.html", "page-2.html", "page-3.html"]
    text = result["pages"][0].read_text(encoding="utf-8")
    assert text.count('class="card"') == 10 and "25 group cards in all" in text and "15 more on the other pages" in text
    again = render_review(tmp_path, title="t", cards=cards[:5], outcomes=EVALUATION_OUTCOMES, input_dirs=[tmp_path],
                          per_page=10)
    assert [p.name for p in again["pages"]] == ["index.html"] and not (tmp_path / "review" / "page-2.html").exists()


def test_thumbnails_are_upright_small_and_reused(tmp_path):
    from PIL import Image
    from qc_core.thumbnails import THUMB_SIZE, make_thumbnails
    photo = tmp_path / "p.jpg"
    im = Image.new("RGB", (1200, 400), "red")
    exif = im.getexif()
    exif[0x0112] = 6   # rotated 90°: shown 400 wide, 1200 high
    im.save(photo, exif=exif)
    (tmp_path / "bad.jpg").write_bytes(b"not a jpeg")
    thumbs, report = make_thumbnails([photo, tmp_path / "bad.jpg", tmp_path / "gone.jpg"], tmp_path / "thumbs")
    assert (report.made, report.failed) == (1, 2)
    with Image.open(tmp_path / "thumbs" / thumbs[photo].name) as t:
        assert t.size[1] == THUMB_SIZE and t.size[0] < t.size[1]   # upright, long side 320
    assert "bad.jpg" in thumbs[tmp_path / "bad.jpg"].error and "not found" in thumbs[tmp_path / "gone.jpg"].error
    _, again = make_thumbnails([photo], tmp_path / "thumbs")
    assert (again.made, again.reused) == (0, 1)


def test_each_photo_is_marked_when_cited_and_when_its_summary_shows_a_defect(tmp_path):
    """Parsed from the HTML, no browser: 图片_1 is cited but clean, 图片_2 shows the defect and is not cited, and a
    cited 图片_9 that the group does not have is named."""
    from html.parser import HTMLParser
    verdict = {"group_id": "QC-M-1", "mission": "BBU接地线检查", "verdict": FAIL, "p_fail": 0.9, "threshold": 0.5,
               "needs_review": True, "review_why": ["the reason cites 图片_1"], "label": None,
               "reply": "不通过\n理由: 图片_1、图片_9 接地线散乱", "images": ["a.jpg", "b.jpg"],
               "summaries": ["接地线×1/已捆扎", "接地线×1/散乱 备注：接地线散乱未捆扎"]}
    result = render_review(tmp_path, title="t", cards=judge_cards([verdict]), outcomes=JUDGE_OUTCOMES,
                           input_dirs=[tmp_path])

    class Photos(HTMLParser):
        def __init__(self):
            super().__init__()
            self.marks = []

        def handle_starttag(self, tag, attrs):
            attrs = dict(attrs)
            if attrs.get("class") == "photo":
                self.marks.append((attrs["data-cited"], attrs["data-defect"]))
    html = result["index"].read_text(encoding="utf-8")
    parser = Photos()
    parser.feed(html)
    assert parser.marks == [("1", "0"), ("0", "1")]
    assert html.count('class="mark mark-cited"') == 1 and html.count('class="mark mark-defect"') == 1
    assert "图片_9" in html and "which this group does not have" in html


def test_a_page_shows_only_photos_inside_its_input_folders_and_encodes_links(tmp_path):
    """A record whose image path climbs out of the input folder (`../`, an absolute path elsewhere) gets a
    placeholder naming why, and nothing of it is copied; a photo inside, with `#`, `?`, `%` or spaces in its name,
    is linked URL-encoded."""
    from urllib.parse import unquote
    from group_qc_dev.photos import jpeg
    inside, outside = tmp_path / "in", tmp_path / "secret"
    jpeg(inside / "g" / "a #1?%.jpg", size=(40, 30), color=(200, 10, 10))
    jpeg(outside / "private.jpg", size=(40, 30), color=(10, 200, 10))
    cards = [{"group_id": "g1", "mission": "BBU接地线检查", "outcome": "miss", "facts": [], "reason": None,
              "error": None, "images": ["g/a #1?%.jpg", "../secret/private.jpg", str(outside / "private.jpg")],
              "summaries": ["a", "b", "c"]}]
    result = render_review(tmp_path / "out", title="t", cards=cards, outcomes=EVALUATION_OUTCOMES, input_dirs=[inside])
    html = result["index"].read_text(encoding="utf-8")
    assert html.count("lies outside the input folder") == 2 and html.count('data-missing="1"') == 2
    assert len(list((tmp_path / "out" / "review" / "thumbs").iterdir())) == 1     # only the photo inside
    link = re.search(r'<a href="([^"]+)" target="_blank">', html).group(1)
    assert "#" not in link and "?" not in link and " " not in link
    assert (result["index"].parent / unquote(link)).resolve() == (inside / "g" / "a #1?%.jpg").resolve()
