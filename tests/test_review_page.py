"""The review page in a real browser (headless Chromium through chromedriver): cards per outcome, thumbnails that
load, the placeholder of a missing photo, the filters, a screenshot that is not blank, no network address. And the
page's HTML without a browser: text stays text, each group shows its own photos, photos only from the folders the
command names, one writer per thumbnail, which page a decision belongs to."""
from __future__ import annotations

import os
import re
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

from group_qc_dev.photos import jpeg
from qc_core.jsonl import JsonlAppender, write_jsonl_atomic
from review.page import render_review
from stage_b import evaluate
from stage_b.evaluate import predictions_from_rows
from stage_b.contract.grounding import defect_photos
from stage_b.pages.cards import EVALUATION_OUTCOMES, JUDGE_OUTCOMES, evaluation_cards, judge_cards
from stage_b.rules.operating_point import manual_point
from stage_b.contract.verdict import FAIL, PASS
from tests.helpers import centre, nearest
from stage_b.judging import day_review
from stage_b.judging import verdict_file



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


A = M = "BBU接地线检查"


# --------------------------------------------------------------------------------------------------------------
# What the page shows, parsed as a browser's parser would (no browser needed): text stays text, each group its own
# photos
# --------------------------------------------------------------------------------------------------------------
# planted-bug tests (issue 27, class 7)
class Page(HTMLParser):
    """A rendered review page as a browser's parser sees it: every element, all text, and per group card its text,
    thumbnails and photo links."""

    def __init__(self, path: Path):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.cards: list[dict] = []
        self.feed(path.read_text(encoding="utf-8"))

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.elements.append((tag, attrs))
        if tag == "div" and attrs.get("class") == "card":
            self.cards.append({"text": "", "thumbs": [], "links": []})
        elif self.cards and tag == "img":
            self.cards[-1]["thumbs"].append(attrs.get("src"))
        elif self.cards and tag == "a" and attrs.get("href", "").startswith(".."):
            self.cards[-1]["links"].append(attrs["href"])

    def handle_data(self, data):
        self.text.append(data)
        if self.cards:
            self.cards[-1]["text"] += data

    def card(self, group_id: str) -> dict:
        (card,) = [c for c in self.cards if group_id in c["text"]]
        return card


MARKUP_REASON = '图片_1 <script>alert("reason")</script>接地线<marquee>未捆扎</marquee> & 散乱'
MARKUP_REPLY = '<iframe src="https://example.invalid/"></iframe>乱码 <b onclick="steal()">?</b>'
MARKUP_SUMMARY = '接地线×1/<img src=x onerror="alert(1)">未捆扎'
SHOWN = [MARKUP_REASON, MARKUP_REPLY, MARKUP_SUMMARY]
GROUPS = {   # two groups whose photos share file names, in different folders, with different colours
    "QC-ID-20250101-1": ("审核不通过", "fail", [(255, 0, 0), (0, 160, 0)]),
    "QC-ID-20250101-2": ("审核通过", "pass", [(0, 0, 255), (240, 240, 0)]),
}


