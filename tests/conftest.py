"""Shared fixtures for the project's own tests, and which tests `make test` leaves to `make test-all`.

Two commands (README, "Two commands"):

* ``make test``: the fast default, ``-m "not slow or representative"`` on two xdist workers;
* ``make test-all``: everything (CI's ``.ci/run``).

Markers are given here, from the lists below, rather than in each test file: one place says
what is slow and what represents a slow suite in ``make test``.  Workers take whole modules
(``--dist loadfile``): a module's expensive fixtures are built once, and the one module that
starts a Slurm cluster never meets itself.  (``--dist loadgroup`` would allow finer groups,
but with pytest 9.2 it silently stops grouping: pytest-xdist issue 1386.)  Session fixtures
that several modules read (the bundled examples graded once) are built once per run,
whatever the number of workers (:func:`built_once`).
"""

from __future__ import annotations

import fcntl
import functools
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, NoReturn

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Building the Gradescope zip grades the whole catalogue for the diagnosis table (minutes): the tests that build
# zips do without it; the tests of diagnosis build or name their own tables (tests/test_diagnosis.py, test_plan_zip.py).
os.environ.setdefault("AMP_DIAGNOSIS", "off")
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "assignment"))
import checks  # noqa: E402,F401 - the grader's arithmetic in every test process, before any test computes

EXAMPLES = {"solutions": ROOT / "solutions", "assignment": ROOT / "assignment",
            "partially_correct": ROOT / "examples" / "partially_correct"}

#: Left to `make test-all` (node id prefixes), besides what test files mark ``slow`` themselves (the forgery and
#: hostile suites, the catalogue graded live, otter-grader runs, the regrade impact, ...).
SLOW = (
    "tests/test_catalogue.py::test_first_failure_snippet_reproduces[",  # two fresh Pythons per bug
    "tests/test_catalogue.py::test_a_failing_public_check_names_the_graders_mistake[",  # the public checks per bug
    "tests/test_isolation.py::test_confinement_holds_in_every_mode[",  # multi-user isolation runs
    "tests/test_isolation.py::test_unprivileged_user_gets_confined",
    "tests/test_isolation.py::test_huge_scratch_writes_are_capped[docker]",
    "tests/test_batch.py::test_slurm_executor_with_submitits_local_cluster",  # Slurm: test_slurm.py's real cluster
    "tests/test_slurm.py::test_real_cluster_",
    "tests/test_similarity.py::test_html_report_shows_matched_regions_in_headless_chromium",  # a browser
    "tests/test_similarity_small_class.py::test_every_independent_fixture_is_correct",  # ten submissions graded
    # the classroom workflow run on the skeleton (the solution's run stays in make test); test_prairielearn_image.py
    # and test_platform_agreement.py mark themselves slow
    "tests/test_classroom.py::test_the_skeleton_gets_no_public_point_and_says_why",
    "tests/test_classroom.py::test_a_row_whose_cases_partly_pass_gets_its_share_as_in_the_batch",
    # docs/changing.md's "Add a platform" walked (a copy, its packaging, four Autolab jobs and the copy's own tests:
    # one to three minutes); its cheap checks (the count, every step applies and parses) stay in make test
    "tests/test_platform_guide.py::test_walking_the_guide_adds_autolab_and_make_grades_its_handins",
    "tests/test_korean_edition.py::test_every_catalogue_bug_speaks_korean",  # the whole catalogue, in Korean
    # the GPU check's whole dry run (test_gpu_dry.py keeps the GPU part's dry grading and bench in make test)
    "tests/test_gpu_check.py::test_gpu_check_dry_writes_the_report",
    # the hidden suite from the CLI and from a simulated Gradescope run (test_gradescope.py keeps a simulated run)
    "tests/test_isolation.py::test_hidden_suite_explores_the_same_scenarios_from_cli_and_gradescope",
    # a told hidden input kept out of a companion row through the Gradescope runtime (make test checks the same rows
    # on the batch's results: test_forgery.py's hidden-input tests apply Gradescope's and PrairieLearn's formats)
    "tests/test_gradescope.py::test_hidden_inputs_in_a_failure_text_stay_in_hidden_rows",
    # bugs graded with a freshly built table (make test checks the catalogue's diagnoses with the committed one:
    # test_catalogue.py's test_a_named_mistake_is_the_bugs_own_and_sits_on_a_failing_row)
    "tests/test_diagnosis.py::test_graded_bugs_are_diagnosed_as_themselves_on_their_failing_rows",
    "tests/test_diagnosis.py::test_a_correct_variant_gets_no_diagnosis",
    "tests/test_diagnosis.py::test_listed_twins_are_named_together_when_graded",
    # a table built now for a handful of bugs and variants (in make test, test_catalogue.py checks the same on the
    # whole catalogue's grades with the committed table, which test_diagnosis_checkout.py keeps current: each
    # diagnosis the bug's own or a twin's, no variant diagnosed)
    "tests/test_diagnosis.py::test_the_table_holds_digests_only",
    "tests/test_diagnosis.py::test_each_bug_is_diagnosed_as_itself_or_a_twin_never_as_another",
    "tests/test_diagnosis.py::test_no_correct_variant_answers_a_row_like_a_bug",
    # a plan recorded once per key across processes (test_plan_cache.py's other tests stay in make test)
    "tests/test_plan_cache.py::test_one_submission_records_the_plan_once_then_reuses_it",
)
#: Modules that take longest (minutes: a graded batch per module), handed to the xdist workers first so that
#: neither ends the run alone on one of them (the Makefile's --no-loadscope-reorder keeps this order).
LONGEST_FIRST = ("tests/test_catalogue.py", "tests/test_hostile.py", "tests/test_handout_public_examples.py",
                 "tests/test_batch.py", "tests/test_isolation.py", "tests/test_diagnosis.py", "tests/test_forgery.py",
                 "tests/test_public_checks.py", "tests/test_report.py", "tests/test_classroom.py")
