"""`key=value` arguments, the one way every launcher takes them: the bash launchers in scripts/ through
`python -m stage_a.key_values`, and `python -m stage_b.launch` (run_grpo.sh) directly. Pure (stdlib only).

    python -m stage_a.key_values "<known keys>" "<required keys>" key=value ...

prints one `key=<shell-quoted value>` line per argument, for the launcher to `eval`; an unknown key, a word
without `=` or a missing required key is an error on stderr naming the known keys (exit 2).
"""
from __future__ import annotations

import shlex
import sys

from .exits import run_cli


class KeyValueError(ValueError):
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


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2:
        print('usage: python -m stage_a.key_values "<known keys>" "<required keys>" key=value ...', file=sys.stderr)
        return 2
    def body() -> int:
        for key, value in parse_key_values(argv[2:], argv[0].split(), argv[1].split()).items():
            print(f"{key}={shlex.quote(value)}")
        return 0
    return run_cli(body)


if __name__ == "__main__":
    sys.exit(main())
