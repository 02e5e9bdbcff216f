"""Crash-safe JSONL primitives shared by every writer and reader in group-qc. Pure (stdlib only).

Invariants: a record is one `write()` of a whole line ending in "\n", flushed at once, so a killed
process can leave at most one torn line, always the last; `repair_torn_tail` removes it before
anything is appended; readers treat a torn last line as absent and any other bad line as an error
that names the file and line. A line over MAX_LINE_BYTES or nested deeper than MAX_DEPTH is refused before it is
parsed (100,000 nested brackets would end the parser in a RecursionError): no record group-qc writes comes near.
"""
from __future__ import annotations

import codecs
import errno
import fcntl
import json
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Mapping
from typing import Any, Callable, Iterator

from .errors import UserError


class JsonlError(UserError):
    """A JSONL file that cannot be read as records (names the file and line)."""


class LockedError(RuntimeError):
    """Another process holds the output lock."""


class OutputError(OSError):
    """An output file that cannot be written, or that vanished under the writer (names the file and what to do)."""


RESUME = "rerun the same command to resume (every group already in the file is kept)"

MAX_LINE_BYTES = 64 * 2**20   # a Stage-A record of 200 photos x 8,192 tokens is under 10 MiB
MAX_BLANK_LINES = 1_000_000   # blank lines a reader skips before it calls the file no JSONL any command wrote
MAX_DEPTH = 64                # group-qc's records nest a few levels deep
_STRINGS = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKETS = re.compile(rb"[\[\]{}]")


def line_problem(raw: bytes) -> str | None:
    """Why a line is no record any reader should parse (too long, nested too deep), or None. Cheap: a line with
    fewer than MAX_DEPTH opening brackets is never scanned."""
    if len(raw) > MAX_LINE_BYTES:
        return f"a line of {len(raw):,} bytes, over the {MAX_LINE_BYTES:,} a record may take"
    if raw.count(b"[") + raw.count(b"{") <= MAX_DEPTH:
        return None
    depth = 0
    for bracket in _BRACKETS.findall(_STRINGS.sub(b"", raw)):   # brackets inside strings do not nest
        depth += 1 if bracket in b"[{" else -1
        if depth > MAX_DEPTH:
            return f"JSON nested more than {MAX_DEPTH} deep, which no record is"
    return None


def dumps_line(record: Mapping[str, Any]) -> str:
    # ensure_ascii=False: Chinese stays readable in `tail -f` and editors.
    return json.dumps(record, ensure_ascii=False) + "\n"


OUTPUT_REMEDY = "Fix or remove that line, or start fresh with --overwrite."   # a command resuming its own output
# any other reader: the command that reads a file cannot write it afresh, so --overwrite there would fix nothing
READ_REMEDY = "Fix or remove that line, or write the file again with the command that made it."


def iter_jsonl(path: str | os.PathLike, *, allow_torn_tail: bool = True,
               on_torn: Callable[[str], None] | None = None, remedy: str = READ_REMEDY) -> Iterator[tuple[int, dict]]:
    """Yield (line number, object). A final line without "\n" that does not parse is a torn write
    from a killed run: skipped when allow_torn_tail (and reported to `on_torn`, with file and line, for
    readers of finished files), else an error, ending with `remedy` (what the reader's user can do: a command without
    --overwrite says its own). Blank lines and a leading UTF-8 BOM are skipped."""
    path = Path(path)
    with path.open("rb") as f:   # streamed: a reader holds one line at a time, whatever the file's size
        line_no, blank = 0, 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            line_no += 1
            if line_no == 1 and raw.startswith(codecs.BOM_UTF8):   # an editor's BOM is no part of the first record
                raw = raw[len(codecs.BOM_UTF8):]
            last = not raw.endswith(b"\n")   # only the file's final segment lacks its "\n"
            if len(raw) > MAX_LINE_BYTES:   # read no further than the bound: its length is unknown and needs no reading
                raise JsonlError(f"{path}:{line_no}: a line of over {MAX_LINE_BYTES:,} bytes, the most a record may "
                                 f"take. {remedy}")
            if not raw.strip():
                blank += 1
                if blank > MAX_BLANK_LINES:
                    raise JsonlError(f"{path}: over {MAX_BLANK_LINES:,} blank lines by line {line_no:,}: not a file a "
                                     f"command wrote. {remedy}")
                continue
            raw = raw.rstrip(b"\n")
            problem = line_problem(raw)
            if problem:   # never parsed: not even as a torn tail, which is a short prefix of a record
                raise JsonlError(f"{path}:{line_no}: {problem}. {remedy}")
            try:
                obj = json.loads(raw.decode("utf-8"))
                if not isinstance(obj, dict):
                    raise ValueError("not a JSON object")
            except (ValueError, UnicodeDecodeError) as exc:
                if last and allow_torn_tail:
                    if on_torn:
                        on_torn(f"{path}:{line_no}: torn last line skipped ({exc}); a Stage-A run was killed while "
                                f"writing it: rerun that Stage-A command to resume, which repairs the file")
                    continue
                where = "torn last line (killed writer?)" if last else "malformed line"
                raise JsonlError(f"{path}:{line_no}: {where}: {exc}. {remedy}") from None
            yield line_no, obj


