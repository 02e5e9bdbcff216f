"""The one base of every error a user can cause and fix (a wrong path, a damaged file, an out-of-range setting):
its message names the file or value and what to do. qc_core.exits turns it (and OSError) into `error: …` and exit
2; anything else is a bug and keeps its traceback (exit 1). Pure."""
from __future__ import annotations


class UserError(ValueError):
    """An error the user can fix; the message says how. (A ValueError too, so a caller that catches ValueError around
    a parse keeps working.)"""
