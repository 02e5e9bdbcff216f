"""The sentences a QC owner signs, made from an operating point entry's own counts (never from its stored words): the
miss-rate promise, the overkill promise, the family-wise statement, and what a rule that decides nothing is called."""
from __future__ import annotations

from stage_b.contract.numbers import pct
from stage_b.stats.certify import groups_needed

NO_AUTOMATION = "no automation"   # what a certified rule that decides nothing without review is called
NO_BOUND = 0.9995   # an escape bound this high reads "100%": it bounds nothing an owner could sign


def automates_nothing(entry: dict) -> bool:
    """A certified rule that decided none of its validation groups without review: not called certified."""
    return bool(entry.get("certified")) and entry.get("validation_auto_decided") == 0


def promise_text(entry: dict) -> str:
    """The mission's promise in the one sentence a QC owner signs, the same words on every page (report.md, the
    operating point, the judge's summary and verdict lines, the review and monitor pages): both numbers of its one
    rule, the miss rate signed and the escape rate the monitor holds live work to, then what it rests on (`evidence`:
    validation, or held-out: validation and reviewed work orders). A certified rule that passes none of its groups
    without review is no automation, and says so instead of "certified"."""
    target, confidence = entry["target_miss_rate"], entry["confidence"]
    evidence = entry.get("evidence", "validation")
    if entry["certified"]:
        counted = (f"{entry['misses']} missed of {entry['n_fail']} defective {evidence} groups; miss-rate upper bound "
                   f"{pct(entry['miss_rate_upper'])}")
        if automates_nothing(entry):
            return (f"{NO_AUTOMATION}: people decide every group (the rule certified for a miss rate <= {pct(target)} "
                    f"with {pct(confidence)} confidence decides none of the {entry['n']} {evidence} groups without "
                    f"review; {counted})")
        escape = entry.get("escape") or {}
        # a rule that passes nothing without a person has no escape rate: "at most 100%" would promise nothing
        upper = escape.get("upper")
        passes = ("; it passes no work order without a person (what it decides without review, it fails)"
                  if escape.get("auto_passed") == 0 else
                  f"; of the work orders passed without a person no defective share below 100% can be promised yet "
                  f"({escape.get('escapes')} defective of {escape.get('auto_passed')} passed on {evidence})"
                  if upper is not None and upper >= NO_BOUND else
                  f"; of the work orders passed without a person at most {pct(upper)} are defective"
                  if upper is not None else "")
        return (f"of defective work orders at most {pct(target)} pass without a person" + passes
                + f"; {pct(confidence)} sure ({counted})")
    needed = entry.get("fail_groups_needed")
    return (f"cannot promise a miss rate <= {pct(target)} with {pct(confidence)} confidence: "
            f"{entry['n_fail']} defective {evidence} group{'s' if entry['n_fail'] != 1 else ''}, "
            + (f"{needed} needed" if needed is not None else
               "no number is enough for a 0% target" if target <= 0 else "more than 10^9 would be needed"))


def overkill_promise_text(entry: dict) -> str | None:
    """The auto-fail side's promise in one sentence, when a target overkill rate was given."""
    target = entry.get("target_overkill_rate")
    if target is None:
        return None
    confidence, evidence = entry["confidence"], entry.get("evidence", "validation")
    if entry["overkill_certified"]:
        return (f"overkill rate of auto-failed groups <= {pct(target)} with {pct(confidence)} confidence "
                f"({entry['auto_overkills']} of {entry['n_pass']} good {evidence} groups auto-failed; upper bound "
                f"{pct(entry['overkill_rate_upper'])})")
    needed = entry.get("pass_groups_needed")
    return (f"cannot promise an overkill rate <= {pct(target)} with {pct(confidence)} confidence "
            f"({entry['n_pass']} good {evidence} groups, "
            + (f"{needed} needed" if needed is not None else
               "no number is enough for a 0% target" if target <= 0 else "more than 10^9 would be needed")
            + "): nothing is auto-failed, every group above the threshold goes to review")


JOINT_STATEMENT_AT = 0.5   # a joint confidence below this says nothing a QC owner could sign


def family_text(fam: dict, target_miss_rate: float | None = None) -> str:
    """The family statement in one sentence (report.md, monitor page): the promises' joint confidence (Bonferroni)
    when it is a statement (at least JOINT_STATEMENT_AT), else that there is none (without the confidence that says
    nothing), and what --family_wise would take
    (its per-claim confidence and, at `target_miss_rate`, the defective groups per mission without a miss)."""
    n = fam.get("certified_claims", fam["claims"])
    if not n:
        return "no promise is certified"
    joint = fam.get("certified_claims_hold_together", fam.get("family_confidence"))
    how = (f"each certified at {pct(fam['per_claim_confidence'])} (--family_wise: the {fam['claims']} claims share "
           f"{pct(1 - (1 - fam['per_claim_confidence']) * fam['claims'])} by Bonferroni)" if fam["family_wise"] else
           f"each at {pct(fam['per_claim_confidence'])}")
    if joint is not None and joint >= JOINT_STATEMENT_AT:
        return (f"{n} certified promise{'s' if n != 1 else ''} ({how}) hold together with confidence at least "
                f"{pct(joint)} (Bonferroni)")
    per_claim, claims = fam["per_claim_confidence"], max(fam["claims"], 1)
    signed = 1 - (1 - per_claim) * claims if fam["family_wise"] else per_claim   # the confidence the owner asked for
    wanted = per_claim if fam["family_wise"] else 1 - (1 - signed) / claims
    needed = groups_needed(target_miss_rate, wanted) if target_miss_rate else None
    # a joint confidence this low is no sentence to sign ("at least 0%"): say what holds and what would make more hold
    return (f"no joint statement: each of the {n} certified promise{'s' if n != 1 else ''} ({how}) holds on its own, "
            f"not all together. For all to hold together at {pct(signed)}, --family_wise certifies each claim at "
            f"{pct(wanted)}"
            + (f", which at a {pct(target_miss_rate)} miss-rate target needs {needed} defective groups per mission "
               f"without a miss" if needed else ""))
