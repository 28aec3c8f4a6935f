"""What a built artefact in ``dist/`` was built from, and whether it is stale now.

Each packaging command (``make autograder``, ``make otter``, ``make prairielearn``, ``make classroom``) records
beside its artefact a small ``<artefact>.built.json``: a digest of each part of the sources it packs (the
handout folder, the grader, the reference solution, the package's pins), when it was built, and the command that
rebuilds it.  ``make student`` (:mod:`autograder.packaging.student`) compares those digests with the sources now
and names every artefact they no longer match.  The digests hash bytes, not behaviour: a docstring edited
in a check is what students read in the zip, so the zip is stale.

An artefact built before these records existed has none: it is judged by modification times (its newest file
against the newest source file), which a ``git checkout`` can fool, so the line says which test it used.

The record lies beside the artefact, never inside it: the Classroom folder is a repository students clone.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from autograder import ROOT
from autograder.engine import fingerprint

SUFFIX = ".built.json"
#: The artefacts a checkout's ``make`` targets build (path relative to the root -> its target).
DEFAULTS = {"dist/autograder.zip": "autograder", "dist/otter-autograder.zip": "otter",
            "dist/prairielearn": "prairielearn", "dist/classroom": "classroom"}
#: Files under the source folders that are no source (caches a run leaves behind).
IGNORED_PARTS = {"__pycache__", ".pytest_cache", ".ipynb_checkpoints", ".hypothesis"}


def source_parts(root: Path = ROOT) -> dict[str, list[Path]]:
    """What every artefact packs, by part: named as the stale line names it."""
    def files(folder: str) -> list[Path]:
        return sorted(path for path in (root / folder).rglob("*")
                      if path.is_file() and not IGNORED_PARTS & set(path.relative_to(root).parts)
                      and path.suffix not in (".pyc", ".pyo"))

    return {"assignment/": files("assignment"), "autograder/": files("autograder"),
            "solutions/": files("solutions"), "pyproject.toml": [root / "pyproject.toml"]}


def digests(root: Path = ROOT) -> dict[str, str]:
    """Each part's digest (bytes and paths: a file added, removed or renamed counts)."""
    return {part: fingerprint.digest(paths, {"paths": [p.relative_to(root).as_posix() for p in paths]})
            for part, paths in source_parts(root).items()}


def record_path(artefact: Path) -> Path:
    return artefact.with_name(artefact.name + SUFFIX)


def rebuild_command(artefact: Path, target: str, module: str, argv: list[str], **make_vars: str) -> str:
    """``make TARGET VAR=value`` when ``artefact`` is where that target writes, else the module's own command."""
    try:
        default = DEFAULTS.get(artefact.resolve().relative_to(ROOT.resolve()).as_posix()) == target
    except ValueError:
        default = False
    if default:
        return " ".join([f"make {target}", *(f"{k}={shlex.quote(v)}" for k, v in make_vars.items() if v)])
    return " ".join(["python -m", module, *map(shlex.quote, argv)])


def record(artefact: Path, rebuild: str, root: Path = ROOT) -> Path:
    """Write ``artefact``'s record: what it was built from and how to build it again."""
    path = record_path(artefact)
    data = {"artefact": artefact.name, "rebuild": rebuild, "built": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "sources": digests(root)}
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


@dataclass(frozen=True)
class Stale:
    artefact: Path
    line: str  # what is stale, against what, and the command that rebuilds it


def _newest(paths: list[Path]) -> tuple[float, Path | None]:
    found = [(path.stat().st_mtime, path) for path in paths if path.is_file()]
    return max(found, default=(0.0, None))


def shown(path: Path, root: Path = ROOT) -> str:
    """``path`` as a TA reads it in a message: relative to ``root`` where it is below it."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def check(artefact: Path, target: str | None = None, root: Path = ROOT) -> Stale | None:
    """Whether ``artefact`` (a zip or a folder) is older than its sources; None when current or absent."""
    if not artefact.exists():
        return None
    name = shown(artefact, root)
    try:
        data = json.loads(record_path(artefact).read_text(encoding="utf-8"))
        recorded, rebuild, built = dict(data["sources"]), str(data["rebuild"]), str(data["built"])
    except (OSError, ValueError, KeyError, TypeError):
        data = None
    if data is not None:
        changed = [part for part, digest in digests(root).items() if recorded.get(part) != digest]
        if not changed:
            return None
        return Stale(artefact, f"{name} is older than {' and '.join(changed)} (built {built}): run {rebuild}")
    # no record (built before records existed): modification times, said as such
    files = [p for p in artefact.rglob("*") if p.is_file()] if artefact.is_dir() else [artefact]
    built_at, _ = _newest(files)
    newest_at, newest = _newest([p for paths in source_parts(root).values() for p in paths])
    if newest is None or newest_at <= built_at:
        return None
    command = f"make {target}" if target else "its packaging command"
    return Stale(artefact, f"{name} is older than {shown(newest, root)} (by modification time: it has no "
                           f"{SUFFIX} record): run {command}")


def stale(dist: Path | None = None, root: Path = ROOT) -> list[Stale]:
    """Every stale artefact in ``dist`` (default ``root/dist``): the default ones and any other with a record."""
    dist = dist or root / "dist"
    found = {dist / Path(rel).name: target for rel, target in DEFAULTS.items()}
    if dist.is_dir():
        for path in sorted(dist.glob(f"*{SUFFIX}")):
            found.setdefault(path.with_name(path.name[:-len(SUFFIX)]), None)
    return [s for s in (check(path, target, root) for path, target in found.items()) if s is not None]
