"""The interpreter's folders, reached by a student uid that may not enter the folders above them.

Where a student process drops to a uid of its own without a mount namespace (``landlock+seccomp``: root with
Docker's capabilities), it reads Python by the names the grader read it by.  A pyenv under ``/root`` (mode 0700)
or a checkout's ``.venv`` inside a private folder (``mktemp -d``) cannot be entered by that uid: every module not
loaded before the fork (``import wave``) would fail to import, and correct code would lose points, blamed on it.

Before the uid switch, :func:`open_unreachable` opens each such folder (``O_PATH``), as the grader; the student
process then reaches it through ``/proc/self/fd/<n>``, which enters the folder without searching those above it.
It reaches exactly the folders it would read in a mount namespace's view; Landlock still decides what it reads,
on the real files (:func:`alias` names them for its rules).  :func:`reroute_imports` points the import system and
the loaded modules there.  Nothing changes where every folder is enterable (the Gradescope image, a user's own
home): the grades and feedback are the same ones.
"""

from __future__ import annotations

import os
import stat
import sys
from typing import Iterable

#: Each folder opened, as the grader named it (and as its real path), with the descriptor that reaches it.
_OPENED: dict[str, int] = {}


def enterable_by_others(path: str) -> bool:
    """Whether a uid that owns nothing here (and is in none of its groups) can list ``path``: every folder on the
    way searchable by others, the folder itself readable too."""
    chain, folder = ["/"], "/"
    for part in os.path.realpath(path).strip("/").split("/"):
        if part:
            folder = os.path.join(folder, part)
            chain.append(folder)
    mode = 0
    for folder in chain:
        try:
            mode = os.stat(folder).st_mode
        except OSError:
            return False
        if not mode & stat.S_IXOTH:
            return False
    return bool(mode & stat.S_IROTH)


def open_unreachable(folders: Iterable[str]) -> None:
    """Open each of ``folders`` that :func:`enterable_by_others` denies (call as the grader, before the uid switch).
    Idempotent in one process."""
    for folder in folders:
        real = os.path.realpath(folder)
        if real in _OPENED or not os.path.isdir(real) or enterable_by_others(real):
            continue
        fd = os.open(real, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        _OPENED[real] = _OPENED[folder] = fd


def alias(path: str) -> str:
    """``path`` as this process reaches it: through the descriptor of the deepest opened folder that holds it,
    else unchanged."""
    best = ""
    for folder in _OPENED:
        if (path == folder or path.startswith(folder.rstrip("/") + "/")) and len(folder) > len(best):
            best = folder
    if not best:
        return path
    return f"/proc/self/fd/{_OPENED[best]}{path[len(best):]}"


def reroute_imports() -> None:
    """Point ``sys.path``, every loaded package's ``__path__`` and every loaded module's ``__file__`` through the
    opened folders (after the uid switch, before any student line)."""
    if not _OPENED:
        return
    sys.path[:] = [alias(entry) for entry in sys.path]
    sys.path_importer_cache.clear()
    for module in list(sys.modules.values()):
        names = getattr(module, "__dict__", None)  # read as a dict: a module's __getattr__ may do anything
        if not isinstance(names, dict):
            continue
        found = names.get("__path__")
        if isinstance(found, list):
            found[:] = [alias(entry) for entry in found]  # the spec's submodule_search_locations is this list
        elif type(found).__name__ == "_NamespacePath" and isinstance(vars(found).get("_path"), list):
            found._path[:] = [alias(entry) for entry in found._path]
        if isinstance(names.get("__file__"), str):
            names["__file__"] = alias(names["__file__"])
