"""One HTML review renderer for evaluation, judging and the Stage-A audit. Jinja2 + PIL, no torch/swift.

    <out>/review/index.html      the summary (tables, images) and the first page of group cards
    <out>/review/page-N.html     further pages, CARDS_PER_PAGE cards each (a browser stays responsive at 10,000 groups)
    <out>/review/groups.js       the index of every group on every page (filters, counts and decisions span pages)
    <out>/review/review.js       the page's script: filters, the reviewer's decisions, export
    <out>/review/thumbs/*.jpg    thumbnails (qc_core.thumbnails), reused on reruns

A card is a dict: group_id, mission, outcome (a key of the `outcomes` given), facts [(name, value)], reason,
error, images (paths relative to the input folder), summaries (one per image), and optionally `cited` and `defect`:
the 1-based photos the reason cites and whose summary shows a defect (each photo is marked "cited" / "summary shows
a defect"); `tags` (the filters it answers to; default its outcome), `verdict` and `p_fail` (the model's, as a
decision export records them) and `source` (an index into `sources`: the file the card was made from, {"file",
"sha256"}, which the decisions import checks).

Deciding: a reviewer decides each group with the mouse or the keyboard (j/k next/previous card, p 通过, f 不通过,
u unsure, n a note). Decisions live in the browser's localStorage under the page's identity (a digest of its
sources), so they survive reloads and span the pages; "export" downloads
decisions-<reviewer>-<day folder>-<date>.jsonl (stage_b.labels.decisions imports it). The page works from file:// with
no
network: no CDN, no framework, a few lines of vanilla JS for the mission and outcome filters, and
`loading="lazy"` on every thumbnail. A click on a thumbnail opens the photo itself (a relative link).
"""
from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from urllib.parse import quote

from qc_core.jsonl import write_text_atomic
from qc_core.names import NAME_RULE
from qc_core.records import image_key
from qc_core.thumbnails import Thumb, make_thumbnails

CARDS_PER_PAGE = 200
REVIEW_DIR = "review"
LABEL_TEXT = {"pass": "审核通过", "fail": "审核不通过", None: "unreviewed"}   # a reviewer's label, as cards show it


def _environment():
    import jinja2
    return jinja2.Environment(loader=jinja2.FileSystemLoader(Path(__file__).parent / "templates"),
                              autoescape=True, trim_blocks=True, lstrip_blocks=True)


def _page_name(number: int) -> str:
    return "index.html" if number == 1 else f"page-{number}.html"


def _write(path: Path, text: str) -> None:
    write_text_atomic(path, text)


def page_identity(sources: list[dict], out_dir: Path) -> str:
    """What the browser keys a page's decisions by: the output folder and its sources' names, not their contents, so
    a re-render after the day's files grew keeps every decision (each names the digest of the group it saw, and the
    import refuses one whose group changed since)."""
    key = "\n".join([str(Path(out_dir).resolve()), *(s["file"] for s in sources)])
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:16]


def _script_json(value) -> str:
    """JSON safe inside a <script> (no `</script>` can close it, whatever the data holds)."""
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e").replace(
        "&", "\\u0026").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def page_photo_folders(given, named) -> tuple[list[Path], str]:
    """The folders a page may show photos from, and the intro line that says so.

    Only the folders the command names (--input_dir, or GROUP_QC_INPUT_DIR where the command reads it), never the
    records' own `input_dir` alone: that is data, and a received file whose records say `input_dir: "/"` would have
    any readable image on this machine thumbnailed and linked (issue 34). The folders the records name go into the
    line, so a user who trusts them knows what to pass."""
    folders = [Path(d) for d in ([given] if isinstance(given, (str, Path)) else list(given or [])) if d]
    named = list(dict.fromkeys(d for d in named or [] if isinstance(d, str) and d))
    if folders:
        return folders, f"Photos from {', '.join(map(str, folders))}."
    where = f" (the records say {', '.join(named)})" if named else ""
    return [], (f"Photos not shown: a page shows photos only from a folder its command names; pass --input_dir with "
                f"the folder that holds them{where}.")


def find_photo(rel: str, input_dirs: list[Path]) -> Path:
    """The photo under the first input folder that has it (or the path under the first, to name it missing)."""
    for folder in input_dirs:
        if (folder / rel).exists():
            return folder / rel
    return (input_dirs[0] if input_dirs else Path(".")) / rel


def outside_why(rel: str, path: Path, input_dirs: list[Path]) -> str | None:
    """Why a record's photo may not be shown: its path (`../…`, a symlink, or an absolute path, as converted origin
    files carry) resolves outside every input folder the page was given. A page shows only those folders' photos."""
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):
        return f"photo path {rel!r} cannot be resolved"
    if any(resolved == d or d in resolved.parents for d in input_dirs):
        return None
    return (f"not shown: {rel!r} lies outside the input folder{'s' if len(input_dirs) > 1 else ''} "
            f"({', '.join(map(str, input_dirs)) or 'none given'}); pass --input_dir with the folder that holds it")