def repair_torn_tail(path: str | os.PathLike) -> int:
    """Make `path` end at a line boundary. A complete object missing only its "\n" gets one;
    a torn fragment is cut off. Returns the number of bytes removed."""
    path = Path(path)
    if not path.exists():
        return 0
    with path.open("r+b") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        if size == 0:
            return 0
        # Scan backwards in blocks for the last "\n".
        pos, tail = size, b""
        while pos > 0:
            step = min(65536, pos)
            pos -= step
            f.seek(pos)
            block = f.read(step)
            tail = block + tail
            nl = block.rfind(b"\n")
            if nl >= 0:
                cut = pos + nl + 1
                break
        else:
            cut = 0
        fragment = tail[len(tail) - (size - cut):] if size > cut else b""
        if not fragment:
            return 0
        problem = line_problem(fragment)
        if problem:   # not a torn write of ours: refused, never cut
            f.seek(0)
            line = f.read(cut).count(b"\n") + 1
            raise JsonlError(f"{path}:{line}: {problem}. Remove that line (or start fresh with --overwrite).")
        try:
            json.loads(fragment.decode("utf-8"))
            f.seek(size)
            f.write(b"\n")
            return 0
        except (ValueError, UnicodeDecodeError):
            f.truncate(cut)
            return size - cut


class JsonlAppender:
    """Append whole lines; each `write` is flushed before it returns (visible to `tail -f`). After each write
    the path must still be the file this writer opened: deleted or replaced by another program, the lines
    would go to an unlinked file and be lost while the run reported them written."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        repair_torn_tail(self.path)
        self._f = self.path.open("a", encoding="utf-8")
        st = os.fstat(self._f.fileno())
        self._identity = (st.st_dev, st.st_ino)

    def write(self, record: Mapping[str, Any]) -> None:
        try:
            self._f.write(dumps_line(record))
            self._f.flush()
        except OSError as exc:
            raise OutputError(exc.errno, f"cannot write to {self.path}: {exc.strerror or exc}; free space or fix "
                                         f"the folder, then {RESUME}") from None
        self._check_still_there()

    def _check_still_there(self) -> None:
        try:
            st = os.stat(self.path)
            same = (st.st_dev, st.st_ino) == self._identity
        except FileNotFoundError:
            same = False
        if not same:
            raise OutputError(errno.ENOENT, f"{self.path} was deleted or replaced while this run was writing it, so "
                                            f"the groups written since are not in it (another program did this: "
                                            f"group-qc's own writers exclude each other); {RESUME}")

    def close(self) -> None:
        if self._f.closed:
            return
        try:
            self._f.flush()
            os.fsync(self._f.fileno())
        except OSError as exc:
            if sys.exc_info()[0] is None:   # not already failing: say which file
                raise OutputError(exc.errno, f"cannot write to {self.path}: {exc.strerror or exc}; free space or "
                                             f"fix the folder, then {RESUME}") from None
        finally:
            try:
                self._f.close()
            except OSError:
                pass   # the failed flush is reported above (or by the write that failed first)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_json_file(path: Path, what: str, missing: str, error: type[Exception]) -> Any:
    """A JSON document's content, or `error` naming the file: "<what> <path> does not exist<missing>" (`missing` says
    what to do), or "cannot read <what> <path>: …" for a file that does not read or parse."""
    if not path.is_file():
        raise error(f"{what} {path} does not exist{missing}")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:
        raise error(f"cannot read {what} {path}: {exc}") from None


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Replace `path` with `text` all at once (temp file + rename): a reader never sees half a file, and a failed
    write leaves no temp file behind (the run record, each review page)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_jsonl_atomic(path: str | os.PathLike, records) -> int:
    """Replace `path` with `records` all at once (temp file + rename): readers never see half."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    n = 0
    try:
        with tmp.open("w", encoding="utf-8") as f:
            for record in records:
                f.write(dumps_line(record))
                n += 1
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)   # the old file stays whole; no half-written copy is left behind
        raise OutputError(exc.errno, f"cannot write {path}: {exc.strerror or exc}; it is unchanged: free space or "
                                     f"fix the folder, then {RESUME}") from None
    except UnicodeEncodeError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: record {n + 1} holds text that is not valid Unicode ({exc.reason}, "
                         f"e.g. a lone surrogate from a damaged file); {path} is unchanged") from None
    return n


@contextmanager
def output_lock(target: str | os.PathLike, *, shared: bool = False):
    """Hold `<target>.lock` for the duration, refusing at once (never queueing) when another process holds it
    in a conflicting way: any number of shared holders (the shards of one mission) or one exclusive holder
    (an unsharded run, a merge, one shard's part file)."""
    lock_path = Path(f"{target}.lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.EACCES):
                raise
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            raise LockedError(
                f"{target} is being written by another process ({f'pid {holder}' if holder else 'sharded runs'}); "
                f"wait for it to finish or stop it. Sharded and unsharded runs of one mission, and a merge, never "
                f"overlap; different shards must use --num_shards/--shard_index.") from None
        if not shared:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the flock; the file itself stays (harmless, reusable)


def record_digest(record: dict) -> str:
    """sha256 of one JSONL record's content (canonical JSON: sorted keys, no spaces), whatever its line's formatting:
    what a reviewer's decision names of the group it saw, so that lines appended to its file later leave it valid."""
    import hashlib
    text = json.dumps(record, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_sha256(path) -> str:
    """sha256 of a file's bytes, read in blocks (a decision names the file a review page was made from by it)."""
    import hashlib
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
