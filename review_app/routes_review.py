"""A reviewer's work: the days, a queue, a card's lease, a decision, the model's answer once decided, a photo."""
from __future__ import annotations

from typing import Literal

from fastapi import Depends, FastAPI
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, Field

from review_app import decision_store, queues
from review_app.access import Context, Session, card_of, changing_as, day_of, decided_maps, refuse, signed_in
from review_app.cards import answer, card_view
from review_app.web import MAX_NOTE

IMAGE_TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".webp": "image/webp",
               ".bmp": "image/bmp", ".gif": "image/gif", ".tif": "image/tiff", ".tiff": "image/tiff"}
ID = Field(min_length=8, max_length=100, pattern=r"^[A-Za-z0-9_-]+$")


class DecisionIn(BaseModel):
    id: str = ID
    day: str = Field(max_length=1000)
    card: str = Field(max_length=100)
    decision: Literal["通过", "不通过", "unsure"]
    note: str = Field(default="", max_length=MAX_NOTE)
    base: int = Field(ge=0, le=10**9)
    on_screen_ms: int | None = Field(default=None, ge=0, le=10**10)


class LeaseIn(BaseModel):
    day: str = Field(max_length=1000)
    card: str = Field(max_length=100)


def review_routes(app: FastAPI, ctx: Context) -> None:
    @app.get("/api/days")
    def days(s: Session = Depends(signed_in)):
        out = []
        for day_id in ctx.project.day_folders():
            day = ctx.project.day(day_id)
            if day is None:
                continue
            moves = decision_store.moves_of(ctx.store, day.id)
            rows, decided_by, leased = decided_maps(ctx, day)
            if s.account.role == "reviewer":
                mine = queues.queue(day, s.account.name, "reviewer", moves, decided_by, leased)
                if not mine and not day.open_queue:
                    continue
                done = {r["card"] for r in rows if r["account"] == s.account.id}
                out.append({"day": day_id, "cards": len(mine), "decided": sum(c.id in done for c in mine),
                            "open_queue": day.open_queue})
            else:
                out.append({"day": day_id, "cards": len(day.cards), "decided": len({r["card"] for r in rows}),
                            "open_queue": day.open_queue, "reviewers": queues.reviewers_of(day, moves),
                            "problems": day.problems[:20]})
        return {"days": out}

    @app.get("/api/queue")
    def queue(day: str, reviewer: str | None = None, s: Session = Depends(signed_in)):
        d = day_of(ctx, day)
        name, who_role = s.account.name, s.account.role
        if reviewer is not None and reviewer != name:
            if who_role not in ("lead", "owner"):
                refuse(403, "only a lead or the owner sees another reviewer's queue")
            name, who_role = reviewer, "reviewer"
        elif who_role in ("lead", "owner"):
            who_role = "lead"   # every card of the day
        moves = decision_store.moves_of(ctx.store, d.id)
        rows, decided_by, leased = decided_maps(ctx, d)
        mine = {r["card"]: r for r in rows if r["name"] == name}
        cards = queues.queue(d, name, who_role, moves, decided_by, leased)
        return {"day": d.id, "reviewer": name, "open_queue": d.open_queue, "lease_seconds": ctx.settings.lease_seconds,
                "cards": [card_view(c, mine.get(c.id), queues.assignees(c, moves),
                                    sorted(decided_by.get(c.id, ())) if who_role != "reviewer" else None)
                          for c in cards]}

    @app.post("/api/lease")
    def lease(body: LeaseIn, s: Session = Depends(changing_as("reviewer"))):
        d, card = card_of(ctx, s, body.day, body.card, decide=True)
        if not d.open_queue:
            return {"lease": None}   # a queue of one's own needs none
        holder = decision_store.lease(ctx.store, card, s.account, ctx.settings.lease_seconds)
        if holder is not None:
            refuse(409, f"{holder['name']} has this card open until {holder['until']}", leased_to=holder["name"])
        return {"lease": ctx.settings.lease_seconds}

    @app.post("/api/decisions")
    def decide(body: DecisionIn, s: Session = Depends(changing_as("reviewer", "lead"))):
        d, card = card_of(ctx, s, body.day, body.card, decide=True)
        outcome = decision_store.record(ctx.store, event_id=body.id, account=s.account, card=card,
                                        decision=body.decision, note=body.note.strip(), base=body.base,
                                        on_screen_ms=body.on_screen_ms,
                                        exclusive=d.open_queue and s.account.role == "reviewer")
        if outcome.status in (200, 201):
            ctx.writer.poke()
        return JSONResponse(outcome.body, outcome.status)

    @app.get("/api/answer")
    def model_answer(day: str, card: str, s: Session = Depends(signed_in)):
        d, c = card_of(ctx, s, day, card)
        rows, _, _ = decided_maps(ctx, d)
        if not any(r["card"] == c.id and r["account"] == s.account.id for r in rows) and not \
                (s.account.role in ("lead", "owner") and not c.blind):
            refuse(403, "the model's answer on a blind audit shows once your decision on it is saved")
        return answer(c)

    @app.get("/api/photo")
    def photo(day: str, card: str, n: int, s: Session = Depends(signed_in)):
        _, c = card_of(ctx, s, day, card)
        path = ctx.project.photo(c, n)
        if path is None or path.suffix.lower() not in IMAGE_TYPES:
            refuse(404, f"no photo {n} of card {card!r} that this app may show (outside the day's photo folders, "
                         f"or missing)")
        assert path is not None
        return FileResponse(path, media_type=IMAGE_TYPES[path.suffix.lower()],
                            headers={"Cache-Control": "private, max-age=3600"})
