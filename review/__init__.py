"""The review pages, where a person looks at groups and decides them: used by Stage-A's audit (`group-qc
stage-a-review`), evaluation and judging alike.

    review/page.py        the renderer: cards, pages, the index of every group, photos as thumbnails (Jinja2)
    review/templates/     the page (review.html.j2) and its script (review.js: filters, decisions, export)
    stage_b/pages/cards.py       cards from evaluation predictions and judge verdicts
    qc_core/thumbnails.py  upright 8-bit copies of photos (thumbnails here; Stage-B's photo copies too,
    stage_b.data.photos)

A reviewer's exported decisions become labels through `group-qc decisions`.
"""