def _photos(root: Path) -> dict[str, list[str]]:
    """root/<mission>/<label folder>/<group>/{1,2}.jpg; both groups' photos get the same modification time."""
    images = {}
    for gid, (folder, _, colours) in GROUPS.items():
        rels = [f"{A}/{folder}/{gid}/{i}.jpg" for i in (1, 2)]
        for rel, colour in zip(rels, colours):
            jpeg(root / rel, size=(96, 64), color=colour)
            os.utime(root / rel, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
        images[gid] = rels
    return images


def _evaluation_page(tmp_path: Path, photos: Path, images: dict) -> Path:
    """stage_b.evaluate's outputs with its review page (--review_all), from predictions scored from replies."""
    (g1, g2) = GROUPS
    rows = [{"group_id": g1, "mission": A, "solution": FAIL, "summaries": [MARKUP_SUMMARY, "接地排×1"]},
            {"group_id": g2, "mission": A, "solution": PASS, "summaries": ["接地线×1/已捆扎", "接地排×1"]}]
    predictions = predictions_from_rows(rows, [f"{FAIL}\n理由: {MARKUP_REASON}", MARKUP_REPLY])
    records = {(A, gid): {"images": rels} for gid, rels in images.items()}
    out = tmp_path / "eval"
    out.mkdir()
    evaluate.write_outputs(out, predictions, [A], "escaping", review={"records": records, "input_dirs": [photos],
                                                                       "all": True})
    return out / "review" / "index.html"


def _judge_page(tmp_path: Path, photos: Path, images: dict) -> Path:
    """stage_b.judging.judge's review page over a verdicts file of records the judge writes
    (stage_b.judging.verdict_file.verdict_record)."""
    (g1, g2) = GROUPS
    out = tmp_path / "judged"
    out.mkdir()
    point = manual_point(0.5)
    with JsonlAppender(verdict_file.verdicts_path(out, A)) as f:
        for gid, p, reply, summaries in [(g1, 0.9, f"{FAIL}\n理由: {MARKUP_REASON}", [MARKUP_SUMMARY, "接地排×1"]),
                                         (g2, 0.1, MARKUP_REPLY, ["接地线×1/已捆扎", "接地排×1"])]:
            record = {"group_id": gid, "mission": A, "label": GROUPS[gid][1], "images": images[gid],
                      "per_image": {f"图片_{i}": s for i, s in enumerate(summaries, start=1)}, "input_dir": str(photos)}
            f.write(verdict_file.verdict_record(record, p, point, reply, provenance={}))
    day_review.write_day_review(out, [A], [photos])
    return out / "review" / "index.html"


PAGES = {"evaluation": _evaluation_page, "judge": _judge_page}


# planted-bug test (issue 27, class 7)
@pytest.mark.parametrize("page", list(PAGES))
def test_markup_in_a_reason_reply_or_summary_is_shown_as_text(tmp_path, page):
    """Silent bug: the review page rendered with autoescape off (review.page._environment), so a reply,
    reason or summary holding markup becomes part of the page: a model's `<script>` runs in the reviewer's browser,
    an `<iframe>` loads, and the reviewer reads something other than what the model wrote. No test rendered such
    text before. Parsed as a browser's parser would: the text must be there, character for character, and none of
    it may have become an element or an attribute."""
    photos = tmp_path / "photos"
    index = PAGES[page](tmp_path, photos, _photos(photos))
    parsed = Page(index)
    text = "".join(parsed.text)
    for shown in SHOWN:
        assert shown in text, shown
    tags = [tag for tag, _ in parsed.elements]
    # the page's own scripts (its group index and its filter/decision script), nothing else
    assert [attrs.get("src") for tag, attrs in parsed.elements if tag == "script"] == ["groups.js", "review.js"]
    index_js = (index.parent / "groups.js").read_text(encoding="utf-8")
    assert "<" not in index_js and ">" not in index_js   # data in the index cannot close a script either
    assert "iframe" not in tags and "marquee" not in tags
    handlers = [(tag, name) for tag, attrs in parsed.elements for name in attrs if name.startswith("on")]
    assert handlers == []
    assert not [attrs for tag, attrs in parsed.elements if tag == "img" and attrs.get("src") == "x"]


# planted-bug test (issue 27, class 7)
@pytest.mark.parametrize("page", list(PAGES))
def test_each_group_shows_its_own_photos_when_file_names_repeat(tmp_path, page):
    """Silent bug: photos keyed by file name on the review page, so two groups' `1.jpg` (different folders, same
    name, here even the same modification time) show the same photo, and a reviewer signs a verdict looking at
    another group's picture. Each card's thumbnails must be its own photos (by colour, in 图片_k order) and its
    links must open its own files."""
    photos = tmp_path / "photos"
    images = _photos(photos)
    index = PAGES[page](tmp_path, photos, images)
    parsed = Page(index)
    palette = [c for _, _, colours in GROUPS.values() for c in colours]
    thumbs = []
    for gid, (_, _, colours) in GROUPS.items():
        card = parsed.card(gid)
        assert len(card["thumbs"]) == 2, card
        for src, colour in zip(card["thumbs"], colours):
            assert palette[nearest(centre(index.parent / src), palette)] == colour, (gid, src)
        opened = [(index.parent / unquote(href)).resolve() for href in card["links"]]   # links are URL-encoded
        assert opened == [(photos / rel).resolve() for rel in images[gid]]
        thumbs += card["thumbs"]
    assert len(set(thumbs)) == 4


# --------------------------------------------------------------------------------------------------------------
# One writer per temp file; a page that keeps working
# --------------------------------------------------------------------------------------------------------------
# hostile input (issue 34)
def test_two_writers_of_one_thumbnail_never_share_a_temp_file(tmp_path, monkeypatch):
    """Two paths to one photo (a symlinked duplicate) give one thumbnail name; two threads make it at once. Each save
    waits until both threads are saving, so the race happens every run (it failed 2 renders in 5 by chance)."""
    from PIL import Image

    from group_qc_dev.photos import jpeg
    from qc_core import thumbnails
    jpeg(tmp_path / "in" / "p.jpg", size=(640, 480), color=(10, 120, 200))
    os.symlink(tmp_path / "in" / "p.jpg", tmp_path / "in" / "twin.jpg")
    both_saving = threading.Barrier(2, timeout=10)
    temps, real_save = [], Image.Image.save

    def save(im, fp, *args, **kwargs):
        temps.append(str(fp))
        both_saving.wait()
        return real_save(im, fp, *args, **kwargs)
    monkeypatch.setattr(Image.Image, "save", save)
    results = {}
    threads = [threading.Thread(target=lambda k=k, path=path: results.__setitem__(
        k, thumbnails._make(path, tmp_path / "thumbs", thumbnails.THUMBNAIL)))
        for k, path in enumerate([tmp_path / "in" / "p.jpg", tmp_path / "in" / "twin.jpg"])]
    (tmp_path / "thumbs").mkdir()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(temps)) == 2, temps
    assert all(r.name and r.error is None for r in results.values()) and results[0].name == results[1].name
    assert not list((tmp_path / "thumbs").glob(".*.tmp")) and len(list((tmp_path / "thumbs").glob("*.jpg"))) == 1


