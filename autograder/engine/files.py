"""Atomic file writes and CSV text: light helpers (standard library only) shared by every writer.

A reader of any file written here sees either the previous version or the complete new one.
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any


def write_bytes_atomic(path: Path, data: bytes, private: bool = False) -> None:
    """Write ``data`` to ``path`` (mode 0644) via a synced temporary file and an atomic rename.

    ``private``: a cache file of the grader's (see :func:`read_private`): mode 0600 in a folder made 0700 when
    missing, not synced (losing one costs only the time to compute it again).
    """
    path.parent.mkdir(mode=0o700 if private else 0o777, parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # 0600
    try:
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
            if not private:
                stream.flush()
                os.fsync(stream.fileno())
        if not private:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_private(path: Path) -> bytes | None:
    """The bytes of the grader's cache file ``path`` (written with ``write_bytes_atomic(..., private=True)``), or
    None: missing, a link, or not a regular file of this user's that nobody else may read or write (someone
    else's file is neither trusted nor secret)."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(handle, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
            return None
        return stream.read()


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: Path, data: Any) -> None:
    """Write ``data`` as strict JSON (no NaN) to ``path`` atomically."""
    write_text_atomic(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def write_tree(out: Path, files: "list[tuple[str, str | bytes, int]]") -> Path:
    """Replace the folder ``out`` whole with ``files`` ((path relative to it, content, mode)); return ``out``.

    Written beside it first (``out.partial``), then renamed: a failed build leaves the last good folder.
    """
    import shutil

    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    for relative, data, mode in files:
        path = partial / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)
        path.chmod(mode)
    shutil.rmtree(out, ignore_errors=True)
    partial.rename(out)
    return out


def csv_text(header: list[str], rows: list[list[Any]]) -> str:
    """A CSV document (``\\n`` line ends) with ``header`` and ``rows``; no cell is a spreadsheet formula."""
    from autograder.engine.escape import csv_cell

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([csv_cell(cell) for cell in header])
    writer.writerows([csv_cell(cell) for cell in row] for row in rows)
    return buffer.getvalue()


def write_if_changed(path: Path, data: str | bytes) -> bool:
    """Atomically write ``data`` to ``path`` unless it already holds exactly that."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        if path.read_bytes() == raw:
            return False
    except OSError:
        pass
    write_bytes_atomic(path, raw)
    return True
