"""An operating point that replaces another: the targets it keeps, its promises side by side with the old ones, and
the owner's acceptance of a weaker one. Pure (stdlib).

Certifying again (`group-qc evaluate --replaces OLD/operating_point.json`) keeps the replaced point's
targets (the miss rate and overkill rate per mission, the confidence, the review share, --family_wise) unless a flag
gives another, and says which it took and which changed: the auto-fail rule does not change because a flag was
forgotten. The new file records `replaces`: the old file's path and sha256, and per mission the old and new numbers
side by side (SIDE_BY_SIDE) and, when the new promise is weaker, why (weaker_because).

A promise is weaker when the owner would sign less: a higher target miss rate, a lower confidence, a higher upper
bound on the escape rate of auto-passed groups (what the live audits hold it to) or on the overkill rate, or
auto-fail where nothing auto-failed. A mission that decides nothing without review (not certified, or its rule
automates nothing) promises nothing and is never weaker. A weaker mission decides nothing without review until the
owner accepts it in words: `group-qc judge --accept_weaker WORDS` (judge.sh accept_weaker=), recorded on
each of its verdict lines; without them every group of it goes to review, saying why (the guard fails closed).
"""
from __future__ import annotations


from qc_core.errors import UserError
from qc_core.names import REFUSED_CATEGORIES, shown
from qc_core.paths import resolved
from stage_b.contract.numbers import pct
from stage_b.rules.operating_point import load_operating_point, point_keys
from stage_b.rules.point_identity import point_identity, same_point
from stage_b.rules.promise_texts import automates_nothing

# what the report, the evaluate summary and `replaces` show for each mission, old beside new
SIDE_BY_SIDE = ("certified", "threshold", "threshold_fail", "target_miss_rate", "confidence", "miss_rate_upper",
                "escape_upper", "target_overkill_rate", "overkill_rate_upper", "automation_share")
TOLERANCE = 1e-9   # the same number written twice is not a change
MIN_WORDS = 8
MAX_WORDS = 500   # a reason is a sentence or two, not a file


class ReplacementError(UserError):
    pass


def promises_anything(entry: dict | None) -> bool:
    """Whether a mission entry decides any group without review (certified, and a threshold that passes some)."""
    return bool(entry and entry.get("certified") and entry.get("threshold") is not None
                and not automates_nothing(entry))


def numbers_of(entry: dict | None, confidence: float | None) -> dict:
    """The SIDE_BY_SIDE numbers of one mission entry of operating_point.json (None where it has none)."""
    entry = entry or {}
    return {"certified": bool(entry.get("certified")) and promises_anything(entry),
            "threshold": entry.get("threshold"), "threshold_fail": entry.get("threshold_fail"),
            "target_miss_rate": entry.get("target_miss_rate"),
            "confidence": entry.get("confidence", confidence),
            "miss_rate_upper": entry.get("miss_rate_upper"),
            "escape_upper": (entry.get("escape") or {}).get("upper"),
            "target_overkill_rate": entry.get("target_overkill_rate"),
            "overkill_rate_upper": entry.get("overkill_rate_upper"),
            "automation_share": entry.get("automation_share")}


def _rises(old, new) -> bool:
    return isinstance(old, (int, float)) and isinstance(new, (int, float)) and new > old + TOLERANCE


def weaker_because(old: dict, new: dict) -> list[str]:
    """Why the new promise (numbers_of) is weaker than the old, in words; [] when it is not."""
    if not new["certified"] or not old["certified"]:
        return []   # nothing decided without review now, or nothing promised before: no promise got weaker
    why = []
    if _rises(old["target_miss_rate"], new["target_miss_rate"]):
        why.append(f"target miss rate {pct(old['target_miss_rate'])} -> {pct(new['target_miss_rate'])}")
    if _rises(new["confidence"], old["confidence"]):
        why.append(f"confidence {pct(old['confidence'])} -> {pct(new['confidence'])}")
    if _rises(old["escape_upper"], new["escape_upper"]):
        why.append(f"escape rate of auto-passed groups at most {pct(old['escape_upper'])} -> "
                   f"{pct(new['escape_upper'])}")
    if old["threshold_fail"] is None and new["threshold_fail"] is not None:
        why.append("groups now auto-fail (nothing auto-failed before)")
    elif _rises(old["overkill_rate_upper"], new["overkill_rate_upper"]):
        why.append(f"overkill rate of auto-failed groups at most {pct(old['overkill_rate_upper'])} -> "
                   f"{pct(new['overkill_rate_upper'])}")
    return why


