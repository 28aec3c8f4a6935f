"""What grading one submission pays for besides grading it, bounded by counts and imports (never by a clock).

* The batch's main process checks its diagnosis table for staleness (a digest of ninety-odd files' syntax
  trees) at the start and again for report.html: the digest is remembered, in the process and on disk,
  under the files' bytes, so no file is parsed again while none changed, and an edit is still seen.
* Its similarity check (the submission against solutions/ and torch's scaler) uses copydetect's tokenizer
  without importing copydetect's package, whose report drawing imports matplotlib.pyplot; the page's matched
  regions are still copydetect's own.
* Fingerprints (the similarity report's lexing of a file) are kept by content: the reference solution, torch's
  scaler and the skeleton are lexed once, not in every run.
* The judge freezes torch's heap before pytest and hypothesis are imported, so the collections their
  imports trigger do not walk it.
* Processes that run ``loss_scaler.py`` fork from a Task-1 zygote that took torch's scaler out once (a full
  collection over torch's heap), not each on its own; it holds none of the zygote's descriptors, and no other
  student process holds its socket.
* Killing what a block of sandbox uids left (a worker's start, the batch's end, a runner's close) forks one
  helper, not one per uid: forking the judge, which holds torch, costs milliseconds each time.
* Recording the call plan charges a read of the runner's state to the test that made it, never to the last test
  run (the report reads import faults and missing files after every test): that test's case would run in pytest
  in every later grading instead of passing on its answers (a hidden property test: a tenth of a second).
* The Landlock rules around torch's scaler sources resolve only the links among the entries they list (a
  site-packages holds hundreds of entries, each resolved component by component before).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from autograder.batch import similarity
from autograder.batch.similarity_data import copied_slices
from autograder.engine import fingerprint, rubric
from autograder.sandbox import uids
from conftest import ROOT, skip_unless_ci


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("AMP_PLAN_CACHE", str(folder))
    monkeypatch.setattr(fingerprint, "_REMEMBERED", {})
    return folder


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    parsed: list[Path] = []
    real = fingerprint.behaviour_text
    monkeypatch.setattr(fingerprint, "behaviour_text", lambda path: parsed.append(path) or real(path))
    return parsed


def test_the_behaviour_digest_is_computed_once_per_content(cache: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    files = [tmp_path / "a.py", tmp_path / "b.py"]
    files[0].write_text('def f():\n    """Doc."""\n    return 1\n', encoding="utf-8")
    files[1].write_text("X = 2\n", encoding="utf-8")
    parsed = _counting(monkeypatch)
    first = fingerprint.behaviour_digest(files, {"rows": [1]})
    assert first == fingerprint._behaviour_digest(files, {"rows": [1]})  # the same value, remembered
    assert len(parsed) == 2 * 2
    monkeypatch.setattr(fingerprint, "_REMEMBERED", {})  # a new process: only the cache folder remembers
    assert fingerprint.behaviour_digest(files, {"rows": [1]}) == first
    assert len(parsed) == 4  # nothing parsed again
    [kept] = cache.glob("behaviour-*")
    assert kept.stat().st_mode & 0o777 == 0o600 and cache.stat().st_mode & 0o777 == 0o700
    # other settings, or a docstring reworded (same behaviour, other bytes): computed again, same rules
    assert fingerprint.behaviour_digest(files, {"rows": [2]}) != first
    files[0].write_text('def f():\n    """Reworded."""\n    return 1\n', encoding="utf-8")
    assert fingerprint.behaviour_digest(files, {"rows": [1]}) == first
    files[0].write_text('def f():\n    """Doc."""\n    return 2\n', encoding="utf-8")
    assert fingerprint.behaviour_digest(files, {"rows": [1]}) != first  # a behaviour change is seen
    assert len(parsed) == 10


def test_a_kept_digest_that_others_could_write_or_that_is_not_one_is_ignored(cache: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "a.py"
    source.write_text("X = 1\n", encoding="utf-8")
    honest = fingerprint.behaviour_digest([source], {})
    [kept] = cache.glob("behaviour-*")
    key = kept.read_text().split()[0]
    for text, mode in ((f"{key} {'0' * 64}\n", 0o666), (f"{key} not-a-digest\n", 0o600),
                       (f"{'1' * 64} {'0' * 64}\n", 0o600)):
        kept.write_text(text)
        kept.chmod(mode)
        monkeypatch.setattr(fingerprint, "_REMEMBERED", {})
        assert fingerprint.behaviour_digest([source], {}) == honest, text
        assert kept.read_text() == f"{key} {honest}\n" and kept.stat().st_mode & 0o777 == 0o600


def test_one_submissions_similarity_check_imports_no_plotting(tmp_path: Path) -> None:
    """The single-submission path: compared with solutions/ and torch's scaler, the page written, no matplotlib."""
    probe = (
        "import sys; from pathlib import Path\n"
        "from autograder.batch import similarity, inputs\n"
        f"out = Path({str(tmp_path)!r})\n"
        f"found = inputs.discover([Path({str(ROOT / 'solutions')!r})], out / '.inputs').submissions\n"
        "similarity.run_for_batch(out, found, [], None)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'copydetect', 'tqdm', 'jinja2')))\n"
        "import copydetect\n"  # the whole package still imports as usual afterwards
        "print(copydetect.CopyDetector.__name__, copydetect.utils.filter_code.__name__)\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    imported, whole = done.stdout.splitlines()
    assert imported == "[]"  # copydetect's tokenizer was used (the page below), its half-loaded package left nothing
    assert whole == "CopyDetector filter_code"
    page = (tmp_path / similarity.HTML_NAME).read_text(encoding="utf-8")
    assert "<mark class='match'>" in page  # solutions/ against itself: every region matched


def _same(found: similarity.Fingerprint, expected: similarity.Fingerprint) -> bool:
    arrays = [(getattr(found, f), getattr(expected, f)) for f in ("offsets", "positions", "values")]
    return (found.raw_code == expected.raw_code and found.filtered_code == expected.filtered_code
            and found.token_coverage == expected.token_coverage
            and all(a.dtype == b.dtype and a.shape == b.shape and (a == b).all() for a, b in arrays))


def test_fingerprints_are_lexed_once_per_content(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    codes = [(ROOT / "solutions" / "loss_scaler.py").read_text(encoding="utf-8"), "", "x = 1\n" * 40]
    skeleton = similarity.boilerplate_for("loss_scaler.py")
    expected = {(i, b): similarity._fingerprint(code, skeleton if b else None)
                for i, code in enumerate(codes) for b in (True, False)}
    lexed: list[str] = []
    real = similarity._fingerprint
    monkeypatch.setattr(similarity, "_fingerprint", lambda code, removed: lexed.append(code) or real(code, removed))
    for _ in range(2):
        for (i, b), want in expected.items():
            assert _same(similarity.fingerprint(codes[i], skeleton if b else None), want), (i, b)
    assert len(lexed) == len(expected)  # the second round read every one back
    assert similarity.boilerplate_for("loss_scaler.py").tolist() == skeleton.tolist()
    kept = sorted(cache.glob("fingerprint-*.npz"))
    assert len(kept) == len(expected) and all(path.stat().st_mode & 0o777 == 0o600 for path in kept)
    for path in kept:  # writable by others: not trusted, lexed again and replaced
        path.chmod(0o666)
    for (i, b), want in expected.items():
        assert _same(similarity.fingerprint(codes[i], skeleton if b else None), want)
    assert len(lexed) == 2 * len(expected)


def test_the_pages_matched_regions_are_copydetects() -> None:
    from copydetect.detector import compare_files

    codes = [path.read_text(encoding="utf-8") for path in (
        ROOT / "solutions" / "loss_scaler.py", ROOT / "examples" / "partially_correct" / "loss_scaler.py",
        ROOT / "tests" / "catalogue" / "variants" / "plain_style" / "loss_scaler.py",
        ROOT / "assignment" / "loss_scaler.py")] + [""]
    prints = [similarity.fingerprint(code) for code in codes]
    matched = 0
    for first, second in itertools.permutations(prints, 2):
        _, _, expected = compare_files(first, second)
        found = copied_slices(first, second)
        assert [s.tolist() for s in found] == [s.tolist() for s in expected]
        matched += bool(found[0].size)
    assert matched >= 6


def test_the_judge_freezes_torchs_heap_before_importing_pytest() -> None:
    """Counted where pytest's import begins: every object the zygote shares is out of the collector's reach."""
    probe = (
        "import gc, sys\n"
        "seen = []\n"
        "class Watch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pytest' and not seen:\n"
        "            seen.append((gc.get_freeze_count(), 'torch' in sys.modules))\n"
        "sys.meta_path.insert(0, Watch())\n"
        "from autograder.engine import grader\n"
        "grader.start()\n"
        "print(seen[0][0] > 100_000, seen[0][1], gc.isenabled())\n")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'assignment'}"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "True", "True"]


def _sleeper(uid: int | None) -> int:
    pid = os.fork()
    if pid == 0:
        try:
            if uid is not None:
                os.setgid(uid)
                os.setuid(uid)
            os.setsid()  # out of the test's process group, as an escaped student process would be
            time.sleep(120)
        finally:
            os._exit(0)
    return pid


@pytest.mark.parametrize("helper", ["one for every uid", "refused: one per uid"])
def test_kill_uid_ends_every_process_of_its_uids_and_no_other(helper: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() != 0:
        skip_unless_ci("uids are switched by root only")
    block = list(uids.block(uids.DEFAULT_BASE - uids.BLOCK))  # below every block a grader claims
    if helper != "one for every uid":  # a machine where the helper cannot take a uid and give it back
        monkeypatch.setattr(uids, "_kill_each", lambda _uids: os.setresuid(block[0], block[0], block[0]) or 1 / 0)
    inside = [_sleeper(block[1]), _sleeper(block[2]), _sleeper(block[-1])]
    outside = [_sleeper(None), _sleeper(block[-1] + 1)]  # the grader's own uid, the next block's first
    forks = []
    real_fork = os.fork
    monkeypatch.setattr(os, "fork", lambda: forks.append(1) or real_fork())
    try:
        uids.kill_uid(*block)
        monkeypatch.setattr(os, "fork", real_fork)
        assert [os.waitpid(pid, 0)[1] & 0x7F for pid in inside] == [signal.SIGKILL] * 3
        assert [os.waitpid(pid, os.WNOHANG) for pid in outside] == [(0, 0), (0, 0)]
        assert len(forks) == (1 if helper == "one for every uid" else 1 + len(block))
    finally:
        for pid in inside + outside:
            try:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass


TASK1 = '''
import json, os, sys
from pathlib import Path
sys.path[:0] = [{root!r}, {root!r} + "/assignment"]
def fds(pid):
    found = {{}}
    for f in os.listdir(f"/proc/{{pid}}/fd"):
        try:
            found[f] = os.readlink(f"/proc/{{pid}}/fd/{{f}}")
        except FileNotFoundError:  # the listing's own
            pass
    return found
before = fds(os.getpid())
from autograder.sandbox import runner as sandbox
zygote = sandbox.start_zygote()
runner = sandbox.SandboxRunner(Path({root!r}) / "solutions", limits=sandbox.Limits(call_seconds=30, import_seconds=30))
args = {{"world": {{"optimizers": [{{"groups": [[2]]}}], "device": "cpu"}}, "ops": [{{"op": "new"}}, {{"op": "observe"}}]}}
def parent(pid):
    return int(Path(f"/proc/{{pid}}/stat").read_text().rsplit(")", 1)[1].split()[1])
parents = []
for test, public in (("public", True), ("hidden", False)):  # in phase order: each ends the one before
    runner.begin_test(test, public=public)
    runner.run("scaler_ops", args)
    parents += [parent(p.pid) for p in runner._live()]
task2 = runner._start(("amp_step",))
helpers = [int(p) for p in os.listdir("/proc") if p.isdigit() and parent(p) == zygote.pid and int(p) != task2.pid]
print(json.dumps({{"zygote": zygote.pid, "helpers": helpers,
                  "parents": parents,
                  "task2_parent": parent(task2.pid),
                  "helper_fds": sorted(t.split(":")[0] for f, t in fds(helpers[0]).items() if before.get(f) != t),
                  "task2_sockets": sorted(t.split(":")[0] for t in fds(task2.pid).values() if t.startswith("socket"))}}))
runner.close()
'''


def test_task1_processes_fork_from_one_zygote_that_holds_nothing_else() -> None:
    probe = TASK1.format(root=str(ROOT))
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    [helper] = found["helpers"]  # one Task-1 zygote, the zygote's child, for the hidden and the public process
    assert found["parents"] == [helper, helper]
    assert found["task2_parent"] == found["zygote"]  # amp_step.py alone keeps torch's scaler: the zygote's own
    # beyond what the grader had open at start: its one socket, and as root its own PID namespace (where it returns
    # after forking each student process as the init of a new one)
    assert found["helper_fds"] == (["pid", "socket"] if os.geteuid() == 0 else ["socket"])
    assert found["task2_sockets"] == []  # no student process can ask a zygote for processes


def test_reads_after_the_last_test_mark_no_case_of_the_recorded_plan(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from autograder.engine import judge, plan

    class Reference:  # the runner the recording wraps: answers every call
        submission, import_faults, scenarios_run = tmp_path, {}, 0

        def begin_test(self, name: str, *, public: bool = False) -> None:
            pass

        def run(self, scenario: str, args: dict[str, object], *, timeout: float | None = None) -> int:
            return 1

        def source(self, module: str) -> str:
            return ""

        def output_by_test(self) -> dict[str, str]:
            return {}

        def close(self) -> None:
            pass

    def suites(runner: plan.RecordingRunner, items: tuple[object, ...]) -> tuple[list[judge.Outcome], str]:
        runner.begin_test("test_reads_the_source")  # a test whose verdict depends on more than its answers
        runner.source("loss_scaler")
        runner.run("scaler_ops", {})
        runner.begin_test("test_answers_only")  # the last test run: answers alone
        runner.run("scaler_ops", {})
        return [judge.Outcome(item.test, item.test, True) for item in rubric.ITEMS], ""

    monkeypatch.setattr(judge, "run_suites", suites)
    recorded = plan.record(tmp_path, runner_factory=lambda folder: Reference())
    assert {case.name: case.answers_only for case in recorded.cases} == {"test_reads_the_source": False,
                                                                       "test_answers_only": True}
