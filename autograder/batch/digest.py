"""A submission's content digest: what a batch compares to know whether it changed since it was graded.

The ledger (:mod:`autograder.batch.ledger`) keys each grade by it: names and bytes, never paths or times (a copy
of a folder has the digest of the original).
"""

from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path
from typing import Any

from autograder.engine import intake

HASH_WHOLE_FILE_BYTES = 64 * 2**20
#: Entries neither a digest nor the batch's discovery of submissions (:mod:`autograder.batch.inputs`) looks at.
IGNORED = {"__MACOSX", "__pycache__", ".git", ".ipynb_checkpoints", ".DS_Store"}


def content_digest(path: Path) -> str:
    """A hash of everything a submission holds: its file tree (names, links, bytes) or zip.

    Files over 64 MiB are hashed by name, size and modification time only.
    """
    digest = hashlib.sha256()
    if path.is_file():
        _hash_file(digest, path, path.stat())
        return digest.hexdigest()
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        depth = len(Path(dirpath).relative_to(path).parts)
        # Intake does not look deeper either; os.walk recurses and a 1000-level tree would crash it.
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED) if depth < intake.MAX_DEPTH else []
        for filename in sorted(filenames):
            file = Path(dirpath) / filename
            relative = file.relative_to(path).as_posix()
            info = file.lstat()
            digest.update(b"\0name\0" + relative.encode("utf-8", "surrogateescape"))
            if stat.S_ISLNK(info.st_mode):
                digest.update(b"\0link\0" + os.readlink(file).encode("utf-8", "surrogateescape"))
            elif stat.S_ISREG(info.st_mode):
                _hash_file(digest, file, info)
    return digest.hexdigest()


def _hash_file(digest: Any, file: Path, info: os.stat_result) -> None:
    digest.update(f"\0size\0{info.st_size}".encode())
    if info.st_size > HASH_WHOLE_FILE_BYTES:
        digest.update(f"\0mtime\0{info.st_mtime_ns}".encode())
        return
    try:
        with open(file, "rb") as stream:
            for block in iter(lambda: stream.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        digest.update(f"\0unreadable\0{exc.errno}".encode())
