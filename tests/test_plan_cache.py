"""The recorded call plan kept on disk (autograder/engine/plan_cache.py), and the batch's main process kept light.

A plan decides grades (a case whose answers match it passes) and holds hidden inputs: the
cache must hand back only what this user wrote for exactly this grader and reference, and
a one-submission run must reuse what an earlier run recorded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from autograder import settings
from autograder.engine import plan, plan_cache
from conftest import ROOT, grade, load_results

SOLUTIONS = ROOT / "solutions"


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(settings.PLAN_CACHE.env, str(folder))
    return folder


def copy_of(folder: Path, target: Path) -> Path:
    shutil.copytree(folder, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def test_kept_plan_is_private_and_read_back_only_under_its_key(cache: Path) -> None:
    written = plan_cache.write("a" * 64, '{"cases": []}')
    assert written is not None and written.parent == cache
    assert cache.stat().st_mode & 0o777 == 0o700 and written.stat().st_mode & 0o777 == 0o600
    assert plan_cache.read("a" * 64) == '{"cases": []}'
    assert plan_cache.read("b" * 64) is None  # another grader's key
    assert plan_cache.read("a" * 32 + "b" * 32) is None  # same file name, other key: the header tells
    assert not [p for p in cache.iterdir() if p.name.startswith(".")], "a temporary file was left behind"


@pytest.mark.parametrize("damage", ["garbage", "readable by others", "symlink", "truncated header"])
def test_damaged_or_foreign_files_are_ignored(cache: Path, tmp_path: Path, damage: str) -> None:
    key = "c" * 64
    path = plan_cache.write(key, '{"cases": []}')
    assert path is not None
    if damage == "garbage":
        path.write_bytes(b"\x00\xff not a plan")
    elif damage == "readable by others":
        path.chmod(0o644)
    elif damage == "symlink":
        elsewhere = tmp_path / "elsewhere.json"
        elsewhere.write_bytes(path.read_bytes())
        elsewhere.chmod(0o600)
        path.unlink()
        path.symlink_to(elsewhere)
    else:
        path.write_text(path.read_text()[:20])
    assert plan_cache.read(key) is None


def test_an_unwritable_cache_costs_speed_not_grades(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(settings.PLAN_CACHE.env, str(blocker / "cache"))
    assert plan_cache.write("d" * 64, "{}") is None
    assert "could not be kept" in capsys.readouterr().err


def test_key_follows_the_reference_the_hidden_tests_and_the_switches(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    reference = copy_of(SOLUTIONS, tmp_path / "reference")
    key = plan_cache.plan_key(reference)
    assert plan_cache.plan_key(reference) == key  # deterministic
    scaler = reference / "loss_scaler.py"
    scaler.write_text(scaler.read_text() + "\n# an edit\n")
    edited = plan_cache.plan_key(reference)
    assert edited != key
    hidden = copy_of(ROOT / "autograder" / "hidden", tmp_path / "hidden")
    monkeypatch.setenv("AMP_HIDDEN_TESTS", str(hidden))
    elsewhere = plan_cache.plan_key(reference)
    first = sorted(hidden.glob("test_*.py"))[0]
    first.write_text(first.read_text() + "\n# a changed hidden test\n")
    changed_tests = plan_cache.plan_key(reference)
    assert changed_tests not in (edited, elsewhere)
    monkeypatch.setenv(*settings.test_hooks_env(die_on="nobody").popitem())
    assert plan_cache.plan_key(reference) != changed_tests
    monkeypatch.delenv(settings.HOOKS.env)


def test_one_recording_per_key_at_a_time(cache: Path) -> None:
    """A second worker waits for the first one's recording (then reads it) instead of recording too."""
    entered = threading.Event()

    def second() -> None:
        with plan_cache.recording("e" * 64):
            entered.set()

    with plan_cache.recording("e" * 64):
        waiter = threading.Thread(target=second)
        waiter.start()
        assert not entered.wait(0.5), "a second recording of the same key started while the first ran"
        with plan_cache.recording("f" * 64):  # another key is not held up
            pass
    assert entered.wait(10)
    waiter.join()


class _Reference:
    """A stand-in runner over the reference: answers every call with ``answer`` (prefetch's text)."""

    def __init__(self, answer: str) -> None:
        self.answer = answer

    def begin_test(self, name: str, *, public: bool = False) -> None:
        pass

    def prefetch(self, calls: list[Any], keys: list[str] | None = None) -> list[str]:
        return [self.answer] * len(calls)


def test_a_cached_plan_is_checked_against_the_reference_before_a_batch_trusts_it() -> None:
    recorded = plan.Plan([plan.Case("test_x", "test_x[a]", [plan.Call("scale", {}, None, '{"ok": 1}')]),
                          plan.Case("test_y", "test_y", [])])
    assert plan.reference_agrees(recorded, _Reference('{"ok": 1}'))
    assert not plan.reference_agrees(recorded, _Reference('{"ok": 2}'))


def test_one_submission_records_the_plan_once_then_reuses_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env = {settings.PLAN_CACHE.env: str(cache)}
    logs = []
    for run in ("first", "second"):
        done = grade([SOLUTIONS], tmp_path / run, env=env)
        assert done.returncode == 0, done.stderr[-3000:]
        assert load_results(tmp_path / run, "solutions")["score"] == 90
        logs.append((tmp_path / run / "solutions" / "staff.log").read_text())
    assert "call plan (recorded now)" in logs[0] and "call plan (cached)" in logs[1]
    [kept] = cache.glob("plan-*.json")
    kept.write_text("damaged")  # a damaged file is ignored, recorded again and replaced
    done = grade([SOLUTIONS], tmp_path / "third", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "call plan (recorded now)" in (tmp_path / "third" / "solutions" / "staff.log").read_text()
    assert load_results(tmp_path / "third", "solutions")["score"] == 90
    assert kept.read_text().startswith("amp-homework call plan")


def test_the_batch_process_itself_imports_neither_torch_nor_pytest() -> None:
    """Its workers import them (after their zygote forks); the process that starts them must not pay for it."""
    probe = ("import sys; import autograder.cli; from autograder.batch import run, pools, summary, similarity; "
             "print(sorted(m for m in ('torch', 'pytest', 'hypothesis', 'matplotlib') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_library_versions_in_the_key_are_importlib_metadatas(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key's library versions are read from the dist-info folder's name: the same as importlib.metadata's, for
    the real libraries and for a package with a leftover second dist-info folder (then importlib.metadata decides)."""
    from importlib import metadata

    from autograder.engine import fingerprint

    assert [fingerprint._version(name) for name in fingerprint.LIBRARIES] == [
        metadata.version(name) for name in fingerprint.LIBRARIES]
    site = tmp_path / "site"
    (site / "fakelib").mkdir(parents=True)
    (site / "fakelib" / "__init__.py").write_text("")
    for version in ("1.2.3", "0.9"):
        info = site / f"fakelib-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: fakelib\nVersion: {version}\n")
        if version == "1.2.3":
            monkeypatch.syspath_prepend(str(site))
            assert fingerprint._version("fakelib") == metadata.version("fakelib") == "1.2.3"
    assert fingerprint._version("fakelib") == metadata.version("fakelib")  # two folders: importlib.metadata's pick
    assert fingerprint._version("not_installed_anywhere") is None