def test_a_malformed_filter_address_leaves_the_page_working(browser, tmp_path, synthetic):
    from tests.helpers import judged_day
    out, verdicts = judged_day(tmp_path, synthetic)
    browser.get((out / "review" / "index.html").as_uri() + "#mission=%E4%B8&outcome=fail")
    assert browser.find_element("id", "total-count").text == str(len(verdicts))   # the script ran to the end
    assert browser.find_element("id", "mission-filter").get_attribute("value") == ""   # that filter stays off
    assert browser.execute_script("return typeof window.groupQcDecisionsJsonl") == "function"


def test_a_group_without_a_source_file_has_no_decide_buttons(tmp_path):
    from stage_b.pages.cards import JUDGE_OUTCOMES
    from review.page import render_review
    cards = [{"group_id": "ERR-1", "mission": M, "outcome": "needs_review", "facts": [], "reason": None, "reply": None,
              "error": "unreadable photo", "images": [], "summaries": []},
             {"group_id": "OK-1", "mission": M, "outcome": "needs_review", "facts": [], "reason": None, "reply": None,
              "error": None, "images": [], "summaries": [], "source": 0}]
    index = render_review(tmp_path / "p", title="t", cards=cards, outcomes=JUDGE_OUTCOMES, input_dirs=[tmp_path],
                          sources=[{"file": "/f.jsonl", "sha256": "s"}])["index"]
    html = index.read_text(encoding="utf-8")
    err, ok = html.split('data-group-id="ERR-1"')[1].split('data-group-id="OK-1"')
    assert "data-decision" not in err and "no decision here" in err and "data-decision" in ok


# --------------------------------------------------------------------------------------------------------------
# Photos only from the folder the command names
# --------------------------------------------------------------------------------------------------------------
# hostile input (issue 34, case 5)
def _secret_photo(tmp_path):
    """A readable image outside anything the user named, and a Stage-A record that points at it."""
    from PIL import Image
    secret = tmp_path / "secret"
    secret.mkdir()
    Image.new("RGB", (32, 32), "red").save(secret / "private.jpg")
    record = {"group_id": "g1", "mission": M, "label": None, "images": ["private.jpg"], "input_dir": str(secret),
              "per_image": {"图片_1": "接地线×1/已捆扎"}, "model": "/sa", "created_at": "2026-11-27T00:00:00+00:00"}
    return secret, record


