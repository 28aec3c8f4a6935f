"""Every setting of the grader: its environment variable, what it means, its default and who sets it.

The grader reads its settings here and nowhere else (``tests/test_settings.py`` holds it to that):
each setting has one small typed function below.  (The process's own variables, ``PYTHONPATH`` passed on
to children and ``TMPDIR``, are the operating system's, not settings.)  Who sets it:

* **instructor**: when building what is shipped (``make autograder``, ``make student``);
* **TA**: when grading (``make grade``, ``python -m autograder ...``);
* **Gradescope**: its image sets it;
* **students**: when running the public checks;
* **test**: the project's own tests and benchmarks only, never real grading.

Some are read once, at import, on purpose: the student processes are forked from a zygote that has
already imported the engine, and their environment is emptied before student code runs
(:func:`autograder.sandbox.confine.clean_environment`), so a value must be taken before.  Their
modules say so where they keep the value (``rubric``, ``judge``).

The public checks (``assignment/checks``) ship to students without the grader, so they cannot
import this module; their four settings are read where they are used (each once, in the module
whose job it is, :data:`CHECKS_SETTINGS` says which) and listed here so that one table names them all.

Test-only switches (a worker that dies on cue, a plan recorded from another folder) are behind one variable,
``AMP_TEST_HOOKS`` (:func:`test_hooks`): unset in real grading, and nothing of it acts unless it is set.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any




@dataclass(frozen=True)
class Setting:
    env: str  # the environment variable
    default: str  # in words when it is not a value
    meaning: str
    who: str  # instructor, TA, Gradescope, test (see the module's docstring)
    read_in: str  # the module that reads it


LANGUAGE = Setting("AMP_LANGUAGE", "language.json beside the engine's strings, else en",
                   "feedback language (en, ko); the CLI's --language sets it for the processes it starts; the "
                   "checks' words read it, the grader through them (checks.words.requested)", "instructor, TA, students",
                   "checks.words")
MIN_ISOLATION = Setting("AMP_MIN_ISOLATION", "landlock+seccomp (levels.SEALED)", "refuse to grade below this isolation level "
                        "(autograder.sandbox.levels.LEVELS); --min-isolation comes first", "TA, Gradescope",
                        "autograder.sandbox.levels")
HIDDEN_VISIBILITY = Setting("AMP_HIDDEN_VISIBILITY", "after_due_date", "Gradescope visibility of the hidden rows "
                            "(read at import)", "instructor", "autograder.engine.rubric")
GPU_POINTS = Setting("AMP_GPU_POINTS", "10", "points of the GPU part, graded by staff (read at import)",
                     "instructor", "autograder.engine.rubric")
PUBLIC_TESTS = Setting("AMP_PUBLIC_TESTS", "the installed checks package (assignment/checks)", "folder of the public checks graded "
                       "(read at import)", "test", "autograder.engine.judge")
HIDDEN_TESTS = Setting("AMP_HIDDEN_TESTS", "autograder/hidden", "folder of the hidden tests graded "
                       "(read at import)", "test", "autograder.engine.judge")
HIDDEN_EXAMPLES = Setting("AMP_HIDDEN_EXAMPLES", "each test's measured count (autograder/engine/examples.py)",
                          "hypothesis examples for every hidden property test", "instructor, test", "autograder.engine.judge")
SANDBOX_LIMITS = Setting("AMP_SANDBOX_LIMITS", "{} (the budget's limits)", "a JSON object overriding fields of "
                         "autograder.sandbox.zygote.Limits (call_seconds, ...)", "TA, test",
                         "autograder.sandbox.zygote, autograder.batch.pools, autograder.gpu.grading")
PLAN = Setting("AMP_PLAN", "on", "off: grade every test in pytest, call by call, with no call plan "
               "(and so no 'Likely mistake' lines: the diagnosis reads the answers the plan collects)",
               "instructor, TA, test", "autograder.engine.plan, autograder.packaging.gradescope")
PLAN_CACHE = Setting("AMP_PLAN_CACHE", "$XDG_CACHE_HOME/amp-homework, else ~/.cache/amp-homework",
                     "folder of recorded call plans", "TA, test", "autograder.engine.plan_cache")
DIAGNOSIS = Setting("AMP_DIAGNOSIS", "autograder/hidden/diagnosis.json", "the diagnosis table's path, or off "
                    "(no 'Likely mistake' lines, nor a table built into the zip)", "instructor, TA, test",
                    "autograder.diagnosis.table")
TORCH_INDEX = Setting("AMP_TORCH_INDEX_URL", "torch's CPU index", "the pip index the Gradescope image installs "
                      "torch from", "test", "setup.sh in the zip (autograder.packaging.gradescope)")
AUTOGRADER_ROOT = Setting("AUTOGRADER_ROOT", "/autograder", "the Gradescope image's root (submission/, results/)",
                          "Gradescope, test", "autograder.platforms.gradescope")
GRADE_ROOT = Setting("AMP_GRADE_ROOT", "/grade", "PrairieLearn's grading root (student/, tests/, results/)",
                     "test", "autograder.platforms.prairielearn, the question's tests/run_grader")
GRADER_VENV = Setting("AMP_GRADER_VENV", "/amp-autograder/venv", "the grader's environment in the PrairieLearn image",
                      "test", "the question's tests/run_grader (autograder.packaging.prairielearn)")
HOOKS = Setting("AMP_TEST_HOOKS", "unset: no hook", "a JSON object of test-only switches (HOOK_SWITCHES); "
                     "never set in real grading", "test", "autograder.settings")
SUBMISSION = Setting("AMP_SUBMISSION", "the folder above checks/", "the folder the public checks grade; the "
                     "grader sets it for the checks it starts", "students, TA", "checks.plugin")
#: Read by the public checks themselves (``assignment/checks``), which cannot import the grader.
CHECKS_SETTINGS = (
    SUBMISSION,
    LANGUAGE,
    Setting("AMP_GPU_DRY", "real GPU run", "1 (or a parse_dry value): the GPU checks' dry run on the CPU; "
            "the grader's GPU part reads it through checks.gpu_mode", "students, TA", "checks.gpu_mode"),
    Setting("AMP_GPU_MIN_SPEEDUP", "1.5", "the speed-up the GPU check 4.1 asks for", "instructor",
            "checks.test_gpu"),
    Setting("AMP_STUDENT_DIAGNOSIS", "checks/diagnosis.json", "the students' diagnosis table", "test",
            "checks.judge.diagnose"),
)
SETTINGS = (MIN_ISOLATION, HIDDEN_VISIBILITY, GPU_POINTS, PUBLIC_TESTS, HIDDEN_TESTS, HIDDEN_EXAMPLES,
            SANDBOX_LIMITS, PLAN, PLAN_CACHE, DIAGNOSIS, TORCH_INDEX, AUTOGRADER_ROOT, GRADE_ROOT, GRADER_VENV,
            HOOKS) + CHECKS_SETTINGS

#: The switches ``AMP_TEST_HOOKS`` may hold: name -> what it does.
HOOK_SWITCHES = {
    "die_on": "a submission name: the batch worker handed it exits at once (a worker crash)",
    "reference": "a folder: the batch worker records its call plan (and canary) from it, not solutions/",
    "phase_log": "a file: the runner appends one JSON line per student process (its kind, when it was alive)",
}
#: Settings that change grades: the grader fingerprint holds their values, so a batch regrades when one changes.
GRADE_SETTINGS = (HIDDEN_VISIBILITY, GPU_POINTS, PUBLIC_TESTS, HIDDEN_TESTS, SANDBOX_LIMITS, HIDDEN_EXAMPLES,
                  HOOKS)


def raw(setting: Setting) -> str | None:
    """The variable's value as set, None when unset (for fingerprints and for passing on)."""
    return os.environ.get(setting.env)


