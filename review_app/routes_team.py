"""The lead's and the owner's work: the reviewer table, queues and their reassignment, conflicts settled, a search,
whether the labels hold every decision; the promises, the monitor, the workload and the acceptance of a weaker
promise."""
from __future__ import annotations

from typing import Literal

from fastapi import Depends, FastAPI
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel, Field

from review_app import decision_store, queues, views
from review_app.access import Context, Session, card_of, changing_as, day_of, decided_maps, refuse, role
from review_app.routes_review import ID
from review_app.store import now_iso
from review_app.web import MAX_NOTE
from stage_b.rules import acceptances as recorded
from stage_b.rules.point_identity import PointKeys
from stage_b.rules.replacement import ReplacementError


class AdjudicationIn(BaseModel):
    id: str = ID
    day: str = Field(max_length=1000)
    card: str = Field(max_length=100)
    decision: Literal["通过", "不通过"]
    reason: str = Field(min_length=8, max_length=MAX_NOTE)
    base: int = Field(ge=0, le=10**9)


class ReassignIn(BaseModel):
    day: str = Field(max_length=1000)
    from_reviewer: str = Field(alias="from", max_length=400)
    to: str = Field(max_length=400)


class AcceptIn(BaseModel):
    point: str = Field(max_length=1000)
    words: str = Field(min_length=8, max_length=MAX_NOTE)


def lead_routes(app: FastAPI, ctx: Context) -> None:
    @app.get("/api/reviewers")
    def reviewers(s: Session = Depends(role("lead", "owner"))):
        view = views.reviewers_view(ctx.project)
        return {**view, "sync": {**decision_store.sync_state(ctx.store), **ctx.writer.state}}

    @app.get("/api/queues")
    def day_queues(day: str, s: Session = Depends(role("lead", "owner"))):
        d = day_of(ctx, day)
        moves = decision_store.moves_of(ctx.store, d.id)
        rows, decided_by, leased = decided_maps(ctx, d)
        have = {a.name: a for a in ctx.store.accounts()}
        out = []
        for name in (queues.reviewers_of(d, moves) or sorted(n for n, a in have.items() if a.role == "reviewer")):
            cards = queues.queue(d, name, "reviewer", moves, decided_by, leased)
            done = {r["card"] for r in rows if r["name"] == name}
            out.append({"reviewer": name, "account": name in have and not have[name].disabled,
                        "cards": len(cards), "decided": sum(c.id in done for c in cards)})
        return {"day": d.id, "open_queue": d.open_queue, "queues": out}

    @app.post("/api/reassign")
    def reassign(body: ReassignIn, s: Session = Depends(changing_as("lead"))):
        d = day_of(ctx, body.day)
        target = ctx.store.account_by_name(body.to)
        if target is None or target.role != "reviewer" or target.disabled:
            refuse(400, f"{body.to!r} is not a reviewer account: group-qc users add NAME --role reviewer makes one")
        if body.to == body.from_reviewer:
            refuse(400, "a queue is reassigned to another reviewer")
        moves = decision_store.moves_of(ctx.store, d.id)
        rows, _, _ = decided_maps(ctx, d)
        done = {r["card"] for r in rows if r["name"] == body.from_reviewer}
        moving, kept = [], 0
        for c in d.cards.values():
            names = queues.assignees(c, moves)
            if body.from_reviewer not in names or c.id in done:
                continue
            if body.to in names:   # an overlap is two people: it stays with its first reviewer
                kept += 1
                continue
            moving.append(c.id)
        decision_store.reassign(ctx.store, d.id, moving, body.from_reviewer, body.to, s.account)
        return {"moved": len(moving), "kept": kept,
                "why_kept": f"{kept} card(s) stay: {body.to} decides them already (an overlap needs two people)"
                if kept else None}

    @app.post("/api/adjudications")
    def adjudicate(body: AdjudicationIn, s: Session = Depends(changing_as("lead"))):
        d, card = card_of(ctx, s, body.day, body.card)
        rows, _, _ = decided_maps(ctx, d)
        deciders = {r["name"]: r["decision"] for r in rows if r["card"] == card.id and r["role"] == "reviewer"}
        if s.account.name in deciders:
            refuse(403, "you decided this card as a reviewer: a conflict is settled by a second person")
        definite = {x for x in deciders.values() if x in ("通过", "不通过")}
        if len(definite) < 2 and not views.is_conflict(ctx.project, card.mission, card.group_id):
            refuse(409, "this card's reviewers do not disagree: there is no conflict to settle")
        outcome = decision_store.record(ctx.store, event_id=body.id, account=s.account, card=card,
                                        decision=body.decision, note="", base=body.base,
                                        kind=decision_store.ADJUDICATION, reason=body.reason.strip())
        if outcome.status in (200, 201):
            ctx.writer.poke()
        return JSONResponse(outcome.body, outcome.status)

    @app.get("/api/search")
    def search(group: str, s: Session = Depends(role("lead", "owner"))):
        if not group.strip() or len(group) > 200:
            refuse(400, "give part of a group id (1 to 200 characters)")
        return {"cards": views.search(ctx.project, group.strip())}

    @app.get("/api/sync")
    def sync(s: Session = Depends(role("lead", "owner"))):
        return {**decision_store.sync_state(ctx.store), **ctx.writer.state}



def owner_routes(app: FastAPI, ctx: Context) -> None:
    @app.get("/api/promises")
    def promises(s: Session = Depends(role("owner", "lead"))):
        return {"points": views.promises_view(ctx.project, decision_store.acceptances(ctx.store))}

    @app.get("/api/monitor")
    def monitor(s: Session = Depends(role("owner", "lead"))):
        return {"monitors": views.monitor_view(ctx.project)}

    @app.get("/api/monitor/plot")
    def monitor_plot(file: str, s: Session = Depends(role("owner", "lead"))):
        known = {m["plot"]: m for m in views.monitor_view(ctx.project) if m.get("plot")}
        if file not in known:
            refuse(404, f"no monitor plot {file!r} in this project")
        return FileResponse(ctx.project.root / file, media_type="image/png")

    @app.get("/api/workload")
    def workload(day: str, s: Session = Depends(role("owner", "lead"))):
        view = views.workload_view(ctx.project, day_of(ctx, day).id, ctx.settings.cost_per_hour)
        return view

    @app.post("/api/acceptances")
    def accept(body: AcceptIn, s: Session = Depends(changing_as("owner"))):
        point = next((p for p in views.promises_view(ctx.project, []) if p["point"] == body.point), None)
        if point is None or "error" in point:
            refuse(404, f"no readable operating point {body.point!r} in this project")
        assert point is not None
        if not point["weaker"]:
            refuse(409, f"{body.point} promises nothing weaker than the point it replaces: nothing to accept")
        at = now_iso()
        try:
            keys = PointKeys(point["identity"], point["sha256"])
            line = recorded.record(ctx.project.root / body.point, keys, body.words, s.account.name, at)
        except (ReplacementError, recorded.AcceptancesError) as exc:
            refuse(400, str(exc))
        decision_store.accept(ctx.store, body.point, point["sha256"], line["words"], s.account)
        return {**line, "missions": sorted(point["weaker"])}
