"""PrairieLearn packaging: a course-ready question folder with external grading, and its grading image.

``python -m autograder.packaging.prairielearn --out dist/prairielearn --image NAME`` (``make prairielearn``)
writes::

    questions/ampHomework/info.json            gradingMethod External, externalGradingOptions (image, entrypoint,
                                               timeout, networking off)
    questions/ampHomework/question.html        the task, a pl-file-upload for the three files, the results
    questions/ampHomework/clientFilesQuestion/amp_homework_starter.zip   what students get (assignment/)
    questions/ampHomework/tests/run_grader     the entrypoint: /grade/tests/run_grader
    questions/ampHomework/tests/source/        the grader and the public + hidden tests (as in Gradescope's zip)
    image/Dockerfile, install.sh, requirements.txt   PrairieLearn's Python grader image + CPU torch, pinned
    README.md                                  the steps

The grader travels in the question's ``tests/`` (PrairieLearn copies it to ``/grade/tests`` for each job and
never serves it to students); the image holds only the environment, so nothing secret is in an image that
Docker Hub serves to anyone.  The entrypoint runs :mod:`autograder.platforms.prairielearn`.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import uuid
import zipfile
from pathlib import Path

from autograder import ROOT, settings
from autograder.engine import rubric, strings
from autograder.sandbox import budget
from autograder.engine.files import write_tree
from autograder.packaging import built, gradescope, release

QUESTION = "ampHomework"
#: The image the question names unless --image says otherwise: build it from image/ and push it under your name.
DEFAULT_IMAGE = "YOUR-DOCKERHUB-USER/amp-homework-grader:torch2.13.0"
#: PrairieLearn's Python grader image (Amazon Linux 2023, Python 3.13 in /venv): the base of ours.
BASE_IMAGE = "prairielearn/grader-python:latest"
ENTRYPOINT = "/grade/tests/run_grader"
VENV = "/amp-autograder/venv"
#: PrairieLearn kills a job at its timeout with no results (at most 600 s): the submission's budget plus start-up.
START_UP_SECONDS = 120
TIMEOUT_SECONDS = int(min(600, budget.SUBMISSION_SECONDS + START_UP_SECONDS))
UPLOADED = ("loss_scaler.py", "amp_step.py", "answers.py")
STARTER = "amp_homework_starter.zip"

DOCKERFILE = f"""# The grading image of the PrairieLearn question {QUESTION}: PrairieLearn's Python grader image plus the
# grader's own environment (a CPU-only torch and the pinned packages of requirements.txt).  Nothing of the
# grader itself is here: it travels with the question (tests/), since an image on Docker Hub is public.
#   docker build -t YOUR-DOCKERHUB-USER/amp-homework-grader:torch2.13.0 . && docker push ...
ARG BASE={BASE_IMAGE}
FROM ${{BASE}}
COPY requirements.txt install.sh /amp-autograder/
RUN bash /amp-autograder/install.sh
"""

INSTALL_SH = f"""#!/usr/bin/env bash
# Runs once, as root, when the image is built (the Dockerfile's RUN).  The grader gets its own virtual
# environment, {VENV}; the base image's Python keeps the packages PrairieLearn pins.
set -euo pipefail
HERE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
VENV="${{{settings.GRADER_VENV.env}:-{VENV}}}"
# libseccomp: the seccomp layer of the sandbox (autograder/sandbox/confine.py).  PrairieLearn's base is Amazon
# Linux (dnf); a Debian-like base has apt-get.
if command -v dnf >/dev/null 2>&1; then
    dnf install -y -q libseccomp && dnf clean all
elif command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q && apt-get install -y -q --no-install-recommends libseccomp2 ca-certificates
fi
python3 -m venv "$VENV"
# torch first, from its CPU index (${gradescope.TORCH_INDEX_ENV} overrides it); requirements.txt then finds it installed.
"$VENV/bin/python" -m pip install --no-cache-dir --disable-pip-version-check \\
    --index-url "${{{gradescope.TORCH_INDEX_ENV}:-{gradescope.TORCH_CPU_INDEX}}}" "$(grep -m1 '^torch==' "$HERE/requirements.txt")"
