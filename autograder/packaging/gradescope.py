"""Gradescope packaging: the zip that Gradescope's "Configure Autograder" page takes.

``python -m autograder.packaging.gradescope --out dist/autograder.zip`` builds it: ``setup.sh`` and
``run_autograder`` at its root, the grader and the public + hidden tests under ``source/``-relative
paths, no solutions.  Inside the container, ``run_autograder`` runs Gradescope's runtime,
:mod:`autograder.platforms.gradescope`, which grades ``$AUTOGRADER_ROOT/submission`` (default
``/autograder``) and always writes ``$AUTOGRADER_ROOT/results/results.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import zipfile
from pathlib import Path
from autograder import PACKAGE, ROOT, settings
from autograder.diagnosis import table as diagnosis_table
from autograder import locations
from autograder.engine import strings
from autograder.packaging import built
from autograder.torch_install import TORCH_CPU_INDEX

#: The packages the grader imports in the Gradescope image, named as in pyproject.toml's dependencies,
#: whose pins and environment markers are the ones used here (one source for every install).
IMAGE_PACKAGES = ("torch", "pytest", "hypothesis", "rich", "pyseccomp", "landlock")
#: setup.sh reads $TORCH_INDEX_ENV first, so a test can point pip at an index it reaches (Gradescope has no GPU:
#: torch's CPU index, declared in autograder/torch_install.py, otherwise).
TORCH_INDEX_ENV = settings.TORCH_INDEX.env
#: The grader's own environment, beside source/ (which run() closes to the student uid; the venv stays readable).
VENV = "venv"

SETUP_SH = f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder image (Ubuntu 22.04 or 24.04 base).
# The grader gets its own virtual environment: the system Python stays as the image has it (PEP 668
# images refuse packages installed into it by pip, and Gradescope's own harness runs on it).
set -euo pipefail
AUTOGRADER_ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
SOURCE="$AUTOGRADER_ROOT/source"
VENV="$AUTOGRADER_ROOT/{VENV}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# python3-venv: the environment; libseccomp2: the seccomp layer of the sandbox (autograder/sandbox/confine.py).
apt-get install -y -q --no-install-recommends python3 python3-venv ca-certificates libseccomp2
python3 -m venv "$VENV"
# torch first, from its CPU index (${TORCH_INDEX_ENV} overrides it); requirements.txt then finds it installed.
"$VENV/bin/python" -m pip install --no-cache-dir --disable-pip-version-check \\
    --index-url "${{{TORCH_INDEX_ENV}:-{TORCH_CPU_INDEX}}}" "$(grep -m1 '^torch==' "$SOURCE/requirements.txt")"
"$VENV/bin/python" -m pip install --no-cache-dir --disable-pip-version-check -r "$SOURCE/requirements.txt"
# Bytecode now, once, by the Python that grades: every submission runs in a fresh container of this image.
"$VENV/bin/python" -m compileall -q "$SOURCE"
"""

RUN_AUTOGRADER = f"""#!/usr/bin/env bash
# Gradescope runs this for every submission; it writes /autograder/results/results.json.
AUTOGRADER_ROOT="${{AUTOGRADER_ROOT:-/autograder}}"
cd "$AUTOGRADER_ROOT/source"
exec "$AUTOGRADER_ROOT/{VENV}/bin/python" -m autograder.platforms.gradescope
"""


