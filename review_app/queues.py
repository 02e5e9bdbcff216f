"""Who decides which card: the assignments the judge drew (stage_b.labels.assign: one reviewer per group, a second on
the overlap), after the lead's reassignments; in a day judged without named reviewers, one queue open to every
reviewer account, where a card another reviewer has open (leased) or has decided is not offered. Cards a person must
review come first in the day's order; blind audits follow in the order of their card ids (a digest), so where a gold
check sits in the file tells nothing."""
from __future__ import annotations

from review_app.project import Card, Day


def assignees(card: Card, moves: dict[str, dict[str, str]]) -> list[str]:
    """The reviewers of a card now: the judge's names, each replaced by who the lead moved it to."""
    moved = moves.get(card.id, {})
    return list(dict.fromkeys(moved.get(name, name) for name in card.assigned))


def may_decide(day: Day, card: Card, name: str, role: str, moves) -> bool:
    """A reviewer decides only their own queue's cards (any card of an open day); a lead any card (a second person
    on an escape); the owner none."""
    if role == "lead":
        return True
    if role != "reviewer":
        return False
    return day.open_queue or name in assignees(card, moves)


def may_see(day: Day, card: Card, name: str, role: str, moves) -> bool:
    return role in ("lead", "owner") or may_decide(day, card, name, role, moves)


def ordered(cards) -> list[Card]:
    cards = list(cards)
    return sorted([c for c in cards if not c.blind], key=lambda c: c.order) + \
        sorted([c for c in cards if c.blind], key=lambda c: c.id)


def queue(day: Day, name: str, role: str, moves, decided_by: dict[str, set[str]], leased_to: dict[str, str]
          ) -> list[Card]:
    """The cards of `name`'s queue in order (module doc). `decided_by`: {card: the reviewer names who decided it};
    `leased_to`: {card: the name holding its lease}. A lead's or owner's view of a reviewer's queue passes that
    reviewer's name and role."""
    out = []
    for card in day.cards.values():
        if not may_decide(day, card, name, role, moves):
            continue
        if day.open_queue and role == "reviewer" and name not in decided_by.get(card.id, set()):
            if decided_by.get(card.id) or leased_to.get(card.id, name) != name:
                continue   # another reviewer decided it or has it open
        out.append(card)
    return ordered(out)


def reviewers_of(day: Day, moves) -> list[str]:
    """Every reviewer name with a queue in the day (the judge's and the lead's)."""
    return sorted({n for c in day.cards.values() for n in assignees(c, moves)})