"$VENV/bin/python" -m pip install --no-cache-dir --disable-pip-version-check -r "$HERE/requirements.txt"
"$VENV/bin/python" -c "import torch, pytest, hypothesis; print('grader environment ready: torch', torch.__version__)"
"""

RUN_GRADER = f"""#!/usr/bin/env bash
# PrairieLearn runs this for every submission (info.json: externalGradingOptions.entrypoint); it writes
# /grade/results/results.json.  ${settings.GRADE_ROOT.env} and ${settings.GRADER_VENV.env} point it elsewhere (tests).
GRADE_ROOT="${{{settings.GRADE_ROOT.env}:-/grade}}"
PYTHON="${{{settings.GRADER_VENV.env}:-{VENV}}}/bin/python"
if [ ! -x "$PYTHON" ]; then
    echo "no grader environment at $PYTHON: is the question's image built from image/Dockerfile?" >&2
    mkdir -p "$GRADE_ROOT/results"
    echo '{{"gradable": false, "format_errors": ["The grader is not installed in this image (not your fault); staff have been told."], "tests": []}}' \\
        > "$GRADE_ROOT/results/results.json"
    exit 0
fi
cd "$GRADE_ROOT/tests/source" || exit 1
export {settings.GRADE_ROOT.env}="$GRADE_ROOT"
# PrairieLearn's image sets PYTHONPATH to serverFilesCourse: the grader imports only its own source.
exec env -u PYTHONPATH "$PYTHON" -m autograder.platforms.prairielearn
"""


def info_json(image: str) -> dict:
    """The question's info.json (https://docs.prairielearn.com/externalGrading/: externalGradingOptions)."""
    return {
        "uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, f"https://github.com/amp-homework/{QUESTION}")),
        "title": "Mixed-precision training: a dynamic loss scaler and an AMP training step",
        "topic": "Mixed-precision training",
        "tags": ["code", "pytorch", "external-grading"],
        "type": "v3",
        "singleVariant": True,
        "gradingMethod": "External",
        "externalGradingOptions": {
            "image": image,
            "entrypoint": ENTRYPOINT,
            "timeout": TIMEOUT_SECONDS,
            "enableNetworking": False,
        },
    }


def question_html() -> str:
    cpu = rubric.max_points()
    public = sum(item.points for item in rubric.ITEMS if item.suite == rubric.PUBLIC)
    return f"""<pl-question-panel>
  <p>
    Implement <code>ToyLossScaler</code> (a dynamic loss scaler with the semantics of
    <code>torch.amp.GradScaler</code>), <code>amp_step</code> (one correct mixed-precision training step) and
    the Quick Check. Download the starter,
    <a href="{{{{options.client_files_question_url}}}}/{STARTER}">{STARTER}</a>: the handout
    (<code>README.md</code>), the three files to complete and the public checks
    (<code>python -m pytest</code> in that folder).
  </p>
  <p>
    Upload your three files below. The autograder gives up to {cpu:g} points on the CPU
    ({public:g} of them from the public checks); the score here is that share. Hidden tests show their points
    at once; what they tried and why they failed is not shown here (ask the course staff). The GPU part is
    graded by staff.
  </p>
  <pl-file-upload file-names="{', '.join(UPLOADED)}"></pl-file-upload>
</pl-question-panel>

<pl-submission-panel>
  <pl-external-grader-results></pl-external-grader-results>
  <pl-file-preview></pl-file-preview>
</pl-submission-panel>
"""


