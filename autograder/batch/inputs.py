"""What a batch run grades: submissions found in folders, zips and Gradescope exports.

Each path given on the command line is either **one submission** or a **batch** of them:

* a folder or zip that directly holds a contract file (``loss_scaler.py``, ``amp_step.py``,
  ``answers.py``) is one submission, and so is one that holds nothing but a single
  folder leading to one (``alice/hw/src/loss_scaler.py``);
* a folder or zip holding Gradescope's ``submission_metadata.yml`` is a Gradescope
  "Export Submissions" archive: each of its ``submission_NNN`` folders is a submission,
  and the metadata gives each one its students (name, SID, email);
* otherwise a folder or zip whose entries are several folders, or any zip, is a batch:
  each child folder or ``.zip`` is one submission (its files may sit anywhere inside it).
  GitHub Classroom's download is such a folder: one cloned repository per student, named
  ``<assignment>-<github username>`` (:mod:`autograder.batch.roster` names them from the roster).

A batch zip is unpacked (safely: no absolute or ``..`` paths, no links, size caps) into
``OUT/.inputs``; single submissions are never unpacked here (intake reads them).

This module imports neither torch nor pytest: the batch's main process stays light.
"""

from __future__ import annotations

import os
import shutil
import stat
import zipfile
import zlib
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Iterable

from autograder.batch.digest import IGNORED, content_digest
from autograder.batch.metadata import METADATA, Submitter, read_metadata
from autograder.engine import intake
from autograder.engine.strings import text

#: The contract's file names (``checks.runners.harness.CONTRACT_FILES``; a test keeps them equal).
CONTRACT_FILES = intake.WANTED
MAX_BATCH_MEMBERS = 200_000
MAX_BATCH_BYTES = 8 * 2**30
#: A submission's status when it is not graded (gradebook.csv's status column, machine-read: the same words in every
#: language): an upload that holds nothing to grade, and one of a SID that another submission of the run stands for.
NOTHING, SUPERSEDED = "nothing submitted", "superseded"
#: Which of several submissions of one SID in an export is graded (``--same-sid``); "all" grades each of them.
SAME_SID_CHOICES = ("latest", "earliest", "all")


@dataclass(frozen=True)
class Submission:
    """One submission to grade: ``name`` (unique in the run, used for OUT/<name>), the
    folder or zip to stage, where it came from, and its students when known."""

    name: str
    path: Path
    source: str
    submitters: tuple[Submitter, ...] = ()
    renamed_from: str = ""  # the name it would have had, taken by another submission of the run ("" when not)
    #: why it is not graded, listed apart with an empty score: :data:`NOTHING` (an empty upload), or
    #: :data:`SUPERSEDED` and the submission graded instead (another of the same SID); "" when it is graded
    withheld: str = ""
    created_at: str = ""  # when it was submitted (a Gradescope export's metadata), "" when unknown

    def identity(self) -> dict[str, str]:
        """Gradebook identity columns (several students are joined with "; ")."""
        return {key: "; ".join(getattr(s, key) for s in self.submitters if getattr(s, key))
                for key in ("name", "sid", "email")}


@dataclass
class Discovery:
    submissions: list[Submission] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def has_identity(self) -> bool:
        return any(s.submitters for s in self.submissions)


class InputError(Exception):
    """A command-line path cannot be used (message for the TA)."""


# --------------------------------------------------------------------------- names


def safe_name(text: str) -> str:
    base = "".join(c if c.isalnum() or c in "-_." else "_" for c in text).strip(".")
    return base or "submission"


def unique_name(base: str, taken: set[str]) -> str:
    name, counter = base, 1
    while name in taken:
        counter += 1
        name = f"{base}-{counter}"
    taken.add(name)
    return name


def stem(path: Path | PurePosixPath) -> str:
    return path.stem if path.suffix.lower() == ".zip" else path.name


def _submission(base: str, path: Path, source: str, taken: set[str], notes: list[str],
                submitters: tuple[Submitter, ...] = (), withheld: str = "", created_at: str = "") -> Submission:
    """A submission named ``base``, or ``base-2``... when that is taken (said in ``notes`` and kept in it)."""
    name = unique_name(base, taken)
    if name != base:
        notes.append(text("batch.renamed", source=source, name=name, base=base))
    return Submission(name, path, source, submitters, base if name != base else "", withheld, created_at)


