"""Decisions in the database: each one stored once, in one transaction with every check it depends on.

- A decision arrives with an id the page made. The same id with the same content is the same decision: the stored
  answer comes back and nothing is added (a resend after a lost answer, a reload, a server restart). The same id with
  other content is refused (422), naming the id.
- Versions are per card and account: `base` is the version of this account's decision on the card the page last saw
  (0 for none). A decision whose base is not the stored version is refused with 409 and the stored decision (two
  tabs of one account); two reviewers of an overlap never conflict (each has their own version). The update is a
  compare-and-set on the version, so two servers on one PostgreSQL database cannot both win either.
- In a day judged without named reviewers (one queue open to every reviewer) a reviewer's decision takes the card's
  lease in the same transaction and is refused while another reviewer holds it or has decided the card: two people
  decide one card only where the draw asked for an overlap. A lease is taken when a page opens a card and lasts
  LEASE_SECONDS unless renewed; an expired one is anybody's.
- An adjudication (a lead settling a conflict, with a reason) is an event of its own kind, versioned per card.
- Every event is kept (decision_events), in order: the decisions log's lines and each decision's history are made
  from them (review_app.labels_sync).
"""
from __future__ import annotations

from dataclasses import dataclass

from qc_core.jsonl import record_digest
from review_app.project import Card
from review_app.store import Account, Store, now, now_iso

LEASE_SECONDS = 300
MARK_CHUNK = 200
DECISION = "decision"
ADJUDICATION = "adjudication"


@dataclass(frozen=True)
class Outcome:
    """What the API answers: an HTTP status and its JSON body."""
    status: int
    body: dict


def _stored(ev) -> dict:
    return {"id": ev.id, "day": ev.day, "card": ev.card, "decision": ev.decision, "note": ev.note,
            "version": int(ev.version), "decided_at": ev.decided_at, "kind": ev.kind,
            **({"reason": ev.reason} if ev.reason is not None else {})}


def _same(ev, account: Account, card: Card, kind: str, decision: str, note: str, reason) -> bool:
    return (int(ev.account_id), ev.day, ev.card, ev.kind, ev.decision, ev.note, ev.reason) == \
        (account.id, card.day, card.id, kind, decision, note, reason)


