"""One mapping from what can go wrong to a message and an exit status, for every group-qc command. Pure.

    1    a bug: anything not below keeps its traceback (Python's own exit status for an uncaught exception)
    2    an error the user can fix (qc_core.errors.UserError, or OSError: a missing path, a full disk): the message
         names the file or value and what to do (no traceback)
    3    another process holds the output lock
    130  interrupted (Ctrl-C, or SIGTERM): a short line instead of a torch traceback
"""
from __future__ import annotations

import signal
import sys
from typing import Callable

from .errors import UserError
from .jsonl import LockedError

EXIT_ERROR, EXIT_LOCKED, EXIT_INTERRUPTED = 2, 3, 130


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def run_cli(body: Callable[[], int], *, on_interrupt: str = "interrupted") -> int:
    """Runs a command's body; expected failures become one `error: …` line and an exit status. SIGTERM is
    handled like Ctrl-C, so a stopped run ends the same way (files are flushed line by line, and a torn last
    line is repaired on resume)."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return body()
    except LockedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_LOCKED
    except KeyboardInterrupt:
        print(f"\n{on_interrupt}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (UserError, OSError) as exc:   # OSError: a missing path, a full disk, a file removed under us
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    finally:
        signal.signal(signal.SIGTERM, previous)
