"""One message per cause: a missing file, a file that does not import, a method not implemented yet.

Such a cause fails every test case that needs it with the same long message; repeated in every row,
it buried a one-problem submission's feedback (the skeleton's feedback.md was 51 KB).  So the cause is
told once at the top of the feedback (results.json's "output", through the report's notes) and each
case it failed gets one short line pointing there.  Only messages change: which cases pass, and so
every score, stays exactly as the tests decided.

A file's cause is what the student processes recorded when they imported it (the sandbox's
``import_faults``: a case failed by it carries exactly that message).  Standard library only.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from checks import words

from autograder.engine import strings

#: The contract's files by module name (``checks.runners.harness.CONTRACT_FILES``, which imports torch).
FILES = {"loss_scaler": "loss_scaler.py", "amp_step": "amp_step.py", "answers": "answers.py"}
#: The rubric task that reads a file and no other: its rows fail as "missing" when the file is (answers.py is
#: read as text, never imported, so no import fault names it).
TASK_OF_FILE = {"answers.py": "quick_check"}
#: What the skeleton's stubs raise (``autograder.packaging.release``; the Korean notebook's:
#: ``autograder.packaging.notebook_ko``), as a failed check quotes it.
NOT_IMPLEMENTED = re.compile(r"NotImplementedError: (?P<what>[\w.]+)(?: is not implemented yet: see "
                             r"|: 아직 구현되지 않았습니다\(README\.ko\.md의 )(?P<where>(?:Task|과제) \d+)")


def file_faults(runner: Any) -> dict[str, str]:
    """File name -> why it could not be used, as recorded by ``runner``'s student processes (empty if none)."""
    recorded = getattr(runner, "import_faults", None)
    if not isinstance(recorded, Mapping):
        return {}
    return {FILES.get(name, name): str(message) for name, message in recorded.items()}


def missing_files(runner: Any) -> list[str]:
    """The contract files absent from the submission ``runner`` grades ([] when it cannot tell)."""
    folder = getattr(runner, "submission", None)
    if not isinstance(folder, Path) or not folder.is_dir():
        return []
    return [name for name in FILES.values() if not (folder / name).is_file()]


def short_line(message: str, task: str, faults: Mapping[str, str], missing: Sequence[str]) -> str | None:
    """The one line that replaces a failed case's ``message`` when a cause told at the top explains it; else None."""
    for file, why in faults.items():
        if message == why:
            key = "row_file_missing" if _says_missing(file, why) else "row_file_broken"
            return strings.text(key, file=file)
    for file in missing:
        if TASK_OF_FILE.get(file) == task:
            return strings.text("row_file_missing", file=file)
    found = NOT_IMPLEMENTED.search(message)
    if found:
        return strings.text("row_not_implemented", what=found["what"], where=strings.task(found["where"]))
    return None


def _says_missing(file: str, why: str) -> bool:
    """Whether ``why`` is the student process's "file is missing" message for ``file`` (in any language)."""
    return why == words.say("file.missing", file=file)


def not_implemented(messages: Iterable[str]) -> dict[str, str]:
    """What the failed cases' messages say is not implemented yet -> its task ("Task 1"), by task.

    The note this makes is shown at once: pass only texts students may see at once (the public tests' failures),
    never a hidden test's (its student text may spell a hidden input as a "method" name)."""
    found: dict[str, str] = {}
    for message in messages:
        for match in NOT_IMPLEMENTED.finditer(message):
            found.setdefault(match["what"], match["where"])
    return dict(sorted(found.items(), key=lambda item: item[1]))  # stable: first seen first within a task


def top_notes(faults: Mapping[str, str], missing: Sequence[str], unimplemented: Mapping[str, str]) -> list[str]:
    """The notes that tell each cause once (a missing file is already named by intake's note)."""
    notes = []
    for file, why in faults.items():
        if file in missing or _says_missing(file, why):
            continue
        notes.append(strings.text("file_broken", file=file) + "\n  " + why.strip().replace("\n", "\n  "))
    if unimplemented:
        names = ", ".join(f"{what} ({strings.task(where)})" for what, where in unimplemented.items())
        notes.append(strings.text("not_implemented", names=names))
    return notes