def record(store: Store, *, event_id: str, account: Account, card: Card, decision: str, note: str, base: int,
           on_screen_ms: int | None = None, exclusive: bool = False, kind: str = DECISION,
           reason: str | None = None) -> Outcome:
    """Stores one decision or adjudication (module doc). `exclusive`: the card is in an open queue and this is a
    reviewer's decision (the lease and the one-decider rule apply)."""
    from sqlalchemy import exc as sa_exc
    try:
        with store.write() as conn:
            ev = store.execute(conn, "SELECT * FROM decision_events WHERE id = :id", id=event_id).first()
            if ev is not None:
                if _same(ev, account, card, kind, decision, note, reason):
                    return Outcome(200, {**_stored(ev), "replayed": True})
                return Outcome(422, {"error": f"decision id {event_id} was already used for another decision "
                                              f"({ev.decision} on card {ev.card}); a page makes a new id for each "
                                              f"decision: reload the page"})
            if exclusive:
                blocked = _take_lease(store, conn, card, account)
                if blocked:
                    return blocked
            current = _current(store, conn, card, account, kind)
            if base != current[0]:
                # a resend whose first copy committed while this one was checking (PostgreSQL reads each statement
                # at its own moment): the same decision, not a stale one
                ev = store.execute(conn, "SELECT * FROM decision_events WHERE id = :id", id=event_id).first()
                if ev is not None and _same(ev, account, card, kind, decision, note, reason):
                    return Outcome(200, {**_stored(ev), "replayed": True})
                return Outcome(409, {"error": "this card's decision was changed in another tab or window since this "
                                              "page loaded it: the page now shows the stored decision",
                                     "version": current[0], "decision": current[1], "note": current[2]})
            version = base + 1
            at = now_iso()
            store.execute(conn, "INSERT INTO decision_events (id, account_id, day, card, mission, group_id, kind, "
                                "decision, note, reason, version, decided_at, on_screen_ms, source_file, line_sha256) "
                                "VALUES (:id, :a, :d, :c, :m, :g, :k, :dec, :note, :r, :v, :at, :ms, :src, :line)",
                          id=event_id, a=account.id, d=card.day, c=card.id, m=card.mission, g=card.group_id, k=kind,
                          dec=decision, note=note, r=reason, v=version, at=at, ms=on_screen_ms,
                          src=str(card.source), line=record_digest(card.line))
            if kind == DECISION:
                if base == 0:
                    store.execute(conn, "INSERT INTO decisions (day, card, account_id, version, decision, note, "
                                        "event_id) VALUES (:d, :c, :a, 1, :dec, :note, :id)",
                                  d=card.day, c=card.id, a=account.id, dec=decision, note=note, id=event_id)
                else:
                    changed = store.execute(conn, "UPDATE decisions SET version = :v, decision = :dec, note = :note, "
                                                  "event_id = :id WHERE day = :d AND card = :c AND account_id = :a "
                                                  "AND version = :base", v=version, dec=decision, note=note,
                                            id=event_id, d=card.day, c=card.id, a=account.id, base=base).rowcount
                    if changed != 1:
                        raise _Conflict()
            stored = {"id": event_id, "day": card.day, "card": card.id, "decision": decision, "note": note,
                      "version": version, "decided_at": at, "kind": kind, **({"reason": reason} if reason else {})}
    except (sa_exc.IntegrityError, _Conflict):
        # another request won a race for this id or this version: say what is stored now
        return _after_race(store, event_id, account, card, kind, decision, note, reason)
    return Outcome(201, stored)


class _Conflict(Exception):
    pass


def _after_race(store, event_id, account, card, kind, decision, note, reason) -> Outcome:
    with store.read() as conn:
        ev = store.execute(conn, "SELECT * FROM decision_events WHERE id = :id", id=event_id).first()
        current = _current(store, conn, card, account, kind)
    if ev is not None:
        if _same(ev, account, card, kind, decision, note, reason):
            return Outcome(200, {**_stored(ev), "replayed": True})
        return Outcome(422, {"error": f"decision id {event_id} was already used for another decision: reload the page"})
    return Outcome(409, {"error": "this card's decision was changed in another tab or window at the same moment: the "
                                  "page now shows the stored decision",
                         "version": current[0], "decision": current[1], "note": current[2]})


def _current(store: Store, conn, card: Card, account: Account, kind: str) -> tuple[int, str | None, str]:
    """(version, decision, note) of this account's decision on the card (0, None, "" for none); for an adjudication,
    the card's latest adjudication by anyone."""
    if kind == ADJUDICATION:
        row = store.execute(conn, "SELECT version, decision, note FROM decision_events WHERE day = :d AND card = :c "
                                  "AND kind = 'adjudication' ORDER BY version DESC LIMIT 1", d=card.day,
                            c=card.id).first()
    else:
        row = store.execute(conn, "SELECT version, decision, note FROM decisions WHERE day = :d AND card = :c AND "
                                  "account_id = :a", d=card.day, c=card.id, a=account.id).first()
    return (int(row.version), row.decision, row.note) if row else (0, None, "")


def _take_lease(store: Store, conn, card: Card, account: Account) -> Outcome | None:
    """Within a write transaction: the card's lease for `account`, or the 409 saying who holds or decided it."""
    holder = lease(store, card, account, conn=conn)
    if holder is not None:
        return Outcome(409, {"error": f"{holder['name']} has this card open until {holder['until']}: the page moves on "
                                      f"to the next card", "leased_to": holder["name"]})
    other = store.execute(conn, "SELECT a.name FROM decisions d JOIN accounts a ON a.id = d.account_id WHERE d.day = "
                                ":d AND d.card = :c AND d.account_id <> :me AND a.role = 'reviewer'",
                          d=card.day, c=card.id, me=account.id).first()
    if other is not None:
        return Outcome(409, {"error": f"{other.name} has decided this card already (one reviewer per card in this "
                                      f"day's shared queue)", "decided_by": other.name})
    return None


