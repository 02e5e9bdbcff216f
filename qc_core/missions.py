"""The mission registry: `configs/missions.yaml` is the only place that knows missions.

Pure module (yaml only). Every other module asks this one to turn a user-given name, an alias
or a folder name into a canonical `Mission`; an unknown name is an error that lists the known
ones, so a spelling difference can never silently drop a mission.
"""
from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import yaml

from .errors import UserError

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = REPO_ROOT / "configs" / "missions.yaml"
# Lets an installed package point at a site-specific registry. Defined here, where the registry is read:
# stage_b.data.settings lists it among the GROUP_QC_* variables by importing it (the core never imports a stage above).
ENV_MISSIONS = "GROUP_QC_MISSIONS"
CONFIG_ENV = ENV_MISSIONS
LABELS = ("pass", "fail")


class MissionError(UserError):
    """A mission name, alias or registry entry that cannot be resolved."""


@dataclass(frozen=True)
class Mission:
    name: str
    aliases: tuple[str, ...]
    focus: str
    checkpoints: tuple[str, ...]
    defect_terms: tuple[str, ...]

    @property
    def stage_a_stem(self) -> str:
        return f"{self.name}_stage_a"


@dataclass(frozen=True)
class Registry:
    missions: tuple[Mission, ...]
    label_folders: dict  # folder name -> "pass" | "fail"
    path: Path

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.missions]

    def resolve(self, name: str) -> Mission:
        """Canonical mission for a name or alias (full/half-width parentheses are equivalent)."""
        key = _normalize(name)
        for mission in self.missions:
            if key in {_normalize(n) for n in (mission.name, *mission.aliases)}:
                return mission
        raise MissionError(
            f"unknown mission {name!r}; known missions: {', '.join(self.names)} "
            f"(aliases accepted; add new missions to {self.path})"
        )

    def select(self, spec: str | list[str]) -> list[Mission]:
        """`all`, one name, a comma-separated list or a list of names -> missions, registry order."""
        items = spec_items(spec)
        if not items:
            raise MissionError(f"no mission given; use 'all' or one of: {', '.join(self.names)}")
        if is_all(items):
            return list(self.missions)
        chosen = {self.resolve(s).name for s in items}
        return [m for m in self.missions if m.name in chosen]

    def label_of_folder(self, folder: str) -> str | None:
        return self.label_folders.get(unicodedata.normalize("NFC", folder.strip()))

    def folders_of(self, mission: Mission) -> list[str]:
        """Every spelling a mission's folder may have on disk."""
        return [mission.name, *mission.aliases]


def spec_items(spec: str | list[str]) -> list[str]:
    """The names in a mission selection: a comma-separated string or a list."""
    items = spec if isinstance(spec, (list, tuple)) else str(spec).split(",")
    return [s.strip() for s in items if s and s.strip()]


def is_all(spec: str | list[str]) -> bool:
    """Whether a mission selection means every mission (then a missing one is left out, not an error)."""
    return any(s.lower() == "all" for s in spec_items(spec))


def _normalize(name: str) -> str:
    # NFKC maps full-width （） to (), so both spellings of the same mission meet.
    return unicodedata.normalize("NFKC", str(name)).strip().casefold()


def _require(entry: dict, key: str, path: Path, kind=str):
    value = entry.get(key)
    if value is None or (kind is str and not str(value).strip()):
        raise MissionError(f"{path}: mission entry {entry.get('name', entry)!r} lacks {key!r}")
    return value


def _parse(data: dict, path: Path) -> Registry:
    if not isinstance(data, dict) or not isinstance(data.get("missions"), list):
        raise MissionError(f"{path}: expected a mapping with a 'missions' list")
    label_folders = {unicodedata.normalize("NFC", str(k)): str(v)
                     for k, v in (data.get("label_folders") or {}).items()}
    bad = sorted(set(label_folders.values()) - set(LABELS))
    if bad or not label_folders:
        raise MissionError(f"{path}: label_folders must map folder names to {LABELS}, got {bad or 'nothing'}")
    missions: list[Mission] = []
    seen: dict[str, str] = {}
    for entry in data["missions"]:
        mission = Mission(
            name=str(_require(entry, "name", path)).strip(),
            aliases=tuple(str(a).strip() for a in entry.get("aliases") or ()),
            focus=str(_require(entry, "focus", path)).strip(),
            checkpoints=tuple(str(c).strip() for c in _require(entry, "checkpoints", path, list)),
            defect_terms=tuple(str(t).strip() for t in entry.get("defect_terms") or ()),
        )
        for spelling in (mission.name, *mission.aliases):
            key = _normalize(spelling)
            if key in seen and seen[key] != mission.name:
                raise MissionError(f"{path}: {spelling!r} names both {seen[key]!r} and {mission.name!r}")
            seen[key] = mission.name
        missions.append(mission)
    return Registry(missions=tuple(missions), label_folders=label_folders, path=path)


def load_registry(path: str | os.PathLike | None = None) -> Registry:
    """Load the registry from `path`, else $GROUP_QC_MISSIONS, else the repository's configs/."""
    path = Path(path or os.environ.get(CONFIG_ENV) or DEFAULT_CONFIG)
    return _load_cached(str(path.resolve()))


@lru_cache(maxsize=8)
def _load_cached(path: str) -> Registry:
    p = Path(path)
    if not p.is_file():
        raise MissionError(f"mission registry not found: {p}; pass --missions_config or set ${CONFIG_ENV}")
    with p.open(encoding="utf-8") as f:
        return _parse(yaml.safe_load(f), p)
