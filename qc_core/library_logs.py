"""Quiet logs: what ms-swift, transformers and the libraries under them print (INFO and WARNING lines, deprecation
warnings, weight-loading bars) goes to a log file instead of the terminal, so a launcher's output is the project's own
lines (a day's judge.sh printed 42 library lines of 75). Pure (stdlib logging only): the adapters that import the
libraries call `route_library_logs` once before and once after the import (ms-swift and transformers add their own
terminal handlers when first imported).

The file: $GROUP_QC_LIBRARY_LOG, which scripts/launcher.sh sets to a file in the run's output folder unless
verbose=1 is given; unset (a python -m command run by hand, the tests), nothing is rerouted."""
from __future__ import annotations

import logging
import os

ENV = "GROUP_QC_LIBRARY_LOG"
LIBRARIES = ("swift", "transformers", "modelscope", "peft", "accelerate", "torch", "datasets", "py.warnings")
_handlers: dict[str, logging.Handler] = {}


def library_log() -> str | None:
    """The file the libraries' lines go to, or None when they print as they always do."""
    return os.environ.get(ENV) or None


def route_library_logs() -> str | None:
    """Every library logger's terminal handler replaced by the log file's (idempotent: call it before and after
    importing a library); Python warnings go there too. Returns the file, or None when not routed."""
    path = library_log()
    if path is None:
        return None
    handler = _handlers.get(path)
    if handler is None:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        handler = logging.FileHandler(path, mode="a", encoding="utf-8", delay=True)
        handler.setFormatter(logging.Formatter("%(asctime)s [%(levelname)s:%(name)s] %(message)s"))
        _handlers[path] = handler
    logging.captureWarnings(True)
    for name in LIBRARIES:
        logger = logging.getLogger(name)
        for h in list(logger.handlers):
            if h is not handler and type(h) is logging.StreamHandler:
                logger.removeHandler(h)
        if handler not in logger.handlers:
            logger.addHandler(handler)
        logger.propagate = False
    return path
