"""``make student``: regenerate what is built from ``solutions/`` and the checks, in proportion to the change.

``python -m autograder.packaging.student`` runs, in order:

* the skeleton, ``assignment/*.py`` (:mod:`autograder.packaging.release`; always: a second);
* both notebooks (otter assign, ``notebook_build``; always: they show the checks' text, docstrings included);
* ``assignment/checks/amp_effects.json`` (:mod:`autograder.packaging.amp_effects`; 15 s of CPU, a minute or two
  on a busy machine), only when its inputs' behaviour changed (:func:`~autograder.packaging.amp_effects.is_current`);
* the students' and the grader's diagnosis tables, only when what they depend on changed: their ``source``
  is compared with :func:`autograder.diagnosis.table.source_fingerprint`, the same function grading uses to say
  "the table is older than the code".  It hashes behaviour (docstrings and comments do not count), so an edited
  docstring rebuilds neither table (each takes minutes).  ``--tables always`` rebuilds them anyway.

Then it says what it rebuilt, what it left and why, and which artefacts in ``dist/`` are now older than their
sources (:mod:`autograder.packaging.built`), with the command that rebuilds each.  ``--dry-run`` only says so.

It installs nothing: the notebooks need otter-grader (the ``[otter]`` extra), which ``make student`` installs
first with a line saying so; run directly without it, the notebooks are left, the command that installs it is
printed and the exit status is 1.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from pathlib import Path

from autograder import ROOT
from autograder.packaging import built
from autograder.packaging.built import shown
from autograder.packaging.tables import Outcome, refresh_table, since

NOTEBOOK_LANGUAGES = ("en", "ko")
OTTER_INSTALL = "make setup-otter   (or: .venv/bin/python -m pip install -e '.[otter]')"


def refresh_effects(effects: Path, outcome: Outcome, dry_run: bool = False) -> None:
    """Record the Task-2 effects again when what records them changed in behaviour; say which and why."""
    from autograder.packaging import amp_effects

    if amp_effects.is_current(effects):
        outcome.left.append(f"{shown(effects)} (the Task-2 effects): what records it behaves as it did, unchanged "
                            f"since {since(effects)} (docstrings and comments do not count)")
        return
    if dry_run:
        outcome.rebuilt.append(f"{shown(effects)} (the Task-2 effects): what records it changed (a minute or two)")
        return
    started = time.monotonic()
    amp_effects.write(effects)
    outcome.rebuilt.append(f"{shown(effects)} (the Task-2 effects): what records it changed "
                           f"({time.monotonic() - started:.0f} s)")


def regenerate(outcome: Outcome, assignment: Path, dry_run: bool) -> None:
    """The skeleton and the notebooks (seconds each, always), the recorded effects (when they changed)."""
    from autograder.packaging import release

    if dry_run:
        outcome.rebuilt.append("assignment/*.py and both notebooks: always (seconds)")
        refresh_effects(assignment / "checks" / "amp_effects.json", outcome, dry_run=True)
        return
    started = time.monotonic()
    files = release.release_files(ROOT / "solutions")
    changed = [name for name, text in files.items() if not (assignment / name).is_file()
               or (assignment / name).read_text(encoding="utf-8") != text]
    release.write_release(ROOT / "solutions", assignment)
    outcome.rebuilt.append(f"{shown(assignment)}/*.py ({', '.join(changed) or 'no file'} changed; "
                           f"{time.monotonic() - started:.0f} s)")
    refresh_effects(assignment / "checks" / "amp_effects.json", outcome)
    if importlib.util.find_spec("otter") is None:
        outcome.failed.append(f"the notebooks: otter assign needs otter-grader, not installed here: run {OTTER_INSTALL}")
        return
    for language in NOTEBOOK_LANGUAGES:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "autograder.packaging.notebook_build", "--language", language],
                              cwd=ROOT, capture_output=True, text=True)
        if done.returncode != 0:
            outcome.failed.append(f"the {language} notebook: notebook_build failed:\n{done.stderr[-1500:]}")
        else:
            outcome.rebuilt.append(f"{shown(Path(done.stdout.strip().removeprefix('wrote ')))} "
                                   f"({time.monotonic() - started:.0f} s)")


def summary(outcome: Outcome, stale: list[built.Stale], dry_run: bool = False) -> str:
    done = "to rebuild" if dry_run else "rebuilt"
    lines = [f"make student{' (dry run)' if dry_run else ''}: {len(outcome.rebuilt)} {done}, {len(outcome.left)} left as "
             f"they were, {len(stale)} artefact(s) in dist/ now stale"
             + (f", {len(outcome.failed)} FAILED" if outcome.failed else "")]
    lines += [f"  {'rebuild' if dry_run else 'rebuilt':<7}  {line}" for line in outcome.rebuilt]
    lines += [f"  left     {line}" for line in outcome.left]
    lines += [f"  stale    {item.line}" for item in stale]
    lines += [f"  FAILED   {line}" for line in outcome.failed]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from autograder.diagnosis.table import RELEASED_TABLE, SHIPPED

    parser = argparse.ArgumentParser(prog="python -m autograder.packaging.student", description=__doc__.splitlines()[0])
    parser.add_argument("--tables", choices=("changed", "always", "never"), default="changed",
                        help="rebuild the diagnosis tables when their inputs' behaviour changed (default), always, never")
    parser.add_argument("--dry-run", action="store_true", help="build nothing: say what would be rebuilt and what is stale")
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="where the built artefacts are (default: dist/)")
    args = parser.parse_args(argv)
    outcome = Outcome()
    regenerate(outcome, ROOT / "assignment", args.dry_run)
    for path, public in ((RELEASED_TABLE, True), (SHIPPED, False)):
        if args.tables == "never":
            outcome.left.append(f"{shown(path)}: not checked (--tables never)")
        else:
            refresh_table(path, public, outcome, always=args.tables == "always", dry_run=args.dry_run)
    print(summary(outcome, built.stale(args.dist), args.dry_run))
    return 1 if outcome.failed else 0


if __name__ == "__main__":
    sys.exit(main())
