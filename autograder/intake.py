"""Find a submission's contract files in a folder or zip and stage them safely.

Nothing from a submission is extracted by its own path name: only the bytes of the
contract files (``loss_scaler.py``, ``amp_step.py``, ``answers.py``) are copied,
by their contract names, into a fresh staging folder.  That rules out zip slip
(``../`` paths), absolute paths and symlinks pointing outside; sizes are capped
before reading, which defuses zip bombs and huge files.  Each problem becomes a
note for the student instead of an exception.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from checks.harness import CONTRACT_FILES

WANTED = tuple(CONTRACT_FILES.values())
MAX_FILE_BYTES = 1 * 2**20
MAX_MEMBERS = 10_000
MAX_DEPTH = 16  # folders deeper than this are not searched (os.walk recurses: 1000 levels crash it)
IGNORED_PARTS = {"__MACOSX", "__pycache__", ".git", ".ipynb_checkpoints"}
_COPY_SUFFIX = re.compile(r"^(?P<stem>.+?)(?:\s*\(\d+\)|-\d+|_\d+| copy)?\.py(?:\.txt)?$", re.IGNORECASE)


class IntakeError(Exception):
    """The submission cannot be read at all (message for the student)."""


@dataclass
class Staged:
    """Contract files copied into ``folder``; ``notes`` explain anything unusual."""

    folder: Path
    found: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _contract_name(filename: str) -> tuple[str | None, bool]:
    """(contract name, exact?) for a file name, accepting near misses like ``Loss_Scaler (1).py``."""
    if filename in WANTED:
        return filename, True
    match = _COPY_SUFFIX.match(filename)
    if match:
        guess = match.group("stem").strip().lower().replace(" ", "_") + ".py"
        if guess in WANTED:
            return guess, False
    return None, False


def _choose(candidates: dict[str, list[tuple[int, bool, str, object]]], staged: Staged,
            read: "callable[[object], bytes | None]") -> None:  # type: ignore[valid-type]
    for name in WANTED:
        options = sorted(candidates.get(name, []), key=lambda c: (not c[1], c[0], c[2]))
        if not options:
            continue
        depth, exact, shown, handle = options[0]
        data = read(handle)
        if data is None:
            staged.notes.append(f"{shown} was skipped: larger than {MAX_FILE_BYTES // 1024} KiB.")
            continue
        target = staged.folder / name
        target.write_bytes(data)
        target.chmod(0o644)
        staged.found.append(name)
        if not exact:
            staged.notes.append(f"Used {shown} as {name}; please name the file exactly {name}.")
        elif depth > 0:
            staged.notes.append(f"Found {name} inside a folder ({shown}); upload it at the top level next time.")
        if len(options) > 1:
            others = ", ".join(o[2] for o in options[1:4])
            staged.notes.append(f"Several files could be {name}; graded {shown}, ignored {others}.")


def _from_folder(root: Path, staged: Staged) -> list[Path]:
    candidates: dict[str, list[tuple[int, bool, str, object]]] = {}
    zips: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_PARTS)
        depth = len(Path(dirpath).relative_to(root).parts)
        if depth >= MAX_DEPTH:
            dirnames[:] = []
        for filename in sorted(filenames):
            path = Path(dirpath) / filename
            info = path.lstat()
            shown = str(path.relative_to(root))
            name, exact = _contract_name(filename)
            if stat.S_ISLNK(info.st_mode):
                if name:
                    staged.notes.append(f"{shown} is a symbolic link and was ignored; upload the file itself.")
                continue
            if filename.lower().endswith(".zip") and stat.S_ISREG(info.st_mode):
                zips.append(path)
            if name and stat.S_ISREG(info.st_mode):
                candidates.setdefault(name, []).append((depth, exact, shown, path))

    def read(handle: object) -> bytes | None:
        path = Path(str(handle))
        if path.lstat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_bytes()

    _choose(candidates, staged, read)
    return zips


def _from_zip(archive: Path, staged: Staged) -> None:
    try:
        with zipfile.ZipFile(archive) as bundle:
            members = bundle.infolist()
            if len(members) > MAX_MEMBERS:
                raise IntakeError(f"{archive.name} holds {len(members)} entries; that is not a submission.")
            candidates: dict[str, list[tuple[int, bool, str, object]]] = {}
            for member in members:
                path = PurePosixPath(member.filename.replace("\\", "/"))
                if member.is_dir() or any(part in IGNORED_PARTS for part in path.parts):
                    continue
                name, exact = _contract_name(path.name)
                if not name:
                    continue
                if stat.S_ISLNK(member.external_attr >> 16):
                    staged.notes.append(f"{member.filename} in {archive.name} is a symbolic link and was ignored.")
                    continue
                if path.is_absolute() or ".." in path.parts:
                    staged.notes.append(f"{member.filename} in {archive.name} has an unsafe path; read as {path.name}.")
                candidates.setdefault(name, []).append((len(path.parts) - 1, exact, member.filename, member))

            def read(handle: object) -> bytes | None:
                member = handle  # type: ignore[assignment]
                if member.file_size > MAX_FILE_BYTES:  # type: ignore[attr-defined]
                    return None
                with bundle.open(member) as stream:  # type: ignore[arg-type]
                    data = stream.read(MAX_FILE_BYTES + 1)
                return None if len(data) > MAX_FILE_BYTES else data

            _choose(candidates, staged, read)
    except IntakeError:
        raise
    except Exception as exc:  # noqa: BLE001 - BadZipFile, zlib.error, lzma.LZMAError, struct.error...: hostile input
        raise IntakeError(f"{archive.name} is not a readable zip archive ({type(exc).__name__}: {exc}).") from None


def stage(submission: Path, workdir: Path | None = None) -> Staged:
    """Copy the contract files of ``submission`` (folder or .zip) into a new staging folder.

    Raises:
        IntakeError: if ``submission`` does not exist or is an unreadable archive.
    """
    if not submission.exists():
        raise IntakeError(f"{submission} does not exist.")
    folder = Path(tempfile.mkdtemp(prefix="amp-submission-", dir=workdir))
    folder.chmod(0o755)
    staged = Staged(folder)
    try:
        if submission.is_dir():
            zips = _from_folder(submission, staged)
            if not staged.found and zips:
                _from_zip(zips[0], staged)
                staged.notes.append(f"Read your files from {zips[0].name}.")
        elif zipfile.is_zipfile(submission):
            _from_zip(submission, staged)
        elif submission.suffix.lower() == ".zip":
            raise IntakeError(f"{submission.name} is not a readable zip archive.")
        else:
            raise IntakeError(f"{submission.name} is neither a folder nor a zip archive.")
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # no staging folder left behind
        raise
    missing = [name for name in WANTED if name not in staged.found and name != "answers.py"]
    if missing:
        staged.notes.append("Missing: " + ", ".join(missing) + ". The tests that need them score 0.")
    return staged