def compare(old_op: dict, new_op: dict, old_path: str, old_sha256: str) -> dict:
    """operating_point.json's `replaces`: the old file named (its path, bytes and identity: what the promise was),
    each mission's numbers side by side, the weaker ones."""
    missions = {}
    for mission, entry in new_op["missions"].items():
        old = numbers_of(old_op.get("missions", {}).get(mission), old_op.get("confidence"))
        new = numbers_of(entry, new_op.get("confidence"))
        missions[mission] = {"old": old, "new": new, "weaker_because": weaker_because(old, new)}
    return {"path": old_path, "sha256": old_sha256, "identity": point_identity(old_op), "missions": missions,
            "weaker": [m for m, e in missions.items() if e["weaker_because"]]}


def recomputed_weaker(op_path, op) -> dict[str, str]:
    """{mission: why its promise is weaker than the one replaced}, worked out again from the file `replaces` names,
    never read from the block's own list (an edited block must not turn a weaker promise into an accepted one). The
    replaced file must exist and be the point the block names (its identity, or its bytes in a block written before
    identities); else ReplacementError: which promise was signed before cannot be told."""
    from pathlib import Path

    replaces = op.extra.get("replaces")
    if not replaces:
        return {}
    if not isinstance(replaces, dict) or not isinstance(replaces.get("path"), str) or not replaces["path"]:
        raise ReplacementError(f"{op_path}: `replaces` does not name the operating point it replaces (a path); "
                               f"recompute it with group-qc evaluate --replaces OLD")
    old_path = resolved(replaces["path"], Path(op_path).parent)   # stored relative to the new file
    if not old_path.is_file():
        raise ReplacementError(f"{op_path} replaces {old_path}, which does not exist: the promise it replaced cannot "
                               f"be compared with this one. Restore that file, or certify again with --replaces "
                               f"naming the operating point in use")
    old = load_operating_point(old_path)
    if not same_point(point_keys(old_path, old), replaces):
        raise ReplacementError(f"{op_path} replaces {old_path}, but that file is no longer the point it replaced (its "
                               f"promise changed since): restore it, or certify again with --replaces naming it")
    weaker = compare(old.to_json(), op.to_json(), replaces["path"], "")["missions"]
    return {m: "; ".join(e["weaker_because"]) for m, e in weaker.items() if e["weaker_because"]}


def weaker_missions(replaces: dict | None) -> dict[str, str]:
    """{mission: why its promise is weaker than the one replaced} from an operating point's `replaces`."""
    if not replaces:
        return {}
    if not isinstance(replaces, dict) or not isinstance(replaces.get("missions"), dict) \
            or not isinstance(replaces.get("weaker"), list):
        raise ReplacementError("`replaces` is not what group-qc evaluate --replaces writes (an object with `missions` "
                               "and `weaker`); recompute the operating point")
    out = {}
    for mission in replaces["weaker"]:
        entry = replaces["missions"].get(mission)
        if not isinstance(entry, dict) or not entry.get("weaker_because"):
            raise ReplacementError(f"`replaces` names {mission!r} weaker without saying why; recompute the "
                                   f"operating point")
        out[mission] = "; ".join(str(w) for w in entry["weaker_because"])
    # a mission said weaker in its entry must be in the list: an edit that drops it from the list is refused
    dropped = [m for m, e in replaces["missions"].items() if isinstance(e, dict) and e.get("weaker_because")
               and m not in out]
    if dropped:
        raise ReplacementError(f"`replaces` says {', '.join(dropped)} promise less but does not list them as weaker "
                               f"(the file was edited); recompute the operating point")
    return out


def unaccepted_why(why: str, old_path: str) -> str:
    """A weaker mission's reason to send every group to review, for its verdict lines and pages."""
    return (f"this operating point promises less than the one it replaces ({old_path}): {why}; the owner accepts it "
            f"with --accept_weaker 'why, in words' (judge.sh accept_weaker=), recorded on every verdict line")