#: The named part of each slow suite that `make test` still runs (marker ``representative``).
REPRESENTATIVE = (
    # forgery: the batch at the namespaces level, every case of it (the other level is left to test-all)
    "tests/test_forgery.py::test_attack_earns_no_more_than_its_honest_baseline[namespaces-",
    "tests/test_forgery.py::test_delegation_fails_with_a_message_that_says_why[namespaces-",
    "tests/test_forgery.py::test_the_bug_baseline_really_loses_its_row[namespaces]",
    "tests/test_forgery.py::test_answers_file_is_read_not_run",
    "tests/test_forgery.py::test_hidden_inputs_never_reach_what_students_see_at_once[namespaces-",
    "tests/test_forgery.py::test_hidden_inputs_never_reach_what_students_see_at_once_through_failure_texts[namespaces-",
    # hostile: one graded batch of every payload serves the whole module
    "tests/test_hostile.py::",
    # a bug's first failure snippet, pasted into a fresh Python, reproduces it
    "tests/test_catalogue.py::test_first_failure_snippet_reproduces[growth_off_by_one]",
    # a failing public check names the grader's mistake locally (a hidden row's public example)
    "tests/test_catalogue.py::test_a_failing_public_check_names_the_graders_mistake[clip_before_unscale]",
    # confinement as root (CI, Gradescope); the Docker-capability and unprivileged runs are left to test-all
    "tests/test_isolation.py::test_confinement_holds_in_every_mode[root]",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def weight(item: pytest.Item) -> int:
        module = item.nodeid.split("::", 1)[0]
        return LONGEST_FIRST.index(module) if module in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=weight)  # stable: within a module, and among the rest, collection order
    for item in items:
        node = item.nodeid
        if node.startswith(SLOW):
            item.add_marker(pytest.mark.slow)
        if node.startswith(REPRESENTATIVE):
            item.add_marker(pytest.mark.representative)


def shared_dir(factory: pytest.TempPathFactory) -> Path:
    """A folder every xdist worker of this run sees (this run's base temp folder without xdist)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """``shared_dir/name``, filled by ``build(folder)`` by the first worker that asks; the others wait and reuse it.

    A build that fails leaves nothing behind, so the next worker that asks tries again (and fails the same way).
    """
    folder = shared_dir(factory) / name
    with open(shared_dir(factory) / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".done").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            try:
                build(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            (folder / ".done").touch()
    return folder


@pytest.fixture(scope="session", autouse=True)
def plan_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Recorded call plans for this run only (shared by its workers): never the user's cache, never a stale one."""
    folder = shared_dir(tmp_path_factory) / "plan-cache"
    folder.mkdir(mode=0o700, exist_ok=True)
    os.environ["AMP_PLAN_CACHE"] = str(folder)  # inherited by every grading process the tests start
    return folder