def _not_followed(named_dirs, followed: list[str]) -> str:
    """What the page says of the folders records name that it did not follow (outside the project and the folders
    the command names)."""
    others = sorted({str(d) for d in named_dirs or [] if isinstance(d, str) and d and str(Path(d).resolve())
                     not in followed})
    return (f" Not followed (outside the folder the command runs in and the folders it names): "
            f"{', '.join(others)}; pass --input_dir with the one that holds them." if others else "")


def render_review(out_dir: Path, *, title: str, cards: list[dict], outcomes: list[tuple[str, str]],
                  input_dirs: list[Path], intro: list[str] = (), tables: list[dict] = (), images: list[dict] = (),
                  per_page: int = CARDS_PER_PAGE, sources: list[dict] = (), named_dirs: list = ()) -> dict:
    """Writes <out_dir>/review/ and returns {"index", "pages", "cards", "thumbs": ThumbReport, "missing_photos",
    "page_id", "no_folder"}. `outcomes` orders and labels the outcome filters; cards are shown in the order given.
    `input_dirs`: the folders the command names (the only ones photos are shown from); `named_dirs`: the ones the
    records name, for the line that says where photos come from (page_photo_folders)."""
    input_dirs, photo_line = page_photo_folders(input_dirs, named_dirs)
    own = sorted({str(c["photo_dir"]) for c in cards if c.get("photo_dir")})
    if own:   # each group's photos from its own record's folder (several input folders: days, shared storage)
        photo_line = (f"Photos from each group's own folder ({', '.join(own)})"
                      + (f", then {', '.join(map(str, input_dirs))}." if input_dirs else ".")
                      + _not_followed(named_dirs, own))
    review = Path(out_dir) / REVIEW_DIR
    review.mkdir(parents=True, exist_ok=True)
    for old in review.glob("page-*.html"):   # a rerun with fewer cards must not leave stale pages behind
        old.unlink()
    photo_view, report, missing = _photo_views(cards, [Path(d).resolve() for d in input_dirs], review)
    labels = dict(outcomes)
    views = []
    for n, card in enumerate(cards):
        summaries = list(card.get("summaries") or [])
        summaries += [""] * (len(card["images"]) - len(summaries))
        views.append({**card, "anchor": f"card-{n + 1}", "outcome_label": labels.get(card["outcome"], card["outcome"]),
                      "photos": [photo_view(rel, i, s, card) for i, (rel, s) in
                                 enumerate(zip(card["images"], summaries), start=1)],
                      "cited_missing": [k for k in card.get("cited", ()) if not 1 <= k <= len(card["images"])]})
    pages = [views[k:k + per_page] for k in range(0, len(views), per_page)] or [[]]
    for number, page_cards in enumerate(pages, start=1):
        for c in page_cards:
            c["page"] = number
            c["tags"] = list(c.get("tags") or [c["outcome"]])
    # each source also relative to the review folder: an export from a moved or copied day folder still finds it
    sources = [{**s, "relative": Path(os.path.relpath(s["file"], review.resolve())).as_posix()} for s in sources]
    page_id = page_identity(sources, out_dir)
    missions = sorted({c["mission"] for c in cards})
    _write(review / "groups.js", "window.GROUP_QC_REVIEW = " + _script_json(
        _index(page_id, title, sources, len(pages), outcomes, missions, views)) + ";\n")
    _write(review / "review.js", (Path(__file__).parent / "templates" / "review.js").read_text(encoding="utf-8"))
    template = _environment().get_template("review.html.j2")
    written = []
    for number, page_cards in enumerate(pages, start=1):
        text = template.render(title=title, intro=[photo_line, *intro], tables=list(tables), images=list(images),
                               page=_page_facts(number, len(pages), page_cards, len(views), per_page),
                               cards=page_cards, missions=missions, page_id=page_id,
                               outcomes=[{"key": k, "label": v} for k, v in outcomes])
        written.append(review / _page_name(number))
        _write(written[-1], text)
    return {"index": review / "index.html", "pages": written, "cards": len(views), "thumbs": report,
            "missing_photos": missing, "page_id": page_id, "no_folder": None if input_dirs else photo_line}


def card_folders(card: dict, input_dirs: list[Path]) -> list[Path]:
    """The folders a card's photos are looked for in: its own record's folder first (`photo_dir`, set by a caller that
    vetted it: trusted_record_folder), then the folders the command names."""
    own = card.get("photo_dir")
    return [Path(own).resolve(), *input_dirs] if own else input_dirs