def requirement_name(line: str) -> str:
    """The distribution name a requirement line starts with, normalized (``PyYAML==6.0.3; ...`` -> ``pyyaml``)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", line)
    if match is None:
        raise ValueError(f"not a requirement: {line!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def image_requirements(pyproject: Path = ROOT / "pyproject.toml", packages: tuple[str, ...] = IMAGE_PACKAGES) -> list[str]:
    """requirements.txt of the zip: pyproject.toml's lines for ``packages`` (pins and markers kept), in their order
    (torch first).

    Raises ValueError when one of ``packages`` has no line there (the zip would miss it).
    """
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pytest depends on tomli there
        import tomli as tomllib  # type: ignore[no-redef]

    lines = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    wanted = [requirement_name(name) for name in packages]
    chosen = [line for name in wanted for line in lines if requirement_name(line) == name]
    missing = set(wanted) - {requirement_name(line) for line in chosen}
    if missing:
        raise ValueError(f"{pyproject}: no dependency line for {sorted(missing)}")
    return chosen


def package_files() -> list[tuple[Path, str]]:
    """(file on disk, path inside the zip's source/ folder) for everything the grader needs.

    The two packages sit side by side in source/, as pip installs them: ``python -m`` from there
    imports both, with no path to set.
    """
    files: list[tuple[Path, str]] = []
    for folder in (PACKAGE, locations.PUBLIC_CHECKS):
        for path in sorted(folder.rglob("*")):
            if path in (strings.LANGUAGE_FILE, locations.SHIPPED_TABLE, locations.SHIPPED_PLAN):
                continue  # a build writes its own (or none): never a stray or committed one from disk
            if path.is_file() and "__pycache__" not in path.parts and path.suffix in (".py", ".ini", ".json"):
                files.append((path, f"{folder.name}/{path.relative_to(folder).as_posix()}"))
    return files


def recorded_plan() -> str | None:
    """The call plan (:mod:`autograder.engine.plan`) recorded from solutions/ in a fresh process, or None (slower, same grades)."""
    import subprocess
    import tempfile

    if settings.plan_off():
        return None
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "plan.json"
        done = subprocess.run([sys.executable, "-m", "autograder", "record-plan", "--write", str(target)], cwd=ROOT,
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(f"warning: no call plan in the zip (grading will be slower):\n{done.stderr[-1500:]}", file=sys.stderr)
            return None
        return target.read_text()


def build(out: Path, language: str = strings.DEFAULT) -> Path:
    """Write the Gradescope autograder zip to ``out``; return it.

    ``language`` (see :mod:`autograder.engine.strings`): the feedback's language; other than English,
    it is recorded in the zip as ``autograder/engine/language.json``.
    """
    strings.check_language(language)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".zip.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as bundle:
        for name, text in (("setup.sh", SETUP_SH), ("run_autograder", RUN_AUTOGRADER)):
            add_member(bundle, name, text, 0o755)
        add_member(bundle, "requirements.txt", "\n".join(image_requirements()) + "\n")
        for arcname, data in grader_members(language):
            add_member(bundle, arcname, data)
    os.replace(tmp, out)
    return out


def grader_members(language: str = strings.DEFAULT) -> list[tuple[str, str | bytes]]:
    """(path relative to the grader's source folder, content) of everything a shipped grader holds: both packages,
    the language file (other than English), and beside the hidden tests the call plan and the diagnosis table
    when they can be made.  Every platform's package ships exactly this (Gradescope's zip, PrairieLearn's question).
    """
    strings.check_language(language)
    members: list[tuple[str, str | bytes]] = [(arcname, path.read_bytes()) for path, arcname in package_files()]
    if language != strings.DEFAULT:
        members.append((f"autograder/{strings.LANGUAGE_FILE.relative_to(PACKAGE).as_posix()}",
                        json.dumps({"language": language}) + "\n"))
    # As secret as the hidden tests, beside them: the call plan, and the catalogue's answers to it
    # (the diagnosis table: it would reveal hidden inputs).
    for arcname, text in (("autograder/hidden/plan.json", recorded_plan()),
                          ("autograder/hidden/diagnosis.json", diagnosis_table.table_for_zip())):
        if text is not None:
            members.append((arcname, text))
    return members


def add_member(bundle: zipfile.ZipFile, arcname: str, data: str | bytes, mode: int = 0o644) -> None:
    """One member, with a fixed date (the same sources give the same zip) and its Unix mode."""
    info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
    info.external_attr = (0o100000 | mode) << 16
    bundle.writestr(info, data, zipfile.ZIP_DEFLATED)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.packaging.gradescope", description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", choices=["build"], default="build")
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "autograder.zip")
    parser.add_argument("--language", choices=strings.LANGUAGES, default=strings.DEFAULT,
                        help="language of row titles and fixed feedback (default: en)")
    args = parser.parse_args(argv)
    print(f"wrote {build(args.out, args.language)}")
    built.record(args.out, built.rebuild_command(args.out, "autograder", "autograder.packaging.gradescope", list(argv or sys.argv[1:]),
                                                 AMP_LANGUAGE="" if args.language == strings.DEFAULT else args.language))
    return 0


if __name__ == "__main__":
    sys.exit(main())