def grade(paths: list[Path], out: Path, *extra: str, env: dict[str, str] | None = None,
          timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run ``python -m autograder grade`` in a fresh process, as a TA would."""
    return subprocess.run([sys.executable, "-m", "autograder", "grade", *map(str, paths), "--out", str(out), *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def load_results(out: Path, name: str) -> dict[str, Any]:
    return json.loads((out / name / "results.json").read_text())


@pytest.fixture(scope="session")
def graded_examples(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """results.json of the three bundled examples, graded once per test run (whatever the number of workers)."""
    def build(out: Path) -> None:
        done = grade(list(EXAMPLES.values()), out)
        assert done.returncode == 0, done.stderr[-3000:]

    out = built_once(tmp_path_factory, "graded-examples", build)
    return {name: load_results(out, name) for name in EXAMPLES}


def shown(results: dict[str, Any]) -> str:
    """Everything a results.json shows: what student code prints during a test sits in that test's row
    (a hidden test's after the due date), not at the top level (see judge.route_output)."""
    return "\n".join([results["output"], *(str(test.get("output", "")) for test in results["tests"])])


@functools.lru_cache(maxsize=None)
def cuda_works() -> bool:
    """Whether torch can compute on a GPU here, asked in a child process.  On a CUDA build, asking in this one
    (``torch.cuda.is_available()``) marks every later fork of it as unable to use CUDA, the sandbox's zygote
    included, so a test process that asked would fail the GPU preflight for a reason no grader has."""
    import torch

    if not torch.backends.cuda.is_built():
        return False
    done = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                          capture_output=True, text=True, timeout=300)
    return done.stdout.strip() == "True"


def cuda_failed_to_start(trace: str) -> bool:
    """Whether ``trace`` is torch failing to start CUDA, in either build's words (a CPU build: "not compiled with
    CUDA"; a CUDA build without a driver or a GPU: "no NVIDIA driver", "no CUDA GPUs"): torch's CUDA start-up raised it."""
    return "_lazy_init" in trace and "torch" in trace and "cuda" in trace


def in_ci() -> bool:
    """Whether this run is CI's: ``CI`` is set (hosted CI exports ``CI=true``; so does .ci/run), and not to 0 or false."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def skip_unless_ci(reason: str) -> NoReturn:
    """Skip the calling test for ``reason`` (something this machine lacks: root, setpriv, chromium); in CI, fail.

    CI has all of them, and a test it skipped would hide the claim it proves.  Outside CI ``make test`` lists
    every skip with its reason (``-rs``).
    """
    __tracebackhide__ = True
    if in_ci():
        pytest.fail(f"{reason}: CI must run this test, and this CI cannot (CI={os.environ['CI']!r})", pytrace=False)
    pytest.skip(reason)


BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> str | None:
    """A headless-capable browser on ``PATH`` (looked for, never installed: see :func:`headless_browser`)."""
    return next((found for name in BROWSERS if (found := shutil.which(name))), None)


@pytest.fixture(scope="session")
def headless_browser() -> str:
    """A headless Chromium for the HTML reports' tests; installed with apt where we are root and may.

    Missing and not installable: the test skips, except in CI, where it fails (:func:`skip_unless_ci`).
    """
    found = find_browser()
    if found is None and os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        install = ["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"]
        if subprocess.run(install, capture_output=True, env=env, timeout=1200).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, timeout=600)
            subprocess.run(install, capture_output=True, env=env, timeout=1200)
        found = find_browser()
    if found is None:
        skip_unless_ci("no chromium here, and it could not be installed (Debian: apt-get install chromium)")
    return found


def processes_mentioning(text: str) -> list[int]:
    """Live processes whose command line holds ``text`` (forks of a process share its command line)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if text.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def gone_within(text: str, seconds: float) -> list[int]:
    """Wait up to ``seconds`` for every process mentioning ``text`` to end; those still alive after."""
    deadline = time.monotonic() + seconds
    while processes_mentioning(text) and time.monotonic() < deadline:
        time.sleep(0.2)
    return processes_mentioning(text)



def needs_root(reason: str) -> bool:
    """Whether a skip's ``reason`` is the lack of root (the sandbox's uid switch, namespaces, chroot, Slurm)."""
    return "root" in reason.lower()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """As an ordinary user, one line: how many tests skipped for want of root, and how to run them."""
    if os.geteuid() == 0:
        return
    skipped = [report for report in terminalreporter.stats.get("skipped", [])
               if isinstance(report.longrepr, tuple) and needs_root(str(report.longrepr[2]))]
    if skipped:
        terminalreporter.write_line(f"{len(skipped)} test(s) need root and were skipped (uid {os.geteuid()}): run "
                                    f"them as root from this folder, e.g. `sudo make test` (docs/newcomer.md)")