def lease(store: Store, card: Card, account: Account, seconds: float = LEASE_SECONDS, conn=None) -> dict | None:
    """Takes or renews the card's lease for `account`; returns None when it holds it, else {name, until} of the
    holder. Atomic: an upsert that only takes an expired lease or renews one's own."""
    if conn is None:
        with store.write() as c:
            return lease(store, card, account, seconds, c)
    t = now()
    store.execute(conn, "INSERT INTO leases (day, card, account_id, until_at) VALUES (:d, :c, :a, :u) "
                        "ON CONFLICT (day, card) DO UPDATE SET account_id = :a, until_at = :u "
                        "WHERE leases.until_at < :now OR leases.account_id = :a",
                  d=card.day, c=card.id, a=account.id, u=t + seconds, now=t)
    row = store.execute(conn, "SELECT l.account_id, l.until_at, a.name FROM leases l JOIN accounts a ON a.id = "
                              "l.account_id WHERE l.day = :d AND l.card = :c", d=card.day, c=card.id).first()
    if row is None or int(row.account_id) == account.id:
        return None
    from datetime import datetime, timezone
    until = datetime.fromtimestamp(float(row.until_at), timezone.utc)
    return {"name": row.name, "until": until.strftime("%H:%M:%S UTC")}


def leases_of(store: Store, day: str) -> dict[str, int]:
    """{card: account id} of the day's live leases."""
    with store.read() as conn:
        rows = store.execute(conn, "SELECT card, account_id FROM leases WHERE day = :d AND until_at >= :now",
                             d=day, now=now()).all()
    return {r.card: int(r.account_id) for r in rows}


def decisions_of_day(store: Store, day: str) -> list[dict]:
    """Every account's current decision on the day's cards: {card, account, name, role, version, decision, note}."""
    with store.read() as conn:
        rows = store.execute(conn, "SELECT d.card, d.account_id, a.name, a.role, d.version, d.decision, d.note FROM "
                                   "decisions d JOIN accounts a ON a.id = d.account_id WHERE d.day = :d", d=day).all()
    return [{"card": r.card, "account": int(r.account_id), "name": r.name, "role": r.role, "version": int(r.version),
             "decision": r.decision, "note": r.note} for r in rows]


def adjudications_of_day(store: Store, day: str) -> dict[str, dict]:
    """{card: its latest adjudication} of the day."""
    with store.read() as conn:
        rows = store.execute(conn, "SELECT e.*, a.name FROM decision_events e JOIN accounts a ON a.id = e.account_id "
                                   "WHERE e.day = :d AND e.kind = 'adjudication' ORDER BY e.version", d=day).all()
    return {r.card: {**_stored(r), "by": r.name} for r in rows}


# -- reassignments ---------------------------------------------------------------------------------------------------
def reassign(store: Store, day: str, cards: list[str], from_name: str, to_name: str, by: Account) -> None:
    """Moves `cards` of `from_name`'s queue to `to_name` (the lead, when someone is ill); a card moved before is moved
    on from its current holder."""
    with store.write() as conn:
        for card in cards:
            row = store.execute(conn, "SELECT from_name FROM reassignments WHERE day = :d AND card = :c AND "
                                      "to_name = :f", d=day, c=card, f=from_name).first()
            original = row.from_name if row else from_name
            store.execute(conn, "DELETE FROM reassignments WHERE day = :d AND card = :c AND from_name = :o",
                          d=day, c=card, o=original)
            if original != to_name:
                store.execute(conn, "INSERT INTO reassignments (day, card, from_name, to_name, by_account, at) VALUES "
                                    "(:d, :c, :o, :t, :b, :at)", d=day, c=card, o=original, t=to_name, b=by.id,
                              at=now_iso())