# --------------------------------------------------------------------------- classification


def _is_contract(name: str) -> bool:
    return intake.contract_name(name)[0] is not None  # near misses too (LossScaler.py): intake grades them


def _visible(name: str) -> bool:
    return name not in IGNORED and not name.startswith(".")


def _folder_kind(folder: Path) -> tuple[str, Path]:
    """("single" | "batch", the folder whose children are the submissions)."""
    while True:
        try:
            entries = sorted(folder.iterdir())
        except OSError:
            return "single", folder
        names = [e.name for e in entries]
        if METADATA in names:
            return "batch", folder
        if any(_is_contract(n) for n in names):
            return "single", folder
        children = [e for e in entries if _visible(e.name) and _is_candidate(e)]
        if len(children) == 1 and children[0].is_dir():
            folder = children[0]  # a wrapper folder: look inside
            continue
        return ("batch" if len(children) > 1 else "single"), folder


def _is_candidate(path: Path) -> bool:
    try:
        info = path.lstat()
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) or (stat.S_ISREG(info.st_mode) and path.suffix.lower() == ".zip")


def _zip_members(archive: Path) -> list[zipfile.ZipInfo] | None:
    try:
        with zipfile.ZipFile(archive) as bundle:
            return bundle.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, ValueError, NotImplementedError):
        return None


def _parts(member: zipfile.ZipInfo) -> tuple[str, ...]:
    return tuple(p for p in PurePosixPath(member.filename.replace("\\", "/")).parts if p not in ("/", ""))


def _zip_kind(members: list[zipfile.ZipInfo]) -> str:
    """"single" or "batch" for a zip, by the same rules as for a folder."""
    entries = [(_parts(m), m.is_dir()) for m in members]
    entries = [(p, d) for p, d in entries if p and not any(part in IGNORED for part in p)]
    prefix: tuple[str, ...] = ()
    while True:
        level = [(p[len(prefix):], d) for p, d in entries if p[:len(prefix)] == prefix and len(p) > len(prefix)]
        files = {p[0] for p, d in level if len(p) == 1 and not d}
        if METADATA in files:
            return "batch"
        if any(_is_contract(n) for n in files):
            return "single"
        dirs = {p[0] for p, d in level if (len(p) > 1 or d) and _visible(p[0])} - files
        zips = {n for n in files if n.lower().endswith(".zip") and _visible(n)}
        if len(dirs) == 1 and not zips:
            prefix += (dirs.pop(),)
            continue
        return "batch" if len(dirs) + len(zips) > 1 else "single"


def extract_batch_zip(archive: Path, into: Path) -> Path:
    """Unpack a batch zip safely into ``into`` (reused when already complete); return it.

    Members with absolute or ``..`` paths and links are skipped; the number of members
    and the unpacked size are capped (zip bombs).

    Raises:
        InputError: if the archive cannot be read or is too large.
    """
    done = into / ".complete"
    if done.exists():
        return into
    shutil.rmtree(into, ignore_errors=True)
    partial = into.with_name(into.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        with zipfile.ZipFile(archive) as bundle:
            members = bundle.infolist()
            if len(members) > MAX_BATCH_MEMBERS:
                raise InputError(f"{archive} holds {len(members)} entries (at most {MAX_BATCH_MEMBERS}).")
            if sum(m.file_size for m in members) > MAX_BATCH_BYTES:
                raise InputError(f"{archive} unpacks to more than {MAX_BATCH_BYTES // 2**30} GiB.")
            written = 0
            for member in members:
                parts = _parts(member)
                mode = member.external_attr >> 16
                if (not parts or ".." in parts or member.filename.startswith(("/", "\\"))
                        or (len(parts[0]) == 2 and parts[0].endswith(":")) or stat.S_ISLNK(mode)
                        or any(p in IGNORED for p in parts)):
                    continue
                target = partial.joinpath(*parts)
                if member.is_dir():  # kept: an empty submission folder is a student's empty upload
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                with bundle.open(member) as source, open(target, "wb") as sink:
                    while True:
                        block = source.read(1 << 20)
                        if not block:
                            break
                        written += len(block)
                        if written > MAX_BATCH_BYTES:
                            raise InputError(f"{archive} unpacks to more than {MAX_BATCH_BYTES // 2**30} GiB.")
                        sink.write(block)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, NotImplementedError, RuntimeError,
            zlib.error) as exc:  # zlib.error: a corrupt deflate stream inside a member
        shutil.rmtree(partial, ignore_errors=True)
        raise InputError(f"{archive} cannot be unpacked ({type(exc).__name__}: {exc}).") from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    (partial / ".complete").write_text(str(archive) + "\n")
    partial.rename(into)
    return into


