"""Where a decision's source file is (the Stage-A or verdict file its review page was made from), read once per
import: its sha256, its groups by (mission, group id) and its review band. Found beside the page the export came
from, then under the project the labels folder is in (or --root) by its day folder and file name, then at the path
the page stored; the first that holds the group's line the reviewer saw (SourceFiles.locate)."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from qc_core.jsonl import JsonlError, file_sha256, iter_jsonl, record_digest
from qc_core.missions import MissionError
from stage_b.rules.routes import GROUP, REVIEW


class SourceFiles:
    """Source files read once: their sha256 and their groups by (mission, group id). `roots`: the folders a moved or
    copied project now lies in (the labels folder's project, or --root): a source is looked for there by its day
    folder and file name first, and taken where its group's line is the one the reviewer saw."""

    ROOT_DEPTH = 3   # <root>/<day folder>/<file> to <root>/a/b/<day folder>/<file>: a project's days, not its photos

    def __init__(self, registry, roots=()):
        self.registry = registry
        self.roots = [Path(r) for r in roots]
        self.files: dict[str, tuple[str, dict] | str] = {}
        self.bands: dict[tuple[str, str], dict | None] = {}   # a file's band per mission, worked out once
        self.found: dict[tuple[str, str], list[str]] = {}      # (day folder, file name) -> its paths under the roots

    def under_roots(self, stored: str) -> list[str]:
        """The files under the roots whose day folder and name are the stored path's (module doc)."""
        folder, name = Path(stored).parent.name, Path(stored).name
        if (folder, name) not in self.found:
            paths: list[str] = []
            for root in self.roots:
                for depth in range(self.ROOT_DEPTH):
                    pattern = "/".join(["*"] * depth + [folder, name]) if folder else name
                    paths += sorted(str(p) for p in root.glob(pattern) if p.is_file())
            self.found[(folder, name)] = list(dict.fromkeys(paths))
        return self.found[(folder, name)]

    def locate(self, source: dict, page, mission: str | None = None, group_id: str | None = None
               ) -> tuple[str, tuple[str, dict] | str]:
        """(the path, its facts) of a decision's source: relative to the page the export came from (a day folder
        moved or copied with its page), then under the roots by day folder and name, then where the page was made
        from; the first whose group line (or whole file, for an export without line digests) is the one the reviewer
        saw. Else the stored path's problem."""
        candidates = [*self._beside_page(source, page), *self.under_roots(source["file"]), source["file"]]
        for path in dict.fromkeys(os.path.normpath(c) for c in candidates):
            facts = self.get(path)
            if not isinstance(facts, str) and self._saw(facts, source, mission, group_id):
                return path, facts
        first = self.get(source["file"])
        if isinstance(first, str) and self.roots:
            first = (f"{first}, and no {Path(source['file']).parent.name}/{Path(source['file']).name} holding the "
                     f"group under {', '.join(map(str, self.roots))}: give the folder the project lies in now with "
                     f"--root")
        return source["file"], first

    @staticmethod
    def _beside_page(source: dict, page) -> list[str]:
        if not source.get("relative") or not isinstance(page, str):
            return []
        from urllib.parse import unquote, urlparse
        url = urlparse(page)
        return [str(Path(unquote(url.path)).parent / source["relative"])] if url.scheme == "file" else []

    @staticmethod
    def _saw(facts: tuple[str, dict], source: dict, mission, group_id) -> bool:
        """Whether a candidate holds what the reviewer saw: the group's line digest, else the whole file's."""
        sha, groups = facts
        seen = source.get("line_sha256")
        if seen is None or mission is None:
            return sha == source.get("sha256")
        record = groups.get((mission, group_id))
        return record is not None and record_digest(record) == seen

    def band(self, path, mission: str) -> dict | None:
        """The review band of a verdict file's mission: the groups the judge sent to review for their own p_fail or
        reply (route review, scope group; gold checks aside), named by a digest of their ids and counted. A label of
        such a group counts in a bound only when every group of its band was decided (stage_b.rules.routes)."""
        if (str(path), mission) not in self.bands:
            self.bands[(str(path), mission)] = self._band(path, mission)
        return self.bands[(str(path), mission)]

    def _band(self, path, mission: str) -> dict | None:
        facts = self.get(str(path))
        if isinstance(facts, str):
            return None
        ids = sorted(gid for (m, gid), r in facts[1].items() if m == mission and r.get("route") == REVIEW
                     and r.get("review_scope") == GROUP and not r.get("gold"))
        if not ids:
            return None
        digest = hashlib.sha256("\0".join([mission, *ids]).encode("utf-8")).hexdigest()[:16]
        return {"id": digest, "groups": len(ids)}

    def get(self, path: str):
        if path not in self.files:
            p = Path(path)
            if not p.is_file():
                self.files[path] = f"its source file {path} does not exist"
            else:
                groups = {}
                try:
                    for _, rec in iter_jsonl(p, allow_torn_tail=False):
                        if isinstance(rec, dict) and isinstance(rec.get("group_id"), str):
                            try:
                                mission = self.registry.resolve(rec.get("mission", "")).name
                            except MissionError:
                                continue
                            groups[(mission, rec["group_id"])] = rec
                except JsonlError as exc:
                    self.files[path] = f"its source file cannot be read: {exc}"
                    return self.files[path]
                self.files[path] = (file_sha256(p), groups)
        return self.files[path]
