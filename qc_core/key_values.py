"""`key=value` arguments, the one way every launcher takes them: the bash launchers in scripts/ through
`python -m qc_core.key_values`, and `group-qc grpo` (run_grpo.sh) directly. Pure (stdlib only).

    python -m qc_core.key_values "<known keys>" "<required keys>" key=value ...

prints one line per argument for the launcher to `eval`: `key=<shell-quoted value>`, so a value reaches the command
as one argument, as typed (spaces, quotes, `$()`, globs: nothing is expanded). A known key may carry a type:

    key:words   a list of arguments (`extra="--max_new_tokens 48 --template 'a b'"`), split once, the way a shell
                splits words (`words`, shlex: quotes group, nothing expands), printed as a bash array `key=(…)`
    key:count   a whole number of at least 1 (`num_shards`), refused otherwise before anything runs
    key:flag    0 or 1

An unknown key, a word without `=`, a missing required key or a value of the wrong type is an error on stderr naming
the known keys or the value (exit 2).
"""
from __future__ import annotations

import shlex
import sys
from typing import Callable

from .errors import UserError
from .exits import run_cli


class KeyValueError(UserError):
    """An argument that is not one of the launcher's key=value settings."""


def parse_key_values(tokens: list[str], keys, required=()) -> dict[str, str]:
    """{key: value} in argument order (a key given twice: the last wins, as in a shell assignment)."""
    keys = tuple(keys)
    settings = {}
    for token in tokens:
        key, sep, value = token.partition("=")
        if not sep or key not in keys:
            raise KeyValueError(f"unknown argument {token!r}; expected key=value with key in {', '.join(keys)}")
        settings[key] = value
    missing = [k for k in required if not settings.get(k)]
    if missing:
        raise KeyValueError(", ".join(f"{k}=…" for k in missing) + (" is" if len(missing) == 1 else " are")
                            + " required (see --help)")
    return settings


def words(value: str, key: str = "extra") -> list[str]:
    """A setting that holds several arguments, split the one way every launcher splits them: as a shell splits
    words (quotes group, backslashes escape), with nothing expanded (no globs, no `$`)."""
    try:
        return shlex.split(value)
    except ValueError as exc:
        raise KeyValueError(f"{key}={value!r}: {exc}; quote as in a shell, e.g. {key}=\"--flag 'a value'\"") from None


def count(value: str, key: str) -> int:
    """A whole number of at least 1 (a number of shards, processes, …)."""
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise KeyValueError(f"{key}={value!r} is not a whole number of at least 1")
    return int(value)


def flag(value: str, key: str) -> bool:
    if value not in ("0", "1"):
        raise KeyValueError(f"{key}={value!r}: expected 1 or 0")
    return value == "1"


TYPES: dict[str, Callable[[str, str], object]] = {"words": words, "count": count, "flag": flag}


def typed_keys(spec: str) -> dict[str, str | None]:
    """"a b:words c:count" -> {"a": None, "b": "words", "c": "count"}."""
    keys = {}
    for item in spec.split():
        key, _, kind = item.partition(":")
        if kind and kind not in TYPES:
            raise KeyValueError(f"launcher bug: key {key!r} has unknown type {kind!r} (known: {', '.join(TYPES)})")
        keys[key] = kind or None
    return keys


def shell_lines(tokens: list[str], spec: str, required: str = "") -> list[str]:
    """The lines `main` prints: each given setting as a bash assignment, typed values checked."""
    keys = typed_keys(spec)
    lines = []
    for key, value in parse_key_values(tokens, keys, required.split()).items():
        kind = keys[key]
        if kind == "words":
            lines.append(f"{key}=(" + " ".join(shlex.quote(w) for w in words(value, key)) + ")")
            continue
        if kind:
            TYPES[kind](value, key)
        lines.append(f"{key}={shlex.quote(value)}")
    return lines


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--join"]:   # the inverse of the words type: arguments as one string it splits back into them
        print(shlex.join(argv[1:]))
        return 0
    if len(argv) < 2:
        print('usage: python -m qc_core.key_values "<known keys>" "<required keys>" key=value ...\n'
              '       python -m qc_core.key_values --join ARG ...', file=sys.stderr)
        return 2

    def body() -> int:
        print("\n".join(shell_lines(argv[2:], argv[0], argv[1])))
        return 0
    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
