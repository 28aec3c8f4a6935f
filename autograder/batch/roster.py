"""GitHub Classroom's roster: the students' names for a folder of cloned repositories.

GitHub Classroom's download (the Classroom Assistant, ``gh classroom clone student-repos``) gives one cloned
repository per student, named ``<assignment>-<github username>``; :mod:`autograder.batch.inputs` finds each as
a submission, and ``grade --roster classroom_roster.csv`` names them: the roster export maps GitHub usernames to
the students the instructor knows.
"""

from __future__ import annotations

import csv
import dataclasses
import re
from pathlib import Path
from typing import Any

from autograder.batch.inputs import Discovery, InputError
from autograder.batch.metadata import Submitter

USER_COLUMN = "github_username"
REMOTE = re.compile(r"^\s*url\s*=\s*\S*?([^/:\s]+?)(?:\.git)?/?\s*$", re.M)


def parse_roster(text: str) -> dict[str, Submitter]:
    """GitHub Classroom's roster export -> lower-case GitHub username -> the student.

    The export (``classroom_roster.csv``) has the columns ``identifier``, ``github_username``, ``github_id`` and
    ``name`` (``name`` may be missing): the student is named by ``name``, else ``identifier``; the identifier is
    the SID, and the e-mail too when it is one.  Rows without a username (a student who has not joined yet)
    are skipped.

    Raises:
        ValueError: the text is not a CSV with a ``github_username`` column.
    """
    reader = csv.DictReader(text.splitlines())
    columns = {(name or "").strip().lower(): name for name in reader.fieldnames or ()}
    if USER_COLUMN not in columns:
        shown = ", ".join(sorted(c for c in columns if c)) or "none"
        raise ValueError(f"not a GitHub Classroom roster: no {USER_COLUMN} column (its columns: {shown})")

    def cell(row: dict[str, Any], column: str) -> str:
        return str(row.get(columns.get(column, ""), "") or "").strip()

    found: dict[str, Submitter] = {}
    for row in reader:
        user = cell(row, USER_COLUMN).lower()
        if user:
            identifier = cell(row, "identifier")
            found[user] = Submitter(cell(row, "name") or identifier or user, identifier,
                                    identifier if "@" in identifier else "")
    return found


def read_roster(path: Path) -> dict[str, Submitter]:
    """:func:`parse_roster` of a file (with or without the BOM spreadsheets write).

    Raises:
        InputError: the file cannot be read or is not a roster.
    """
    try:
        return parse_roster(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError, csv.Error) as exc:
        raise InputError(f"--roster {path}: {exc}") from None


def roster_user(folder: Path, roster: dict[str, Submitter]) -> str | None:
    """The username whose cloned repository ``folder`` is: the longest one that ends the folder's name after a
    ``-`` (or is all of it), else the same test on the repository that the clone's ``origin`` names."""
    names = [folder.name.lower()]
    try:
        remote = REMOTE.search((folder / ".git" / "config").read_text(errors="replace"))
    except OSError:
        remote = None
    if remote:
        names.append(remote.group(1).lower())
    for name in names:
        matches = [user for user in roster if name == user or name.endswith("-" + user)]
        if matches:
            return max(matches, key=len)
    return None


def name_submissions(found: Discovery, roster: dict[str, Submitter]) -> None:
    """Give each of ``found``'s submissions without students the roster's student whose repository it is; add
    notes for repositories of no one in the roster and for students of the roster with no repository."""
    named, seen = [], set()
    for submission in found.submissions:
        user = None if submission.submitters else roster_user(submission.path, roster)
        if user is not None:
            seen.add(user)
            submission = dataclasses.replace(submission, submitters=(roster[user],))
        elif not submission.submitters:
            found.notes.append(f"{submission.source} is not the repository of anyone in the roster; "
                               "graded without a name.")
        named.append(submission)
    found.submissions = named
    missing = sorted(roster[user].name for user in set(roster) - seen)
    if missing:
        found.notes.append(f"no repository for {len(missing)} student(s) of the roster: {', '.join(missing)}.")