def trusted_record_folder(folder, given: list[Path], root: Path | None = None) -> Path | None:
    """A record's own photo folder, when a page may follow it: inside the folder the command runs in (`root`, the
    project) or inside a folder the command names. A received file whose records name `/` or another tree is not
    followed (issue 34): it is named on the page instead, with the --input_dir that would show it."""
    if not isinstance(folder, (str, Path)) or not str(folder):
        return None
    try:
        path = Path(folder).resolve()
    except (OSError, RuntimeError):
        return None
    roots = [Path(root or Path.cwd()).resolve(), *(Path(g).resolve() for g in given)]
    return path if any(path == r or r in path.parents for r in roots) else None


def _photo_views(cards: list[dict], input_dirs: list[Path], review: Path):
    """(photo_view(rel, index, summary, card) -> what a card shows of one photo, the thumbnail report, the photos not
    shown): thumbnails made once for every photo inside the card's folders (card_folders); a photo outside them is
    refused."""
    photos = {(card.get("photo_dir"), rel): find_photo(rel, card_folders(card, input_dirs))
              for card in cards for rel in card["images"]}
    folders = {card.get("photo_dir"): card_folders(card, input_dirs) for card in cards}
    refused = {key: why for key, path in photos.items() if (why := outside_why(key[1], path, folders[key[0]]))}
    thumbs, report = make_thumbnails([p for key, p in photos.items() if key not in refused], review / "thumbs")
    thumbs.update({photos[key]: Thumb(None, why) for key, why in refused.items()})
    missing = sorted(str(p) for p, t in thumbs.items() if t.name is None)

    def photo_view(rel: str, index: int, summary: str, card: dict) -> dict:
        key = (card.get("photo_dir"), rel)
        path = photos[key]
        thumb = Thumb(None, refused[key]) if key in refused else thumbs[path]
        return {"key": image_key(index), "summary": summary, "file": rel,
                "cited": index in card.get("cited", ()), "defect": index in card.get("defect", ()),
                "thumb": quote(f"thumbs/{thumb.name}") if thumb.name else None,
                "full": quote(Path(os.path.relpath(path, review)).as_posix()) if thumb.name else None,
                "missing": thumb.error}
    return photo_view, report, missing


def _index(page_id: str, title: str, sources: list[dict], n_pages: int, outcomes, missions: list[str],
           views: list[dict]) -> dict:
    """The index every page reads: one row per group, in card order (filters, counts, decisions across pages)."""
    return {"page_id": page_id, "title": title, "sources": sources, "name_rule": NAME_RULE,
            "pages": [_page_name(k) for k in range(1, n_pages + 1)],
            "outcomes": [{"key": k, "label": v} for k, v in outcomes], "missions": missions,
            "groups": [{"key": f"{c['mission']}\u241f{c['group_id']}", "id": c["group_id"], "mission": c["mission"],
                        "outcome": c["outcome"], "tags": c["tags"], "page": c["page"], "anchor": c["anchor"],
                        "verdict": c.get("verdict"), "p_fail": c.get("p_fail"), "source": c.get("source"),
                        "route": c.get("route"), "seen": c.get("seen"), "assigned": c.get("assigned_to") or []}
                       for c in views]}


def _page_facts(number: int, n_pages: int, page_cards: list[dict], n_cards: int, per_page: int) -> dict:
    """The page's number, its note (which cards it shows of how many) and the links to every page."""
    first = (number - 1) * per_page + 1
    note = (f"{n_cards} group cards in all; this page shows cards {first}-{first + len(page_cards) - 1}"
            + (f" ({n_cards - len(page_cards)} more on the other pages)" if n_pages > 1 else "")
            if page_cards else "no group to show")
    return {"number": number, "note": note,
            "links": [{"number": k, "href": _page_name(k), "current": k == number} for k in range(1, n_pages + 1)]}


def report(result: dict) -> None:
    """What every command that renders a review says: missing photos on stderr, then where the page is."""
    t = result["thumbs"]
    if result.get("no_folder") and result["missing_photos"]:
        print(f"warning: review page: {len(result['missing_photos'])} photo(s) not shown: {result['no_folder']}",
              file=sys.stderr)
    elif result["missing_photos"]:
        print(f"warning: review page: {len(result['missing_photos'])} photo(s) not found or unreadable, shown as "
              f"placeholders (first: {result['missing_photos'][0]}); pass --input_dir if the photos moved",
              file=sys.stderr)
    print(f"review page: {result['cards']} group cards, {len(result['pages'])} page(s); thumbnails {t.made} made "
          f"({t.photos_per_s:.0f} photos/s), {t.reused} reused -> {result['index']}")