def starter_zip() -> bytes:
    """What students get (assignment/), zipped under amp_homework/."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as bundle:
        for path, relative in release.handout_files():
            gradescope.add_member(bundle, f"amp_homework/{relative}", path.read_bytes())
    return buffer.getvalue()


README = f"""# The PrairieLearn question (built by `make prairielearn`)

1. **The image.** `cd image && docker build -t YOUR-DOCKERHUB-USER/amp-homework-grader:torch2.13.0 . && docker push
   YOUR-DOCKERHUB-USER/amp-homework-grader:torch2.13.0` (PrairieLearn pulls public images from Docker Hub; the image
   holds no test, only PrairieLearn's Python grader image with a CPU-only torch). Then rebuild this folder with
   `make prairielearn PL_IMAGE=YOUR-DOCKERHUB-USER/amp-homework-grader:torch2.13.0`, so `info.json` names it.
2. **The question.** Copy `questions/{QUESTION}/` into your course's `questions/` and add it to an assessment.
   The grader and its hidden tests sit in the question's `tests/`, which PrairieLearn never serves to students.
3. **Check it.** Submit `solutions/`'s three files once as a student: it must get 100% (the CPU part's 90 points).
4. **The Quick Check.** Hidden rows show their points at once, so four uploads reveal its key. Put the question in
   an Exam assessment with `"allowRealTimeGrading": false` in `infoAssessment.json` (results only once the
   assessment is finished); on a Homework, `"triesPerVariant"` and `"gradeRateMinutes"` only slow this down.
   PrairieLearn takes these per assessment, not in the question's `info.json`.

Students upload `loss_scaler.py`, `amp_step.py` and `answers.py`; they see one row per test with its points,
the messages of the public rows at once, and no detail of the hidden rows (PrairieLearn shows everything at
once). An upload that cannot be graded is marked *invalid, not gradable* and costs no attempt.
"""


def build(out: Path, image: str = DEFAULT_IMAGE, language: str = strings.DEFAULT) -> Path:
    """Write the question and image folders to ``out`` (replaced whole); return it."""
    strings.check_language(language)
    question = f"questions/{QUESTION}"
    files: list[tuple[str, str | bytes, int]] = [
        (f"{question}/info.json", json.dumps(info_json(image), indent=2) + "\n", 0o644),
        (f"{question}/question.html", question_html(), 0o644),
        (f"{question}/clientFilesQuestion/{STARTER}", starter_zip(), 0o644),
        (f"{question}/tests/run_grader", RUN_GRADER, 0o755),
        ("image/Dockerfile", DOCKERFILE, 0o644),
        ("image/install.sh", INSTALL_SH, 0o755),
        ("image/requirements.txt", "\n".join(gradescope.image_requirements()) + "\n", 0o644),
        ("README.md", README, 0o644),
    ]
    files += [(f"{question}/tests/source/{arcname}", data, 0o644)
              for arcname, data in gradescope.grader_members(language)]
    return write_tree(out, files)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m autograder.packaging.prairielearn", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "prairielearn")
    parser.add_argument("--image", default=DEFAULT_IMAGE, help=f"the grading image info.json names (default: {DEFAULT_IMAGE})")
    parser.add_argument("--language", choices=strings.LANGUAGES, default=strings.DEFAULT,
                        help="language of row titles and fixed feedback (default: en)")
    args = parser.parse_args(argv)
    print(f"wrote {build(args.out, args.image, args.language)}")
    built.record(args.out, built.rebuild_command(args.out, "prairielearn", "autograder.packaging.prairielearn",
                                                 list(argv or sys.argv[1:]),
                                                 PL_IMAGE="" if args.image == DEFAULT_IMAGE else args.image,
                                                 AMP_LANGUAGE="" if args.language == strings.DEFAULT else args.language))
    if args.image == DEFAULT_IMAGE:
        print(f"note: info.json names the placeholder image {DEFAULT_IMAGE}: build and push {args.out / 'image'} under "
              "your name, then rebuild with --image (make prairielearn PL_IMAGE=...)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