def _text(setting: Setting) -> str:
    return os.environ.get(setting.env, "").strip()


def min_isolation() -> str | None:
    """The isolation level asked for, unchecked; None when none."""
    return _text(MIN_ISOLATION) or None


def hidden_visibility() -> str:
    return os.environ.get(HIDDEN_VISIBILITY.env, "after_due_date")


def gpu_points() -> float:
    return float(os.environ.get(GPU_POINTS.env, "10"))


def public_tests() -> Path:
    from autograder import locations

    return Path(os.environ.get(PUBLIC_TESTS.env) or locations.PUBLIC_CHECKS)


def hidden_tests() -> Path:
    from autograder import locations

    return Path(os.environ.get(HIDDEN_TESTS.env) or locations.HIDDEN_TESTS)


def sandbox_limits() -> dict[str, Any]:
    """The limit fields set (none when unset or blank).

    Raises:
        ValueError: the value is not JSON.
    """
    text = _text(SANDBOX_LIMITS)
    return json.loads(text) if text else {}


def plan_off() -> bool:
    return _text(PLAN).lower() == "off"


def plan_cache() -> Path:
    configured = os.environ.get(PLAN_CACHE.env)
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "amp-homework"


def diagnosis_table() -> str:
    """The diagnosis setting as given: "" (the shipped table), "off", or a table's path."""
    return os.environ.get(DIAGNOSIS.env, "")


def diagnosis_off() -> bool:
    return diagnosis_table().lower() == "off"


def autograder_root() -> Path:
    return Path(os.environ.get(AUTOGRADER_ROOT.env, "/autograder"))


def grade_root() -> Path:
    return Path(os.environ.get(GRADE_ROOT.env, "/grade"))


def test_hooks() -> dict[str, Any]:
    """The test-only switches set in ``$AMP_TEST_HOOKS``; {} when it is unset or blank (real grading).

    Raises:
        ValueError: the value is not a JSON object of known switches (a typo must not pass for a test).
    """
    text = _text(HOOKS)
    if not text:
        return {}
    hooks = json.loads(text)
    if not isinstance(hooks, dict) or not set(hooks) <= set(HOOK_SWITCHES):
        raise ValueError(f"${HOOKS.env} must be a JSON object with keys among {sorted(HOOK_SWITCHES)}: {text!r}")
    return hooks


def die_on() -> str | None:
    """The submission name a batch worker dies on (a test hook); None in real grading."""
    return test_hooks().get("die_on") or None


def reference_override() -> Path | None:
    """The folder a batch worker records its plan from instead of solutions/ (a test hook); None in real grading."""
    folder = test_hooks().get("reference")
    return Path(folder) if folder else None


def phase_log() -> Path | None:
    """The file the runner records its student processes' lifetimes in (a test hook); None in real grading."""
    path = test_hooks().get("phase_log")
    return Path(path) if path else None


def test_hooks_env(**hooks: Any) -> dict[str, str]:
    """The environment entry that sets ``hooks`` (for tests to pass to the processes they start)."""
    unknown = set(hooks) - set(HOOK_SWITCHES)
    if unknown:
        raise ValueError(f"unknown test hooks {sorted(unknown)}: known are {sorted(HOOK_SWITCHES)}")
    return {HOOKS.env: json.dumps(hooks, sort_keys=True)}