def _stage_a_review(tmp_path, record, *flags):
    import subprocess
    import sys
    (tmp_path / "sa").mkdir(exist_ok=True)
    write_jsonl_atomic(tmp_path / "sa" / f"{M}_stage_a.jsonl", [record])
    result = subprocess.run([sys.executable, "-m", "group_qc", "stage-a-review", "--stage_a_dir", str(tmp_path / "sa"),
                             "--output_dir", str(tmp_path / "page"), "--mission", M, *flags],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stderr


def _judge_review(tmp_path, record, *flags):
    import contextlib
    import io

    from stage_b.rules.operating_point import manual_point
    (tmp_path / "page").mkdir(exist_ok=True)
    write_jsonl_atomic(verdict_file.verdicts_path(tmp_path / "page", M),
                       [verdict_file.verdict_record(record, 0.9, manual_point(0.5), "不通过\n理由: 图片_1", {})])
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        day_review.write_day_review(tmp_path / "page", [M], [flags[1]] if flags else None)
    return err.getvalue()


@pytest.mark.parametrize("render", [_stage_a_review, _judge_review], ids=["stage_a.audit", "judge"])
def test_a_page_shows_photos_only_from_the_folder_its_command_names(tmp_path, render):
    """A received file whose records say input_dir "/" (here: a private folder) must not get that folder's images
    thumbnailed and linked: the page names the folder and shows nothing until the command names it."""
    secret, record = _secret_photo(tmp_path)
    stderr = render(tmp_path, record)
    page = (tmp_path / "page" / "review" / "index.html").read_text(encoding="utf-8")
    assert not list((tmp_path / "page" / "review" / "thumbs").glob("*.jpg")) and "private.jpg\"" not in page
    assert "Photos not shown" in page and str(secret) in page
    assert "photo(s) not shown" in stderr and "pass --input_dir" in stderr
    render(tmp_path, record, "--input_dir", str(secret))   # named by the command: shown
    assert len(list((tmp_path / "page" / "review" / "thumbs").glob("*.jpg"))) == 1


def test_an_evaluation_page_takes_its_photo_folder_from_the_command_only():
    from stage_b.evaluate import review_inputs
    records = [{"group_id": "g", "mission": M, "input_dir": "/"}]
    assert review_inputs(records)["input_dirs"] == [] and review_inputs(records)["named_dirs"] == ["/"]
    assert review_inputs(records, "/photos")["input_dirs"] == [__import__("pathlib").Path("/photos")]


def test_an_evaluation_page_finds_each_groups_photos_in_its_own_records_folder(tmp_path, monkeypatch, capsys):
    """A re-certification's groups come from several photo folders (a day each): each card's photos are found from
    its own record (inside the project the command runs in), the same relative photo path in two folders shows each
    group its own; a folder gone is named with its count; a folder outside the project is named, not followed
    (planted: the records' folders ignored -> no photo shown)."""
    from group_qc_dev.photos import jpeg
    from stage_b.evaluate.outputs import write_evaluation_review
    monkeypatch.chdir(tmp_path)
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    records, predictions = {}, []
    for day, size in (("day2", (40, 30)), ("day3", (30, 40)), ("gone", (20, 20)), (str(outside), (20, 20))):
        folder = tmp_path / "photos" / day if day != str(outside) else outside
        jpeg(folder / M / "g1" / "1.jpg", size=size)
        gid = f"g-{Path(day).name}"
        records[(M, gid)] = {"group_id": gid, "mission": M, "images": [f"{M}/g1/1.jpg"], "input_dir": str(folder),
                             "per_image": {"图片_1": "接地线松动"}, "label": "fail"}
        predictions.append({"group_id": gid, "mission": M, "expected": "不通过", "predicted": "通过",
                            "completion": "通过\n理由: 图片_1 接地线", "p_fail": 0.1})
    __import__("shutil").rmtree(tmp_path / "photos" / "gone")
    metrics = {"per_mission": {}, "overall": {
        "n": 4, "accuracy": 0, "accuracy_ci95": [0, 1], "miss_rate": 1, "miss_rate_ci95": [0, 1], "overkill_rate": 0,
        "overkill_rate_ci95": [0, 1], "invalid_verdicts": 0}}
    write_evaluation_review(tmp_path / "out", predictions, metrics, "t", records=records, input_dirs=[],
                            named_dirs=[r["input_dir"] for r in records.values()])
    page = (tmp_path / "out" / "review" / "index.html").read_text(encoding="utf-8")
    thumbs = sorted((tmp_path / "out" / "review" / "thumbs").glob("*.jpg"))
    assert len(thumbs) == 2   # day2's and day3's photo, each its own though both are M/g1/1.jpg
    assert "Photos from each group&#39;s own folder" in page or "Photos from each group's own folder" in page
    assert "Not followed (outside the folder the command runs in" in page and str(outside) in page
    err = capsys.readouterr().err
    assert f"photos missing in {(tmp_path / 'photos' / 'gone').resolve()}: 1 of 1" in err


# --------------------------------------------------------------------------------------------------------------
# Which page a decision belongs to; which folder a photo is in
# --------------------------------------------------------------------------------------------------------------
# planted-bug tests (issue 36)
def test_the_page_identity_is_its_folder_and_sources_not_their_content(tmp_path):
    """Issue 35: a day's verdict file that grew keeps the page's decisions (each names the group it saw); another
    day's folder, or other sources, never share them."""
    from review.page import page_identity
    same = page_identity([{"file": "/day/a.jsonl", "sha256": "1"}], tmp_path / "x")
    assert page_identity([{"file": "/day/a.jsonl", "sha256": "2"}], tmp_path / "x") == same
    assert page_identity([{"file": "/day/a.jsonl", "sha256": "1"}], tmp_path / "y") != same
    assert page_identity([{"file": "/day2/a.jsonl", "sha256": "1"}], tmp_path / "x") != same


def test_a_sibling_folder_with_the_same_prefix_is_outside_the_input_folder(tmp_path):
    from review.page import outside_why
    inside, sibling = tmp_path / "in", tmp_path / "in-old"
    for folder in (inside, sibling):
        folder.mkdir()
        (folder / "p.jpg").write_bytes(b"x")
    assert outside_why("p.jpg", inside / "p.jpg", [inside.resolve()]) is None
    assert "outside the input folder" in outside_why("../in-old/p.jpg", sibling / "p.jpg", [inside.resolve()])
