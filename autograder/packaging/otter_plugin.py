"""Otter plugin of the otter autograder: keep submitted files out of otter's grading kernel.

Otter starts its grading kernel in the submission folder, which is first on that kernel's
``sys.path``: a submitted ``otter.py`` (or ``json.py``, ...) would be imported by otter's
own cells and could rewrite the results.  Otter also unpickles a submitted ``.OTTER_LOG``
in its main process.  This plugin's ``before_grading`` hook runs after otter has copied
the autograder's files in and before either of those happens: it moves everything the
student submitted into ``amp_submitted/``, where nothing imports or reads it except the
test files' bridge (:mod:`autograder.packaging.otter_bridge`, shipped as ``amp_otter_bridge.py``),
which copies it for the isolated judge.

Otter imports plugins by name in its own process: on Gradescope from the autograder zip's
root (``otter_build`` adds ``autograder/packaging/otter_plugin.py`` there), with ``otter run`` from
the installed project (``pip install -e ".[otter]"``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from otter.plugins import AbstractOtterPlugin

QUARANTINE = "amp_submitted"
#: What otter and the otter autograder put in the submission folder (kept in place).
#: (The test files load ``amp_otter_bridge.py`` from this folder; otter copied it over any submitted one.)
KEEP = {"tests", "__init__.py", "amp_grader.zip", "amp_homework.ipynb", "amp_otter_bridge.py", QUARANTINE}


def quarantine(folder: Path) -> list[str]:
    """Move the submitted entries of ``folder`` into ``folder/amp_submitted``; return their names."""
    dest = folder / QUARANTINE
    dest.mkdir(exist_ok=True)
    moved = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        otters_own_init = entry.name == "__init__.py" and entry.is_file() and entry.stat().st_size == 0
        if entry.name in KEEP and (entry.name != "__init__.py" or otters_own_init):
            continue
        os.replace(entry, dest / entry.name)
        moved.append(entry.name)
    (folder / "__init__.py").touch()
    return moved


class AmpQuarantine(AbstractOtterPlugin):
    """``before_grading``: move the submission out of the kernel's way (see the module docstring)."""

    def before_grading(self, config: Any) -> None:
        quarantine(Path.cwd())