def inherit_targets(old_op: dict, given: dict) -> tuple[dict, list[str]]:
    """The evaluate settings a re-certification uses: each of `given` ({name: value or None when the flag was not
    given}: targets, overkill_targets, confidence, review_share, family_wise) that is None taken from `old_op`;
    returns (settings, what was taken or changed, in words)."""
    missions = old_op.get("missions") or {}

    def per_mission(key):
        rates = {m: e.get(key) for m, e in missions.items() if isinstance(e, dict) and e.get(key) is not None}
        return {"default": None, "per_mission": rates} if rates else None

    old = {"targets": per_mission("target_miss_rate"), "overkill_targets": per_mission("target_overkill_rate"),
           "confidence": old_op.get("confidence"), "review_share": old_op.get("review_share"),
           "family_wise": bool((old_op.get("family") or {}).get("family_wise"))}
    if old["targets"] is None:
        raise ReplacementError("the replaced operating point has no target miss rate for any mission: is it an "
                               "operating point group-qc evaluate wrote?")
    out, said = {}, []
    for name, value in given.items():
        flag = FLAGS[name]
        if value is None:
            out[name] = old[name]
            said.append(f"{flag} {_shown(old[name])} (kept from the replaced operating point)")
        else:
            out[name] = value
            if _shown(value) != _shown(old[name]):
                said.append(f"{flag} {_shown(old[name])} -> {_shown(value)} (changed by a flag)")
    return out, said


FLAGS = {"targets": "--target_miss_rate", "overkill_targets": "--target_overkill_rate", "confidence": "--confidence",
         "review_share": "--review_share", "family_wise": "--family_wise"}


def _shown(value) -> str:
    if isinstance(value, dict) and "per_mission" in value:
        parts = ([f"{value['default']:g}"] if value.get("default") is not None else []) \
            + [f"{m}={r:g}" for m, r in sorted(value["per_mission"].items())]
        return " ".join(parts) or "none"
    return "none" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def side_by_side_lines(replaces: dict) -> list[str]:
    """Markdown lines: each mission's old and new numbers in one table, the weaker ones named."""
    lines = [f"Replaces `{replaces['path']}` (sha256 {replaces['sha256'][:12]}…). Old -> new:", "",
             "| mission | " + " | ".join(SIDE_BY_SIDE) + " | weaker |",
             "|---" * (len(SIDE_BY_SIDE) + 2) + "|"]
    for mission, e in replaces["missions"].items():
        cells = [f"{_cell(e['old'][k])} -> {_cell(e['new'][k])}" if _cell(e["old"][k]) != _cell(e["new"][k])
                 else _cell(e["new"][k]) for k in SIDE_BY_SIDE]
        lines.append(f"| {mission} | " + " | ".join(cells) + " | "
                     + ("; ".join(e["weaker_because"]) or "no") + " |")
    if replaces["weaker"]:
        lines += ["", f"WEAKER PROMISE for {', '.join(replaces['weaker'])}: the judge sends every group of "
                      f"{'them' if len(replaces['weaker']) > 1 else 'it'} to review until the owner accepts it in "
                      f"words (--accept_weaker)."]
    return lines


def _cell(value) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.3g}"


def check_words(words, flag: str, example: str) -> str | None:
    """A reason a person signs (--no_monitor, --accept_weaker, monitor_why=, an owner's acceptance): at least
    MIN_WORDS characters with a letter among them, at most MAX_WORDS, spaces collapsed; none that shows nothing or
    moves the text (control characters such as a terminal's escape, bidi overrides: qc_core.names' refused
    categories), and not a flag (`--overwrite` given where the words go is a slip, not a reason). None when not given.
    The words are recorded on every verdict line and printed: they are text."""
    import unicodedata

    if words is None:
        return None
    raw = str(words)
    bad = next((c for c in raw if unicodedata.category(c) in REFUSED_CATEGORIES and c not in "\t\n"), None)
    if bad is not None:
        raise ReplacementError(f"{flag} {shown(raw[:80])!r}: holds U+{ord(bad):04X} "
                               f"({unicodedata.name(bad, 'a control character').lower()}), which shows nothing or "
                               f"moves the text around it; say it in plain words (e.g. {example!r})")
    text = " ".join(raw.split())
    if len(text) > MAX_WORDS:
        raise ReplacementError(f"{flag}: {len(text)} characters, over {MAX_WORDS}: say it in a sentence or two "
                               f"(e.g. {example!r})")
    if text.startswith("--"):
        raise ReplacementError(f"{flag} {text[:40]!r} is a flag, not a reason: say why in words (e.g. {example!r})")
    if len(text) < MIN_WORDS or not any(c.isalpha() for c in text):
        raise ReplacementError(f"{flag} {text!r}: say in words (e.g. {example!r}); it is recorded on every verdict "
                               f"line")
    return text