def moves_of(store: Store, day: str) -> dict[str, dict[str, str]]:
    """{card: {the reviewer the judge named: who decides it instead}} for the day."""
    with store.read() as conn:
        rows = store.execute(conn, "SELECT card, from_name, to_name FROM reassignments WHERE day = :d", d=day).all()
    out: dict[str, dict[str, str]] = {}
    for r in rows:
        out.setdefault(r.card, {})[r.from_name] = r.to_name
    return out


# -- the owner's acceptances -------------------------------------------------------------------------------------------
def accept(store: Store, point: str, point_sha256: str, words: str, by: Account) -> dict:
    at = now_iso()
    with store.write() as conn:
        store.execute(conn, "INSERT INTO acceptances (point, point_sha256, words, account_id, at) VALUES "
                            "(:p, :s, :w, :a, :at)", p=point, s=point_sha256, w=words, a=by.id, at=at)
    return {"point": point, "sha256": point_sha256, "words": words, "by": by.name, "at": at}


def acceptances(store: Store) -> list[dict]:
    with store.read() as conn:
        rows = store.execute(conn, "SELECT c.*, a.name FROM acceptances c JOIN accounts a ON a.id = c.account_id "
                                   "ORDER BY c.seq").all()
    return [{"point": r.point, "sha256": r.point_sha256, "words": r.words, "by": r.name, "at": r.at} for r in rows]


# -- what the labels sync reads ----------------------------------------------------------------------------------------
def unsynced(store: Store, limit: int = 2000) -> list:
    with store.read() as conn:
        return store.execute(conn, "SELECT e.*, a.name FROM decision_events e JOIN accounts a ON a.id = e.account_id "
                                   "WHERE e.synced = 0 ORDER BY e.seq LIMIT :n", n=limit).all()


def histories(store: Store, days: set[str]) -> dict[tuple, list]:
    """{(day, card, account id): its decision events in version order} for the given days (one query)."""
    out: dict[tuple, list] = {}
    with store.read() as conn:
        for day in sorted(days):
            rows = store.execute(conn, "SELECT e.*, a.name FROM decision_events e JOIN accounts a ON "
                                       "a.id = e.account_id WHERE e.day = :d AND e.kind = 'decision' "
                                       "ORDER BY e.version", d=day).all()
            for r in rows:
                out.setdefault((r.day, r.card, int(r.account_id)), []).append(r)
    return out


def mark_synced(store: Store, ids: list[str]) -> None:
    from sqlalchemy import text
    for k in range(0, len(ids), MARK_CHUNK):   # short transactions: a reviewer's write never waits long on this one
        with store.write() as conn:
            conn.execute(text("UPDATE decision_events SET synced = 1, sync_problem = NULL WHERE id = :id"),
                         [{"id": event_id} for event_id in ids[k:k + MARK_CHUNK]])


def mark_problem(store: Store, event_id: str, why: str) -> None:
    with store.write() as conn:
        store.execute(conn, "UPDATE decision_events SET sync_problem = :w WHERE id = :id", w=why[:2000], id=event_id)


def sync_state(store: Store) -> dict:
    with store.read() as conn:
        waiting = store.execute(conn, "SELECT count(*) FROM decision_events WHERE synced = 0").scalar()
        problems = store.execute(conn, "SELECT id, day, group_id, sync_problem FROM decision_events WHERE synced = 0 "
                                       "AND sync_problem IS NOT NULL ORDER BY seq LIMIT 50").all()
        stored = store.execute(conn, "SELECT count(*) FROM decision_events").scalar()
    return {"stored": int(stored), "waiting": int(waiting),
            "problems": [{"id": p.id, "day": p.day, "group_id": p.group_id, "why": p.sync_problem} for p in problems]}
