"""Similarity fingerprints kept in the grader's cache folder, by content.

Lexing a file (copydetect's pygments tokenizer) costs more than a single submission's whole comparison, and the
reference solution, torch's scaler and the skeleton's boilerplate are the same files run after run.  Each result
is kept under sha256 of everything it depends on: the parts the caller names (the code, the boilerplate removed),
the code that computes it (``similarity.py``, ``similarity_data.py``, copydetect's ``utils.py``) and
:data:`FORMAT`.  Kept in the plan cache's folder (:func:`autograder.settings.plan_cache`: 0700, files written
atomically, 0600: :func:`autograder.engine.files.read_private`); a file that is not this user's alone, or not such a record, is ignored and written again; no usable
folder costs only the time.  Nothing here decides a grade: a fingerprint only feeds the similarity report.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
from pathlib import Path
from typing import Callable

import numpy as np

from autograder import settings
from autograder.engine.files import read_private, write_bytes_atomic

#: Bumped when what a record holds changes.
FORMAT = 1
_HERE = Path(__file__).resolve().parent


def _code_bytes() -> bytes:
    spec = importlib.util.find_spec("copydetect")  # found, not imported (its package imports matplotlib)
    folders = list(spec.submodule_search_locations or ()) if spec else []
    files = [_HERE / "similarity.py", _HERE / "similarity_data.py", *(Path(f) / "utils.py" for f in folders)]
    return b"".join(path.read_bytes() if path.is_file() else b"missing" for path in files)


_CODE: list[bytes] = []


def key(kind: str, *parts: bytes) -> str:
    """The record's name for ``kind`` computed from ``parts``."""
    if not _CODE:
        _CODE.append(_code_bytes())
    hashed = hashlib.sha256(f"{kind} {FORMAT}\0".encode() + _CODE[0])
    for part in parts:
        hashed.update(len(part).to_bytes(8, "little") + part)
    return f"{kind}-{hashed.hexdigest()[:40]}"


def remembered(name: str, make: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The arrays kept as ``name`` (:func:`key`), else ``make()``'s, kept for the next time."""
    path = settings.plan_cache() / f"{name}.npz"
    data = read_private(path)
    if data is not None:
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as kept:
                return {field: kept[field] for field in kept.files}
        except (OSError, ValueError, KeyError):
            pass
    made = make()
    buffer = io.BytesIO()
    np.savez(buffer, **made)
    try:
        write_bytes_atomic(path, buffer.getvalue(), private=True)
    except OSError:
        pass
    return made
