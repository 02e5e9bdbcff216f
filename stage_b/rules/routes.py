"""Where each judged group goes, and which reviewed groups are a fair sample of a mission's work. Pure (hashlib).

Every verdict the judge writes has a `route`:

- `review`: a person decides it, with the reasons why. `review_scope` says what chose it: `mission` when every group
  of its mission goes to review (the mission is not certified, its promise was withdrawn, it has no threshold, or its
  summaries come from another Stage-A model than the promise was certified on); `group` when the group's own p_fail
  or reply chose it (the review band or margin, a reply outside the two-line contract, an ungrounded reason).
- `audit`: the rule decided it without review, and it was drawn for a blind check: a person decides it without seeing
  the model's verdict, p_fail or reason (review pages hide them until the reviewer has decided).
- `auto`: decided without review, and not drawn.

The audit draw (Poisson sampling, each automatically decided group independently): a group is audited iff
`audit_draw(seed, mission, group_id) < audit_share`, where audit_draw maps the SHA-256 of the seed, mission and group
id to [0, 1). It depends on nothing the model or the reviewer sees, so the audited groups are a simple random sample
of the automatically decided ones, each drawn with probability `audit_share` (recorded on every auto and audit verdict
as `audit_probability`); the same seed draws the same groups on a rerun or a resume.

Fair evidence (what may enter a promise's bound, stage_b.rules.operating_point): a labelled group counts with weight
1 / (its probability of having been reviewed) when that probability did not depend on the group itself:

    no review record (the original labelled data: every group reviewed)          weight 1
    route review, review_scope mission (every group of the mission reviewed)     weight 1
    route audit (drawn with probability a)                                       weight 1 / a
    route review, review_scope group, every group of its band decided (band_census:
    the band is a census of a stratum the rule chose by p_fail or the reply alone)     weight 1
    route review, review_scope group, its band not decided whole; route auto decided by a reviewer anyway;
    a decision from a page or verdict file without routes;
    a label of a reviewer below the agreement bar not confirmed by a second
    (`certifies: false`, stage_b.labels.agreement)                                      not fair: left out of bounds

Groups left out still become training labels; they never count in a bound as if they were random.
"""
from __future__ import annotations

from typing import TypedDict

from qc_core.errors import UserError
from qc_core.stable_hash import unit_draw
from stage_b.contract.bounds import in_range

AUTO, REVIEW, AUDIT = "auto", "review", "audit"
ROUTES = (AUTO, REVIEW, AUDIT)
MISSION, GROUP = "mission", "group"   # review_scope
DEFAULT_AUDIT_SHARE = 0.05


class Route(TypedDict):
    """Where one judged group goes, as its verdict line records it."""
    route: str                        # AUTO, AUDIT or REVIEW
    review_scope: str | None          # MISSION or GROUP for a review: what chose the group
    audit_probability: float | None   # the share it was drawn at (auto and audit); None when sent to review
    why: list[str]                    # the reasons it goes to a person (empty unless reviewed)


class RouteError(UserError):
    """An audit setting or a review record that cannot be used (names the value)."""


def check_audit_share(value, what: str = "--audit_share") -> float:
    """A share from 0 (no audit) to 1 (every automatically decided group audited)."""
    return in_range(value, what, 0.0, 1.0, "a share from 0 (no audit) to 1 (every automatically decided group), e.g. "
                                           "0.05", RouteError)


def audit_draw(seed: int, mission: str, group_id: str) -> float:
    """A number in [0, 1) fixed by the seed, mission and group id (module doc)."""
    return unit_draw(seed, mission, group_id)


def route_of(mission_why: list[str], group_why: list[str], audit_share: float, seed: int, mission: str,
             group_id: str, gold: bool = False) -> Route:
    """{"route", "review_scope", "audit_probability", "why"} of one judged group (module doc). `gold`: a known-answer
    check (stage_b.labels.gold), which looks like the day's blind audits unless its whole mission goes to review."""
    if mission_why or (group_why and not gold):
        return {"route": REVIEW, "review_scope": MISSION if mission_why else GROUP, "audit_probability": None,
                "why": [*mission_why, *group_why]}
    if gold:
        return audit_route(audit_share)
    if audit_share > 0 and audit_draw(seed, mission, group_id) < audit_share:
        return audit_route(audit_share)
    return {"route": AUTO, "review_scope": None, "audit_probability": audit_share, "why": []}


def audit_route(audit_share: float) -> Route:
    """A blind audit's route, as every audited group has it (stage_b.labels.gold's checks take the same)."""
    return {"route": AUDIT, "review_scope": None, "audit_probability": audit_share,
            "why": [f"drawn for a blind audit ({100 * audit_share:.3g}% of the groups decided without review): "
                    f"decide it without the model's answer"]}


def route_of_record(verdict: dict) -> str:
    """A verdict line's route; a line written before routes existed is `review` when it needed review, else `auto`."""
    route = verdict.get("route")
    if route in ROUTES:
        return route
    return REVIEW if verdict.get("needs_review") else AUTO


def evidence_weight(review: dict | None) -> float | None:
    """A labelled group's weight in a promise's bound (module doc), from the `review` record stage_b.labels.decisions
    writes
    on it; None: not a fair sample, left out."""
    if review is None:
        return 1.0
    # a reviewer below the agreement bar, not confirmed (stage_b.labels.agreement)
    if review.get("certifies") is False:
        return None
    route, probability = review.get("route"), review.get("audit_probability")
    if route == REVIEW and review.get("review_scope") == MISSION:
        return 1.0
    if route == REVIEW and review.get("review_scope") == GROUP and review.get("band_census") is True:
        return 1.0   # a stratum chosen by p_fail or the reply alone, decided whole: a census of it
    if route == AUDIT and isinstance(probability, (int, float)) and not isinstance(probability, bool) \
            and 0.0 < probability <= 1.0:
        return 1.0 / probability
    return None


def why_not_fair(review: dict | None) -> str | None:
    """Why a labelled group is left out of bounds, in a few words; None when it counts."""
    if evidence_weight(review) is not None:
        return None
    review = review or {}
    route = review.get("route")
    if review.get("certifies") is False:
        return f"labelled by {review.get('quality') or 'a reviewer below the agreement bar'}, not confirmed by a second"
    if route == REVIEW:
        return ("reviewed because of its own p_fail or reply, and its day's review band was not decided whole"
                if review.get("band") else "reviewed because of its own p_fail or reply")
    if route == AUTO:
        return "decided without review and not audited: a reviewer chose to look at it"
    return "from a page or verdict file without routes: treated as chosen by score"
