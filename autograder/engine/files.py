"""Atomic file writes and CSV text: light helpers (standard library only) shared by every writer.

A reader of any file written here sees either the previous version or the complete new one.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import stat
import tempfile
from pathlib import Path
from typing import Any, Callable, Sequence


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


def kill_uid(*uids: int) -> None:
    """Kill every process owned by each of ``uids`` (root only).

    Catches escapes from a process group.  SysV IPC objects need no removal: seccomp refuses the calls that make
    them at every level that has it (``syscalls.ALLOWED_SYSCALLS``), and under namespaces they die with the
    process's IPC namespace (at level ``none``, which seals nothing, one may outlive its process).  One
    short-lived child sends ``kill(-1)`` as each uid in turn, with that uid as its real and effective one:
    then no capability is in effect and the signal reaches exactly the processes whose real or saved uid is
    that uid (a child that kept root as its real or effective uid would reach the grader's own).  It keeps
    root only as its saved uid, to take the next uid.  One fork for the lot: forking the judge, which holds
    torch, costs milliseconds each time.  Where that child cannot do it, one child per uid takes the uid for good.
    """
    if os.geteuid() != 0:
        return
    if uids and not _exited_cleanly(_fork(lambda: _kill_each(uids))):
        for uid in uids:
            _exited_cleanly(_fork(lambda uid=uid: _kill_as(uid)))


def _kill_each(uids: Sequence[int]) -> None:
    for uid in uids:
        os.setresuid(uid, uid, 0)
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass  # none left
        os.setresuid(0, 0, 0)


def _kill_as(uid: int) -> None:
    os.setgid(uid)
    os.setuid(uid)
    os.kill(-1, signal.SIGKILL)


def _fork(body: Callable[[], None]) -> int:
    """The pid of a child that runs ``body``, then exits: 0 when it returned, 1 when it raised."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            body()
            status = 0
        finally:
            os._exit(status)
    return pid


def _exited_cleanly(pid: int) -> bool:
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


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
