"""`group-qc decisions`: reviewers' decisions from the review pages, imported as labels.

    group-qc decisions --decisions decisions.jsonl [more.jsonl …] --output_dir DIR

A review page (the judge's, evaluation's, Stage-A's audit) lets a reviewer decide each group and exports
`decisions.jsonl`, one line per decided group (DECISION_FIELDS):

    {"group_id", "mission", "decision": "通过" | "不通过" | "unsure", "note", "reviewer", "decided_at" (ISO time),
     "verdict" and "p_fail" (the model's, as the page showed them; null where it showed none),
     "source": {"file", "sha256"} (the verdicts, predictions' Stage-A or Stage-A file the page was made from)}

The import checks every line before it writes anything: the fields and their types, the decision, the mission
(names and aliases resolve to the registry's), the group's line in its source file unchanged since the page was made
(`source.line_sha256`, the digest of what the reviewer saw: lines appended to the file since leave it valid, a
re-judged group is refused by name; an export without it needs the whole file unchanged, `source.sha256`), the source
found where the page was made or, for a day folder moved or copied, relative to the page the export came from
(`source.relative`, `page`), each change of the decision's `history` ({from, to, at, by, on_screen_ms}), and the
group in it, and the reviewer's name (a line without one is refused unless --reviewer names it: two nameless
reviewers would merge into one). Every problem is named as file:line, and nothing is written while any remains.

It then appends the new lines to the append-only log `DIR/decisions.jsonl` (a line already there, such as the
same file imported twice, adds nothing), each with a copy of the group's Stage-A record as the source held it and its
chain digest (stage_b.labels.decisions_log: a line edited by hand afterwards is refused on every read).
From the whole log, per group: each reviewer's latest decision counts; groups where reviewers' definite decisions
disagree are conflicts, kept in the log and not labelled; `unsure` labels nothing. Every other decided group is
written to `DIR/<mission>_stage_a.jsonl` as a Stage-A record with `label` pass/fail, so that
`stage_b.evaluate --stage_a_dir DIR` and `run_grpo.sh stage_a_dir=DIR` read them like any labelled Stage-A file.
Printed per mission, over every import into the folder: decided, unsure, conflicts; for reviewed groups (chosen by
their score: the review band, not a sample of automatic work) how often the verdict line agreed, passed a failed
group or failed a passed one; for blind audits, escapes among auto-passed and overkills among auto-failed groups.
Then one table, a row per reviewer over every mission and day (gold answers and blind overlaps pooled, an error rate
with exact bounds, a verdict), written to `DIR/reviewers.jsonl` (stage_b.labels.reviewer_quality); the reviewers below
the
bar are named, and their lone labels certify nothing. The conflicts counted per mission are the ones listed after it.
Pure (stdlib and the project's pure core).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qc_core.exits import run_cli
from qc_core.jsonl import output_lock, write_jsonl_atomic
from qc_core.missions import load_registry
from qc_core.names import ReviewerNameError, reviewer_name
from qc_core.paths import with_input_dir_stored
from qc_core.records import utc_now
from stage_b.contract.numbers import pct1
from stage_b.contract.verdict import FAIL, PASS
from stage_b.labels.agreement import (
    DEFAULT_MIN_GOLD_ACCURACY,
    DEFAULT_MIN_KAPPA,
    check_min_gold_accuracy,
    check_min_kappa,
    gold_scores,
    pairwise,
    quality,
)
from stage_b.labels.decision_lines import DecisionsError, read_decisions
from stage_b.labels.decisions_log import LOG, DecisionsLogError, append_log, read_log
from stage_b.labels.persons import canonical_names, merged
from stage_b.labels.resolve import decision_identity, resolve, review_of, stage_a_record, summary
from stage_b.labels.reviewer_quality import (
    BELOW,
    MEETS,
    bar_of,
    confirmers,
    format_table,
    named,
    reviewer_table,
    unconfirmed_fails,
)
from stage_b.labels.reviewer_quality import FILE as REVIEWERS


def check_labels_folder(output_dir: Path) -> None:
    """The import writes only into a labels folder it owns: a new or empty folder, or one holding its log. A folder of
    Stage-A files (or anything else) without the log is refused: the import would replace each <mission>_stage_a.jsonl
    with the decided groups only."""
    if not output_dir.exists() or (output_dir / LOG).exists():
        return
    if not output_dir.is_dir():
        raise DecisionsError(f"--output_dir {output_dir} is a file: give a labels folder")
    present = sorted(p.name for p in output_dir.iterdir())
    if present:
        shown = ", ".join(present[:5]) + (f" and {len(present) - 5} more" if len(present) > 5 else "")
        raise DecisionsError(f"--output_dir {output_dir} already holds {shown} and no {LOG}: it is not a labels folder "
                             f"this import wrote (a Stage-A folder's files would be replaced by the decided groups "
                             f"only). Give a labels folder of its own, new or empty")


def import_decisions(files, output_dir, registry=None, unnamed: str = "", min_kappa: float = DEFAULT_MIN_KAPPA,
                     min_gold_accuracy: float = DEFAULT_MIN_GOLD_ACCURACY, roots=()) -> dict:
    """Check, log, resolve and write (module doc). Returns {"added", "already", "groups", "summary", "written"}.
    `unnamed`: the reviewer of lines that name none (--reviewer); without it they are refused. `roots`: where the
    project lies now (--root; default the labels folder's parent): a source file is found there by its day folder
    and name before the path the page stored, so exports made before a move import after it."""
    registry = registry or load_registry()
    roots = list(roots) or [Path(output_dir).resolve().parent]
    incoming = read_decisions(files, registry, _unnamed_reviewer(unnamed), roots)
    if not incoming:
        raise DecisionsError(f"no decision in {', '.join(map(str, files))}: decide groups on the review page before "
                             f"exporting (an export with nothing decided is empty)")
    return import_checked(incoming, output_dir, registry, min_kappa, min_gold_accuracy)


def import_checked(incoming: list[dict], output_dir, registry=None, min_kappa: float = DEFAULT_MIN_KAPPA,
                   min_gold_accuracy: float = DEFAULT_MIN_GOLD_ACCURACY) -> dict:
    """Decisions already checked line by line (decision_lines.check_line: an export's lines, or the review app's
    stored decisions) appended to the log, resolved and written as labels (module doc); the same return as
    import_decisions. A decision whose `id` (the review app's) or identity is in the log already adds nothing."""
    registry = registry or load_registry()
    output_dir = Path(output_dir)
    check_labels_folder(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    log_path = output_dir / LOG
    with output_lock(log_path):
        try:
            log, chain = read_log(log_path)
        except DecisionsLogError as exc:
            raise DecisionsError(str(exc)) from None
        known = {decision_identity(d) for d in log}
        ids = {d["id"] for d in log if isinstance(d.get("id"), str)}
        added = []
        for d in incoming:
            if decision_identity(d) not in known and d.get("id") not in ids:
                known.add(decision_identity(d))
                if isinstance(d.get("id"), str):
                    ids.add(d["id"])
                added.append({**d, "imported_at": utc_now()})
        append_log(log_path, added, chain, log)
        log += added
        groups = resolve(log)
        agreement = pairwise({key: {d["reviewer"]: d["decision"] for d in g["decisions"]}
                              for key, g in groups.items()})
        gold_groups = resolve(log, gold=True)
        gold = gold_scores(gold_groups)
        bar = quality(agreement, min_kappa, gold, min_gold_accuracy)
        reviewers = reviewer_table(gold_groups, log, bar_of(min_gold_accuracy))
        waiting = {key: who for key, who in unconfirmed_fails(groups, confirmers(reviewers)).items()
                   if groups[key].get("route") == "audit" and groups[key]["verdict"] == PASS}
        write_jsonl_atomic(output_dir / REVIEWERS, reviewers)
        written = _write_labels(output_dir, groups, with_pooled(bar, reviewers, {m for m, _ in groups}), registry)
    without_route = sum(1 for d in incoming if (d["record"].get("route") is None))
    read: dict[str, dict[str, int]] = {}   # whose decisions each file held
    for d in incoming:
        by = read.setdefault(d.get("imported_from", "the review app"), {})
        by[d["reviewer"]] = by.get(d["reviewer"], 0) + 1
    return {"added": len(added), "already": len(incoming) - len(added), "groups": groups, "read": read,
            "summary": summary(groups), "written": written, "without_route": without_route,
            "agreement": agreement, "quality": bar, "gold": gold, "reviewers": reviewers, "escapes_waiting": waiting,
            "reviewers_path": output_dir / REVIEWERS, "one_person": merged(canonical_names(log))}


def _unnamed_reviewer(unnamed: str) -> str:
    """--reviewer: the name lines without one are imported under (checked like every name), or "" for none."""
    if not (unnamed or "").strip():
        return ""
    try:
        return reviewer_name(unnamed)
    except ReviewerNameError as exc:
        raise DecisionsError(f"--reviewer {exc}") from None


def _write_labels(output_dir: Path, groups: dict, certify_bar: dict[str, dict], registry) -> dict:
    """Per mission, the decided groups as Stage-A records with their label and review, written whole (atomically);
    {mission: (path, rows)}. A known-answer (gold) check scores its reviewers and labels nothing."""
    written = {}
    census = band_census(groups)
    for mission in sorted({m for m, _ in groups}):
        rows = [with_input_dir_stored(stage_a_record(g["record"], g["status"], review_of(
            g["record"], g["decisions"], certify_bar.get(mission), census, g.get("adjudication"))), output_dir)
                for (m, _), g in sorted(groups.items())
                if m == mission and g["status"] in (PASS, FAIL) and not g["record"].get("gold")]
        path = output_dir / f"{registry.resolve(mission).stage_a_stem}.jsonl"
        write_jsonl_atomic(path, rows)
        written[mission] = (path, len(rows))
    return written


def with_pooled(bar: dict[str, dict], rows: list[dict], missions) -> dict[str, dict]:
    """The bar each label's review is held to: the reviewer table (stage_b.labels.reviewer_quality, pooled over every
    mission
    and day, exact bounds) where it has decided, the per-mission fragments (stage_b.labels.agreement.quality: a kappa
    below
    --min_kappa, which cannot say which of the two is wrong, or a per-mission gold share) where it has not. A reviewer
    the table names is below the bar in every mission; one it shows meeting the bar is not held back by a fragment."""
    out = {m: dict(by) for m, by in bar.items()}
    for row in rows:
        who = row["reviewer"]
        if row["verdict"] not in (BELOW, MEETS):
            continue
        for mission in missions:
            out.setdefault(mission, {})[who] = {
                "status": "below the bar" if row["verdict"] == BELOW else "ok",
                "why": f"{who}, {row['why']} (over every mission and day)"}
    return out


def band_census(groups: dict) -> dict[str, int]:
    """{band id: how many of its groups have a label (pass or fail)}, over every group the log resolves."""
    out: dict[str, int] = {}
    for g in groups.values():
        if g["status"] not in (PASS, FAIL) or g["record"].get("gold"):
            continue
        bands = {d["source"]["band"]["id"] for d in g["decisions"] if isinstance(d.get("source", {}).get("band"), dict)}
        for band in bands:
            out[band] = out.get(band, 0) + 1
    return out


def print_agreement(agreement: dict, bar: dict, gold: dict | None = None, decided=frozenset()) -> None:
    """Per mission and pair of reviewers, Cohen's kappa with its interval; per reviewer, agreement with the others
    and accuracy on known-answer groups (stage_b.labels.agreement). These fragments name no one: a reviewer the reviewer
    table has not decided (`decided`: those it shows below or meeting the bar) and a fragment holds back has their
    lone labels in that mission held back, said as such."""

    def held_back(mission: str, r: str, why: str) -> None:
        if r not in decided:
            print(f"{mission}: {printable(r)}'s lone labels in this mission certify nothing until a second reviewer "
                  f"confirms them ({printable(why)}); whether {printable(r)} is below the bar is the reviewer "
                  f"table's verdict, once gold answers decide it", file=sys.stderr)
    for mission, by_reviewer in sorted((gold or {}).items()):
        for r, g in sorted(by_reviewer.items()):
            print(f"{mission}: {printable(r)} on known-answer groups: right on {g['correct']} of {g['n']}"
                  + (f" ({pct1(g['correct'] / g['n'])})" if g["n"] else "") + f", {g['unsure']} unsure")
    for mission in sorted(set(bar) - set(agreement)):
        for r, q in sorted(bar[mission].items()):
            if q["status"] == "below the bar":
                held_back(mission, r, q["why"])
    for mission, by_pair in sorted(agreement.items()):
        mine: dict[str, list[int]] = {}
        for (a, b), k in sorted(by_pair.items()):
            shown = "n/a (one answer only)" if k["kappa"] is None else \
                f"{k['kappa']:.2f} [{k['ci95'][0]:.2f}, {k['ci95'][1]:.2f}]"
            print(f"{mission}: {printable(a)} and {printable(b)} both decided {k['n']} group(s) ({k['unsure']} more "
                  f"with an unsure): agreed on {k['agreed']}, Cohen's kappa {shown}")
            for r in (a, b):
                mine.setdefault(r, [0, 0])
                mine[r][0] += k["agreed"]
                mine[r][1] += k["n"]
        for r, (agreed, n) in sorted(mine.items()):
            if n:
                print(f"{mission}: {printable(r)} agreed with the others on {agreed} of {n} ({pct1(agreed / n)})")
        for r, q in sorted((bar.get(mission) or {}).items()):
            if q["status"] == "below the bar":
                held_back(mission, r, q["why"])


def print_reviewers(rows: list[dict], path) -> None:
    """The reviewer table (stage_b.labels.reviewer_quality): one row per reviewer over every mission and day, and each
    reviewer below the bar named on stderr with why."""
    if not rows:
        return
    print(f"reviewers, over every mission and day imported into this folder (bar: an error rate of "
          f"{100 * rows[0]['bar']:.1f}%, 1 - --min_gold_accuracy; exact bounds at {rows[0]['confidence']:.0%} "
          f"confidence; written to {path}):")
    print(format_table(rows, printable))
    for who, why in named(rows).items():
        print(f"{printable(who)} is below the bar: {printable(why)}. Their labels train but certify nothing in any "
              f"mission until a second reviewer confirms them", file=sys.stderr)


def printable(text: str) -> str:
    """A name as the terminal may show it: control characters (escape codes) written as \\xNN, never run."""
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in str(text))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="group-qc decisions", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--decisions", nargs="+", required=True, help="decisions.jsonl files exported from review pages")
    p.add_argument("--output_dir", required=True, help="where decisions.jsonl (the log) and <mission>_stage_a.jsonl go")
    p.add_argument("--min_kappa", default=str(DEFAULT_MIN_KAPPA),
                   help="the agreement bar (stage_b.labels.agreement): a reviewer whose Cohen's kappa with another, "
                        "on 10 or "
                        "more groups both decided, is below it gives labels that train but certify nothing until a "
                        "second reviewer confirms them (default %(default)s)")
    p.add_argument("--min_gold_accuracy", default=str(DEFAULT_MIN_GOLD_ACCURACY),
                   help="the known-answer bar: the reviewer table's error bar is 1 minus it (a reviewer whose exact "
                        "90%% lower bound, over every gold answer of every mission and day, is above it is named, and "
                        "their lone labels certify nothing until confirmed); per mission, a reviewer right on fewer "
                        "than this share of 5 or more gold groups has their lone labels there held back "
                        "(default %(default)s)")
    p.add_argument("--root", nargs="+", default=[],
                   help="the folder(s) the project lies in now, when it moved since the pages were exported (default: "
                        "the --output_dir's parent): each decision's source is found there by its day folder and "
                        "file name, the group's line the one the reviewer saw")
    p.add_argument("--reviewer", default="", help="the reviewer of lines that name none (a page exported without a "
                                                 "name); without it such lines are refused")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)

    def body() -> int:
        for root in args.root:
            if not Path(root).is_dir():
                raise DecisionsError(f"--root {root} is not a folder: give the folder the project lies in now")
        result = import_decisions(args.decisions, args.output_dir, unnamed=args.reviewer, roots=args.root,
                                  min_kappa=check_min_kappa(args.min_kappa),
                                  min_gold_accuracy=check_min_gold_accuracy(args.min_gold_accuracy))
        print_import(result, Path(args.output_dir) / LOG)
        return 0
    return run_cli(body)


def print_import(result: dict, log_path: Path) -> None:
    """What an import did, as the command prints it: per file and reviewer, per mission (labelled, reviewed, audited,
    escapes still waiting), agreement, the reviewer table, and every conflict by name."""
    for path, by in result["read"].items():
        print(f"read {path}: " + ", ".join(f"{n} decision(s) by {printable(who)}" for who, n in by.items()))
    print(f"{result['added']} decision(s) added to {log_path}, {result['already']} already there")
    for person, spelling in result.get("one_person", []):
        print(f"{printable(person)} and {printable(spelling)} are read as one reviewer (their names look alike: "
              f"one person, one name)", file=sys.stderr)
    if result["without_route"]:
        print(f"note: {result['without_route']} decision(s) come from a page or verdict file without routes (made "
              f"before audits): their labels train, and are treated as chosen by score, so no promise's bound "
              f"counts them", file=sys.stderr)
    for mission, s in result["summary"].items():
        path, n = result["written"][mission]
        r, a = s["reviewed"], s["audited"]
        print(f"{mission}: {s['decided']} decided in all imports so far, {s['unsure']} unsure, "
              f"{s['conflicts']} conflict(s) -> {n} labelled in {path}")
        if r["labelled"]:
            print(f"  reviewed (sent to a person by the rule, so not a sample of the work decided without "
                  f"review): the verdict line agreed on {r['agreed']} of {r['labelled']}, passed {r['missed']} of "
                  f"{r['fail']} the reviewer failed, failed {r['overkilled']} of {r['pass']} the reviewer passed")
        if s.get("no_verdict"):
            print(f"  {s['no_verdict']} labelled on a page without a model's verdict (a Stage-A audit): no verdict "
                  f"line to agree with")
        if a["labelled"]:
            print(f"  blind audits of work decided without review: {a['escapes']} escape(s) in {a['auto_passed']} "
                  f"auto-passed, {a['overkills']} overkill(s) in {a['auto_failed']} auto-failed (the promise's "
                  f"live check: group-qc monitor)")
        for (m, gid), who in sorted(result["escapes_waiting"].items()):
            if m == mission:
                print(f"  escape waiting for a second person: group {printable(gid)}, decided 不通过 by "
                      f"{printable(who)} alone; the monitor counts it once another reviewer decides it on that "
                      f"day's page (or once {printable(who)}'s measured error rate meets the bar)")
    print_agreement(result["agreement"], result["quality"], result["gold"],
                    {r["reviewer"] for r in result["reviewers"] if r["verdict"] in (BELOW, MEETS)})
    print_reviewers(result["reviewers"], result["reviewers_path"])
    for mission, s in result["summary"].items():   # the groups counted as conflicts above, each named
        for gid in s["conflict_groups"]:
            g = result["groups"][(mission, gid)]
            who = ", ".join(f"{printable(d['reviewer'])}: {d['decision']}" for d in g["decisions"])
            print(f"conflict: group {printable(gid)} of {mission} ({who}); not labelled until the reviewers agree",
                  file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
