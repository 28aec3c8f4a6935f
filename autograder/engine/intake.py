"""Find a submission's contract files in a folder or zip and stage them safely.

Nothing from a submission is extracted by its own path name: only the bytes of the
contract files (``loss_scaler.py``, ``amp_step.py``, ``answers.py``) are copied,
by their contract names, into a fresh staging folder.  That rules out zip slip
(``../`` paths), absolute paths and symlinks pointing outside; sizes are capped
before reading, which defuses zip bombs and huge files.  Each problem becomes a
note for the student instead of an exception.

Bounded: intake takes time linear in the number of entries, which is capped
(:data:`MAX_MEMBERS`) before any name is looked at; names longer than
:data:`MAX_NAME_CHARS` are skipped unread, and near-miss names are recognised without
regular expressions.  An optional ``deadline`` (the submission's time budget) stops it.
The staging folder is private (0700, files 0600; the sandbox lets only the student
process's own uid read it) and is removed on every exit path: on an exception here, and,
should the process be killed, by :func:`sweep_stale` in the next grading process.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from autograder.engine.strings import text

#: The contract's file names (``checks.runners.harness.CONTRACT_FILES``, which imports torch: the batch's main process
#: must not; a test keeps them equal).
WANTED = ("loss_scaler.py", "amp_step.py", "answers.py")
MAX_FILE_BYTES = 1 * 2**20
MAX_MEMBERS = 10_000
MAX_DEPTH = 16  # folders deeper than this are not searched (os.walk recurses: 1000 levels crash it)
MAX_NAME_CHARS = 255  # a file name longer than Linux allows is never a contract file
MAX_PATH_CHARS = 4096  # zip member paths longer than this are skipped unread
IGNORED_PARTS = {"__MACOSX", "__pycache__", ".git", ".ipynb_checkpoints"}
STAGING_PREFIX = "amp-submission-"
MAX_OTHERS_NAMED = 5  # other .py files named in the note about a missing contract file


class IntakeError(Exception):
    """The submission cannot be read at all (message for the student)."""


@dataclass
class Staged:
    """Contract files copied into ``folder``; ``notes`` explain anything unusual."""

    folder: Path
    found: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    notebooks: list[str] = field(default_factory=list)  # .ipynb files seen (the notebook edition's students)
    skipped: list[str] = field(default_factory=list)  # contract names whose file was found but not read (too large)
    others: list[str] = field(default_factory=list)  # other .py files seen, named when a contract file is missing


def _without_copy_suffix(stem: str) -> str:
    """``stem`` without one trailing " (2)", "-2", "_2" or " copy" (what browsers and OSes add to copies)."""
    if stem.endswith(")") and "(" in stem:
        head, _, number = stem[:-1].rpartition("(")
        if number.isdigit() and head:
            return head.rstrip()
    for separator in ("-", "_"):
        head, found, number = stem.rpartition(separator)
        if found and head and number.isdigit():
            return head
    if stem.lower().endswith(" copy") and len(stem) > 5:
        return stem[:-5]
    return stem


def _key(stem: str) -> str:
    """A stem's letters and digits, lower case, without one trailing "s": ``LossScaler``, ``loss-scalers`` and
    ``loss_scaler`` alike (case, camel case, hyphens, underscores, spaces, singular and plural)."""
    key = "".join(char for char in stem.lower() if char.isalnum())
    return key[:-1] if key.endswith("s") else key


#: near-miss key -> contract name
_KEYS = {_key(name[:-3]): name for name in WANTED}


def contract_name(filename: str) -> tuple[str | None, bool]:
    """(contract name, exact?) for a file name, accepting near misses like ``Loss_Scaler (1).py``,
    ``LossScaler.py``, ``amp-step.py`` or ``answer.py`` (graded with a note that names the file).

    Linear in the name's length (no regular expression: a backtracking one took minutes on
    long hostile names), and names over :data:`MAX_NAME_CHARS` are not looked at.
    """
    if len(filename) > MAX_NAME_CHARS:
        return None, False
    if filename in WANTED:
        return filename, True
    lower = filename.lower()
    suffix = ".py.txt" if lower.endswith(".py.txt") else ".py" if lower.endswith(".py") else ""
    if not suffix or len(filename) == len(suffix):
        return None, False
    stem = filename[: -len(suffix)]
    for candidate in (_without_copy_suffix(stem), stem):
        guess = _KEYS.get(_key(candidate))
        if guess:
            return guess, False
    return None, False


class _Clock:
    """Raises IntakeError once ``deadline`` (time.monotonic()) has passed; checked per entry."""

    def __init__(self, deadline: float | None) -> None:
        self.deadline = deadline

    def check(self) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise IntakeError(text("intake.too_slow"))


def _choose(candidates: dict[str, list[tuple[int, bool, str, object]]], staged: Staged,
            read: "callable[[object], bytes | None]") -> None:  # type: ignore[valid-type]
    for name in WANTED:
        options = sorted(candidates.get(name, []), key=lambda c: (not c[1], c[0], c[2]))
        if not options:
            continue
        depth, exact, shown, handle = options[0]
        data = read(handle)
        if data is None:
            staged.notes.append(text("intake.too_large", shown=shown, mib=MAX_FILE_BYTES / 2**20))
            staged.skipped.append(name)
            continue
        target = staged.folder / name
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as stream:
            stream.write(data)
        staged.found.append(name)
        if not exact:
            staged.notes.append(text("intake.renamed", shown=shown, name=name))
        elif depth > 0:
            staged.notes.append(text("intake.in_folder", name=name, shown=shown))
        if len(options) > 1:
            others = ", ".join(o[2] for o in options[1:4])
            staged.notes.append(text("intake.several", name=name, shown=shown, others=others))


def _from_folder(root: Path, staged: Staged, clock: _Clock) -> list[Path]:
    candidates: dict[str, list[tuple[int, bool, str, object]]] = {}
    zips: list[Path] = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        seen += len(dirnames) + len(filenames)
        if seen > MAX_MEMBERS:
            staged.notes.append(text("intake.too_many", limit=MAX_MEMBERS))
            break
        clock.check()
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_PARTS and len(d) <= MAX_NAME_CHARS)
        depth = len(Path(dirpath).relative_to(root).parts)
        if depth >= MAX_DEPTH:
            dirnames[:] = []
        for filename in sorted(f for f in filenames if len(f) <= MAX_NAME_CHARS):
            path = Path(dirpath) / filename
            info = path.lstat()
            shown = str(path.relative_to(root))
            name, exact = contract_name(filename)
            if stat.S_ISLNK(info.st_mode):
                if name:
                    staged.notes.append(text("intake.symlink", shown=shown))
                continue
            if filename.lower().endswith(".zip") and stat.S_ISREG(info.st_mode):
                zips.append(path)
            if filename.lower().endswith(".ipynb"):
                staged.notebooks.append(shown)
            if name and stat.S_ISREG(info.st_mode):
                candidates.setdefault(name, []).append((depth, exact, shown, path))
            elif filename.lower().endswith(".py") and len(staged.others) < MAX_OTHERS_NAMED:
                staged.others.append(shown)

    def read(handle: object) -> bytes | None:
        path = Path(str(handle))
        if path.lstat().st_size > MAX_FILE_BYTES:
            return None
        return path.read_bytes()

    _choose(candidates, staged, read)
    return zips


def _from_zip(archive: Path, staged: Staged, clock: _Clock) -> None:
    try:
        with zipfile.ZipFile(archive) as bundle:
            members = bundle.infolist()
            if len(members) > MAX_MEMBERS:
                raise IntakeError(text("intake.zip_too_many", archive=archive.name, count=len(members)))
            candidates: dict[str, list[tuple[int, bool, str, object]]] = {}
            too_long = 0
            for member in members:
                clock.check()
                if len(member.filename) > MAX_PATH_CHARS:
                    too_long += 1
                    continue
                path = PurePosixPath(member.filename.replace("\\", "/"))
                if member.is_dir() or any(part in IGNORED_PARTS for part in path.parts):
                    continue
                name, exact = contract_name(path.name)
                if path.name.lower().endswith(".ipynb"):
                    staged.notebooks.append(member.filename)
                if not name:
                    if path.name.lower().endswith(".py") and len(staged.others) < MAX_OTHERS_NAMED:
                        staged.others.append(member.filename)
                    continue
                if stat.S_ISLNK(member.external_attr >> 16):
                    staged.notes.append(text("intake.zip_symlink", member=member.filename, archive=archive.name))
                    continue
                if path.is_absolute() or ".." in path.parts:
                    staged.notes.append(text("intake.zip_unsafe", member=member.filename, archive=archive.name,
                                             name=path.name))
                candidates.setdefault(name, []).append((len(path.parts) - 1, exact, member.filename, member))

            def read(handle: object) -> bytes | None:
                member = handle  # type: ignore[assignment]
                if member.file_size > MAX_FILE_BYTES:  # type: ignore[attr-defined]
                    return None
                with bundle.open(member) as stream:  # type: ignore[arg-type]
                    data = stream.read(MAX_FILE_BYTES + 1)
                return None if len(data) > MAX_FILE_BYTES else data

            if too_long:
                staged.notes.append(text("intake.zip_long_names", count=too_long, archive=archive.name,
                                         limit=MAX_PATH_CHARS))
            _choose(candidates, staged, read)
    except IntakeError:
        raise
    except Exception as exc:  # noqa: BLE001 - BadZipFile, zlib.error, lzma.LZMAError, struct.error...: hostile input
        raise IntakeError(text("intake.zip_broken", archive=archive.name, error=f"{type(exc).__name__}: {exc}")) from None


def stage(submission: Path, workdir: Path | None = None, deadline: float | None = None) -> Staged:
    """Copy the contract files of ``submission`` (folder or .zip) into a new private staging folder.

    ``deadline`` (a ``time.monotonic()`` value) bounds the time spent.

    Raises:
        IntakeError: if ``submission`` does not exist, is an unreadable archive, or the deadline passed.
    """
    if not submission.exists():
        raise IntakeError(text("intake.not_found", submission=submission))
    folder = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{os.getpid()}-", dir=workdir))  # mode 0700
    staged = Staged(folder)
    clock = _Clock(deadline)
    try:
        if submission.is_dir():
            zips = _from_folder(submission, staged, clock)
            if not staged.found and zips:
                _from_zip(zips[0], staged, clock)
                staged.notes.append(text("intake.from_zip", archive=zips[0].name))
        elif zipfile.is_zipfile(submission):
            _from_zip(submission, staged, clock)
        elif submission.suffix.lower() == ".zip":
            raise IntakeError(text("intake.zip_unreadable", archive=submission.name))
        else:
            raise IntakeError(text("intake.not_submission", submission=submission.name))
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # no staging folder left behind
        raise
    missing = [name for name in WANTED if name not in staged.found and name not in staged.skipped]
    if missing:
        staged.notes.append(text("intake.missing", files=", ".join(missing)))
        if staged.others:  # what was there instead: the student sees which file to rename
            staged.notes.append(text("intake.found_instead", files=", ".join(staged.others), missing=missing[0]))
        if staged.notebooks:  # the notebook edition: its cells write the files; the notebook itself is not graded
            staged.notes.append(text("intake.notebook_not_files", notebook=staged.notebooks[0]))
    return staged


def sweep_stale(workdir: Path | None = None) -> None:
    """Remove staging folders left by grading processes that were killed (their pid is gone)."""
    parent = Path(workdir or tempfile.gettempdir())
    try:
        entries = list(parent.glob(STAGING_PREFIX + "*"))
    except OSError:
        return
    for entry in entries:
        pid = entry.name[len(STAGING_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # still running
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        if entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.geteuid():
            shutil.rmtree(entry, ignore_errors=True)
