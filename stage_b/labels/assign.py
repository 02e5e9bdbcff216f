"""Who decides each group a person must see: the day's review split among named reviewers, with an overlap that two
decide blind to each other (what stage_b.labels.agreement measures). Pure (hashlib).

A judged group on route review or audit (stage_b.rules.routes) gets `assigned_to`: one reviewer, drawn uniformly by the
SHA-256 of the seed, mission and group id; with probability `overlap_share` a second one, drawn the same way among the
others. The draw depends on nothing the model or a reviewer sees (it uses its own salt, independent of the audit
draw), so the overlap is a simple random sample of the groups sent to people, and the same seed assigns the same
reviewers on a rerun or a resume. Each reviewer's page queue holds the groups assigned to them; neither sees the
other's decision (each decides in their own browser, and the import pairs them).
"""
from __future__ import annotations

from qc_core.errors import UserError
from qc_core.names import ReviewerNameError, name_skeleton, reviewer_name, shown
from qc_core.stable_hash import unit_draw
from stage_b.contract.bounds import in_range

DEFAULT_OVERLAP_SHARE = 0.1


class AssignError(UserError):
    """A reviewers or overlap setting that cannot be used (names the value)."""


def check_reviewers(value, what: str = "--reviewers") -> list[str]:
    """`a,b,c` -> ["a", "b", "c"]: names by qc_core.names' rule (normalised: `王　工` is `王 工`), none twice."""
    if value is None or value == "":
        return []
    names = []
    for raw in str(value).split(","):
        try:
            names.append(reviewer_name(raw))
        except ReviewerNameError as exc:
            raise AssignError(f"{what} {value!r}: {shown(raw.strip())!r} is not a reviewer's name ({exc}); give "
                              f"names separated by commas, e.g. 王工,李工") from None
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise AssignError(f"{what} {value!r} names {', '.join(twice)} twice; give each reviewer once")
    looks: dict[str, str] = {}
    for name in names:   # one person, one name: two spellings that look alike would be one reviewer twice
        other = looks.setdefault(name_skeleton(name), name)
        if other != name:
            raise AssignError(f"{what} {value!r}: {shown(name)!r} and {shown(other)!r} look alike (one person, one "
                              f"name); give each reviewer once, by one spelling")
    return names


def check_overlap_share(value, reviewers: list[str], what: str = "--overlap_share") -> float:
    """A share from 0 (no group decided twice) to 1 (every group by two reviewers); two reviewers at least when > 0."""
    share = in_range(value, what, 0.0, 1.0, "a share from 0 to 1, e.g. 0.1 (a tenth of the groups decided by two "
                                            "reviewers)", AssignError)
    if share > 0 and len(reviewers) < 2:
        raise AssignError(f"{what} {share:g} needs two reviewers at least (a,b); "
                          f"{'one is' if reviewers else 'none is'} named")
    return share


def _draw(seed: int, salt: str, mission: str, group_id: str) -> float:
    return unit_draw(f"assign:{salt}", seed, mission, group_id)


def assignees(reviewers: list[str], overlap_share: float, seed: int, mission: str, group_id: str) -> list[str]:
    """The reviewers of one group a person must see (module doc); [] without named reviewers."""
    if not reviewers:
        return []
    first = reviewers[int(_draw(seed, "first", mission, group_id) * len(reviewers))]
    if len(reviewers) < 2 or _draw(seed, "overlap", mission, group_id) >= overlap_share:
        return [first]
    others = [r for r in reviewers if r != first]
    return [first, others[int(_draw(seed, "second", mission, group_id) * len(others))]]