# --------------------------------------------------------------------------- discovery


def discover(paths: Iterable[Path], scratch: Path, exclude: Iterable[Path] = (),
             reserved: Iterable[str] = (), same_sid: str = "latest") -> Discovery:
    """Every submission named by ``paths`` (in the order given, children sorted by name).

    Batch zips are unpacked under ``scratch``; the folders in ``exclude`` (the output
    folder) are never taken for submissions, and no submission gets a name in ``reserved``.
    An upload that holds nothing to grade is found, withheld as :data:`NOTHING`; of several submissions of one SID
    in an export, ``same_sid`` (:data:`SAME_SID_CHOICES`) says which is graded, the others withheld as
    :data:`SUPERSEDED` (each told in ``notes``).

    Raises:
        InputError: if a path does not exist, a batch zip cannot be unpacked, or no path holds anything to grade.
    """
    found = Discovery()
    paths = list(paths)
    taken: set[str] = set(reserved)
    seen: set[Path] = set()
    skip = {Path(p).resolve() for p in exclude}
    for path in paths:
        path = Path(path)
        if not path.exists():
            raise InputError(f"no such file or folder: {path}")
        resolved = path.resolve()
        if resolved in seen:
            found.notes.append(f"{path} was given twice; graded once.")
            continue
        seen.add(resolved)
        kind, root, base, label = "single", resolved, resolved, str(path)
        if resolved.is_dir():
            kind, root = _folder_kind(resolved)
        elif resolved.suffix.lower() == ".zip" and (members := _zip_members(resolved)) is not None:
            if _zip_kind(members) == "batch":
                base = extract_batch_zip(resolved, scratch / f"{safe_name(stem(resolved))}-{content_digest(resolved)[:12]}")
                kind, root = _folder_kind(base)
                label = f"{path}:"
                if kind == "single":
                    root = resolved
        if kind == "single":
            found.submissions.append(_submission(safe_name(stem(path)), resolved, str(path), taken, found.notes,
                                                 withheld="" if _holds_files(resolved) else NOTHING))
        else:
            found.submissions.extend(_children(root, base, label, taken, skip, found.notes))
    if found.submissions and all(s.withheld == NOTHING for s in found.submissions) and not any(
            s.submitters for s in found.submissions):  # only nobodies: a wrong path, not a class of empty uploads
        raise InputError(text("batch.no_submission", path=", ".join(map(str, paths))))
    found.submissions = _one_per_sid(found.submissions, same_sid, found.notes)
    return found


def _one_per_sid(submissions: list[Submission], choice: str, notes: list[str]) -> list[Submission]:
    """Of several graded submissions sharing a SID, the one ``choice`` picks by ``created_at`` (ties: by name)
    stays graded and the others are withheld as superseded by it ("all": every one graded); each SID told once."""
    if choice not in SAME_SID_CHOICES:
        raise InputError(f"--same-sid must be one of {', '.join(SAME_SID_CHOICES)}, not {choice!r}")
    by_sid: dict[str, list[int]] = {}
    for index, submission in enumerate(submissions):
        for sid in dict.fromkeys(p.sid for p in submission.submitters if p.sid):
            if not submission.withheld:
                by_sid.setdefault(sid, []).append(index)
    superseded: dict[int, tuple[str, str]] = {}
    for sid, indices in by_sid.items():
        if len(indices) < 2:
            continue
        ordered = sorted(indices, key=lambda k: (_when(submissions[k].created_at), submissions[k].name))
        kept = ordered[-1] if choice == "latest" else ordered[0]
        said = ", ".join(f"{submissions[k].name} ({submissions[k].created_at or '?'})" for k in ordered)
        if choice == "all":
            notes.append(text("batch.same_sid_all", sid=sid, submissions=said))
            continue
        notes.append(text("batch.same_sid", sid=sid, submissions=said, kept=submissions[kept].name, choice=choice))
        for k in indices:
            if k != kept:
                superseded.setdefault(k, (submissions[kept].name, sid))
    return [replace(s, withheld=f"{SUPERSEDED} by {superseded[k][0]} (SID {superseded[k][1]})") if k in superseded
            else s for k, s in enumerate(submissions)]


