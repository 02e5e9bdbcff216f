#!/usr/bin/env python
"""The demo's people on the served review app, over HTTP as the pages do: reviewers decide a day's queue from the
synthetic generator's truth (each in a thread of their own, at the same time), then the lead decides, as the second
person, every escape the reviewer table says waits for one, and the labels are waited for (every stored decision in
the labels folder the monitor and re-certification read).

    python -m group_qc_dev.play_served --server URL --accounts FILE --photos DIR --day DAY \
        --reviewers NAME [NAME …] [--lead NAME]

FILE holds the accounts the demo added with `group-qc users add` ({name: password}); a one-time password is replaced
at the first sign-in by a new random one, written back to FILE (as a person would choose their own). A card is
decided as the truth says (a gold check as the day's verdict file records its known answer: only this simulation
reads it). In a day's shared queue each reviewer takes the next card nobody has open (the app's leases)."""
from __future__ import annotations

import argparse
import json
import secrets
import sys
import threading
import time
import uuid
from pathlib import Path

from group_qc_dev.synthetic import groups_of, read_truth
from qc_core.jsonl import iter_jsonl


class Person:
    def __init__(self, server: str, name: str, accounts: Path, lock: threading.Lock):
        import httpx
        self.name, self.accounts, self.lock = name, accounts, lock
        self.client = httpx.Client(base_url=server, timeout=60)

    def sign_in(self) -> None:
        with self.lock:
            known = json.loads(self.accounts.read_text(encoding="utf-8"))
        r = self.client.post("/api/login", json={"name": self.name, "password": known[self.name]})
        if r.status_code != 200:
            raise SystemExit(f"{self.name} cannot sign in: {r.status_code} {r.text}")
        self.client.headers["X-CSRF-Token"] = r.json()["csrf_token"]
        if r.json()["must_change_password"]:
            new = secrets.token_urlsafe(18)
            changed = self.client.post("/api/password", json={"old": known[self.name], "new": new})
            if changed.status_code != 200:
                raise SystemExit(f"{self.name} cannot set a password: {changed.text}")
            with self.lock:
                known = json.loads(self.accounts.read_text(encoding="utf-8"))
                known[self.name] = new
                self.accounts.write_text(json.dumps(known, ensure_ascii=False), encoding="utf-8")

    def decide(self, day: str, card: dict, decision: str) -> int:
        r = self.client.post("/api/decisions", json={"id": uuid.uuid4().hex, "day": day, "card": card["card"],
                                                     "decision": decision, "note": "", "base": card["version"]})
        if r.status_code not in (200, 201, 409):
            raise SystemExit(f"{self.name}: {r.status_code} {r.text}")
        return r.status_code


def answers(photos: Path, day_folder: Path) -> dict[tuple[str, str], str]:
    """{(mission, group id): 通过 | 不通过} as the generator's truth has it, and a gold check's known answer."""
    out = {(g["mission"], g["group_id"]): "不通过" if g["label"] == "fail" else "通过"
           for g in groups_of(read_truth(photos))}
    for path in day_folder.glob("*_verdicts.jsonl"):
        for _, v in iter_jsonl(path):
            if (v.get("gold") or {}).get("label"):
                out[(v["mission"], v["group_id"])] = "不通过" if v["gold"]["label"] == "fail" else "通过"
    return out


def review(person: Person, day: str, truth: dict, counts: dict) -> None:
    """A reviewer's day: every card of their queue not decided yet, the shared queue's cards one lease at a time."""
    person.sign_in()
    while True:
        r = person.client.get("/api/queue", params={"day": day})
        r.raise_for_status()
        todo = [c for c in r.json()["cards"] if not c["decision"]]
        if not todo:
            return
        progressed = False
        for card in todo:
            if r.json()["open_queue"] and person.client.post("/api/lease", json={"day": day, "card": card["card"]}
                                                             ).status_code == 409:
                continue   # another reviewer has it open
            if person.decide(day, card, truth[(card["mission"], card["group_id"])]) in (200, 201):
                counts[person.name] = counts.get(person.name, 0) + 1
                progressed = True
        if not progressed:
            return


def wait_for_labels(person: Person, timeout: float = 120) -> dict:
    """Until every stored decision is in the labels folder (the lead's /api/sync)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = person.client.get("/api/sync").json()
        if state["waiting"] == 0:
            return state
        if state.get("problems"):
            raise SystemExit(f"decisions the labels refused: {state['problems'][:3]}")
        time.sleep(0.2)
    raise SystemExit(f"the labels did not take every decision within {timeout} s: {state}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", required=True)
    p.add_argument("--accounts", required=True)
    p.add_argument("--photos", required=True)
    p.add_argument("--day", required=True, help="the day as the app names it: its folder inside the project")
    p.add_argument("--day_folder", required=True, help="the day's folder (its verdict files)")
    p.add_argument("--reviewers", nargs="+", required=True)
    p.add_argument("--lead", default=None, help="the lead: waits for the labels, and with --confirm_escapes decides "
                                                  "each escape found by one reviewer as the second person")
    p.add_argument("--confirm_escapes", action="store_true")
    args = p.parse_args(argv)
    accounts, lock = Path(args.accounts), threading.Lock()
    truth = answers(Path(args.photos), Path(args.day_folder))
    counts: dict[str, int] = {}
    people = [Person(args.server, name, accounts, lock) for name in args.reviewers]
    threads = [threading.Thread(target=review, args=(person, args.day, truth, counts)) for person in people]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(f"{sum(counts.values())} decisions over HTTP, at the same time: "
          + ", ".join(f"{name} {counts.get(name, 0)}" for name in args.reviewers))
    if args.lead:
        lead = Person(args.server, args.lead, accounts, lock)
        lead.sign_in()
        wait_for_labels(lead)
        waiting = lead.client.get("/api/reviewers").json()["escapes_waiting"] if args.confirm_escapes else []
        confirmed = 0
        for escape in waiting:
            for where in escape["cards"]:
                if where["day"] != args.day:
                    continue
                card = next(c for c in lead.client.get("/api/queue", params={"day": args.day}).json()["cards"]
                            if c["card"] == where["card"])
                confirmed += lead.decide(args.day, card, truth[(escape["mission"], escape["group_id"])]) in (200, 201)
        state = wait_for_labels(lead)
        left = lead.client.get("/api/reviewers").json()["escapes_waiting"]
        print((f"lead {args.lead}: {confirmed} escape(s) found by one reviewer decided as the second person; "
               if args.confirm_escapes else "") + f"{len(left)} escape(s) waiting for a second person; "
              f"{state['stored']} decisions stored, every one in the labels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