def _when(created_at: str) -> tuple[int, str]:
    """A sort key for a metadata time (YAML reads Gradescope's as a timestamp: "2024-03-01 10:00:00-08:00"): the
    instant where it reads as one, with its zone; else after none of them, as text."""
    from datetime import datetime, timezone

    try:
        moment = datetime.fromisoformat(created_at)
    except ValueError:
        return (0, created_at)  # unreadable: before every readable one, then as text
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return (1, f"{moment.timestamp():020.3f}")


#: What a submission holds one of at least: a contract file (or a near miss), a notebook, a zip.
SUBMISSION_SUFFIXES = (".py", ".py.txt", ".ipynb", ".zip")


def _holds_files(path: Path) -> bool:
    """Whether a folder or zip given as one submission holds anything intake could grade or name.

    A run whose every path is such a folder (empty, or holding only notes) grades nobody: it stops with one line
    instead of grading a "missing file" for nobody; beside real submissions it is a student's empty upload.
    Bounded as intake is (depth, entries).
    """
    if path.is_file():
        members = _zip_members(path)
        return members is None or any(m.filename.lower().endswith(SUBMISSION_SUFFIXES) for m in members)
    seen = 0
    for dirpath, dirnames, filenames in os.walk(path, followlinks=False):
        depth = len(Path(dirpath).relative_to(path).parts)
        dirnames[:] = [d for d in dirnames if d not in IGNORED] if depth < intake.MAX_DEPTH else []
        seen += len(dirnames) + len(filenames)
        if any(f.lower().endswith(SUBMISSION_SUFFIXES) for f in filenames) or seen > intake.MAX_MEMBERS:
            return True  # (too many entries to look through: let intake say what it finds)
    return False


def _children(root: Path, base: Path, label: str, taken: set[str], skip: set[Path],
              notes: list[str]) -> list[Submission]:
    """The submissions of a batch folder: each child folder or zip, and each entry of an export's metadata that has
    none (an empty upload the export left out: listed, as nothing submitted)."""
    people: dict[str, tuple[tuple[Submitter, ...], str]] = {}
    metadata = root / METADATA
    if metadata.is_file():
        try:
            people = read_metadata(metadata.read_text(encoding="utf-8", errors="replace"))
        except ValueError as exc:
            notes.append(f"{label}: {exc}; the gradebook has no student names for it.")
    found = []
    listed: set[str] = set()
    for child in sorted(root.iterdir(), key=lambda p: p.name):
        if not _visible(child.name) or not _is_candidate(child):
            continue
        resolved = child.resolve()
        if resolved in skip or any(out.is_relative_to(resolved) for out in skip):
            notes.append(f"{child} holds the output folder; skipped.")
            continue
        shown = label.rstrip("/") + ("" if label.endswith(":") else "/") + child.relative_to(base).as_posix()
        key = child.name if child.name in people else stem(child)
        submitters, created_at = people.get(key, ((), ""))
        listed.add(key)
        if people and not submitters:
            notes.append(f"{child.name} is not in {METADATA}; graded without student names.")
        found.append(_submission(safe_name(stem(child)), resolved, shown, taken, notes, submitters,
                                 "" if _holds_files(resolved) else NOTHING, created_at))
    for folder, (submitters, created_at) in sorted(people.items()):
        if folder not in listed:
            shown = label.rstrip("/") + ("" if label.endswith(":") else "/") + (root / folder).relative_to(base).as_posix()
            found.append(_submission(safe_name(folder), root / folder, shown, taken, notes, submitters, NOTHING,
                                     created_at))
    if not found:
        notes.append(f"{label} holds no submissions.")
    return found
