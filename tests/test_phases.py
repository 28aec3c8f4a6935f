"""Causality: student processes of two kinds are never alive at once (autograder/sandbox/phases.py).

Within a grading, Task 1's processes (torch's scaler taken out) never live beside a process that holds torch's real
GradScaler, and no process whose output is shown at once starts after one that served a hidden input; across the
gradings of one machine, two kinds are never alive at once (the rooms).  The runner records when each of its
processes was alive (test hook ``phase_log``); a submission that looks for a live holding process from Task 1 (a
file lock taken by its amp_step.py) must never find one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from autograder import settings
from autograder.sandbox import phases
from conftest import EXAMPLES, ROOT, grade, load_results, shown

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")

SOLUTION = {name: (ROOT / "solutions" / name).read_text() for name in ("loss_scaler.py", "amp_step.py", "answers.py")}

#: The solution's amp_step.py, plus: at import, an open file description locks torch's version.py for reading, as
#: long as the process lives (a lock anyone who can read the file sees).
HOLDS_A_LOCK = SOLUTION["amp_step.py"] + '''

import fcntl as _fcntl
import struct as _struct
import torch as _torch

_held = open(_torch.version.__file__, "rb")
try:
    _fcntl.fcntl(_held, 37, _struct.pack("hhqqii", _fcntl.F_RDLCK, 0, 0, 0, 0, 0))  # F_OFD_SETLK
    print("LOCK-TAKEN", flush=True)
except OSError as _exc:
    print("LOCK-REFUSED", _exc, flush=True)
'''

#: The solution's loss_scaler.py, plus: at import and at every scaler made, it asks whether some process holds a
#: lock on torch's version.py, and says so (once) when one does: a holding process of this submission is alive.
LOOKS_FOR_A_HOLDER = SOLUTION["loss_scaler.py"] + '''

import fcntl as _fcntl
import struct as _struct
import torch as _torch

_told = []


def _look():
    try:
        with open(_torch.version.__file__, "rb") as probe:
            found = _fcntl.fcntl(probe, 36, _struct.pack("hhqqii", _fcntl.F_WRLCK, 0, 0, 0, 0, 0))  # F_OFD_GETLK
    except OSError:
        return
    if _struct.unpack("hhqqii", found)[0] != _fcntl.F_UNLCK and not _told:
        _told.append(True)
        print("HOLDER-ALIVE", flush=True)


_look()
_Honest = ToyLossScaler


class ToyLossScaler(_Honest):
    def __init__(self, *args, **kwargs):
        _look()
        super().__init__(*args, **kwargs)
'''
LOOKER = {"loss_scaler.py": LOOKS_FOR_A_HOLDER, "amp_step.py": HOLDS_A_LOCK, "answers.py": SOLUTION["answers.py"]}


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def _lifetimes(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _overlap(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a["born"] < b["gone"] and b["born"] < a["gone"]


def assert_phases_hold(lives: list[dict[str, Any]]) -> None:
    """No two kinds alive at once (machine-wide, so within each grading too); within a grading, every process of a
    public kind started before the first of a hidden kind."""
    clashes = [(a, b) for i, a in enumerate(lives) for b in lives[i + 1:] if a["kind"] != b["kind"] and _overlap(a, b)]
    assert not clashes, clashes[:3]
    for grading in {life["grading"] for life in lives}:
        own = [life for life in lives if life["grading"] == grading]
        hidden = [life["born"] for life in own if not life["kind"].startswith("public")]
        late = [life for life in own if life["kind"].startswith("public") and hidden and life["born"] > min(hidden)]
        assert not late, late


def _graded(tmp_path: Path, submissions: dict[str, dict[str, str] | Path], *extra: str) -> tuple[Path, list[Any]]:
    folders = []
    for name, files in submissions.items():
        folders.append(shutil.copytree(files, tmp_path / "in" / name) if isinstance(files, Path)
                       else _write(tmp_path / "in" / name, files))
    log = tmp_path / "phases.jsonl"
    done = grade(folders, tmp_path / "out", *extra, env=settings.test_hooks_env(phase_log=str(log)))
    assert done.returncode == 0, done.stderr[-3000:]
    return tmp_path / "out", _lifetimes(log)


def _by_grading(lives: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Each grading's lives, gradings in the order their first process was born."""
    gradings: dict[str, list[dict[str, Any]]] = {}
    for life in sorted(lives, key=lambda life: life["born"]):
        gradings.setdefault(life["grading"], []).append(life)
    return list(gradings.values())


def _kinds_in_turn(lives: list[dict[str, Any]]) -> list[str]:
    """The kinds of ``lives`` in order of birth, each run of one kind said once."""
    order = [life["kind"] for life in sorted(lives, key=lambda life: life["born"])]
    return [kind for i, kind in enumerate(order) if i == 0 or kind != order[i - 1]]


def test_one_grading_goes_through_the_four_phases_in_order_and_task_1_never_sees_a_holder(tmp_path: Path) -> None:
    out, lives = _graded(tmp_path / "alone", {"looker": LOOKER})
    assert_phases_hold(lives)
    assert _kinds_in_turn(_by_grading(lives)[-1]) == [kind.name for kind in phases.KINDS]  # each kind's started once
    results = load_results(out, "looker")
    text = shown(results)
    # the holder held its lock, or seccomp refused it (locks are off the allow-list: a second wall, not this one)...
    assert results["score"] == 90 and ("LOCK-TAKEN" in text or "LOCK-REFUSED" in text), text[:2000]
    assert "HOLDER-ALIVE" not in text  # ...and no Task-1 process ever saw it

    # A wave (one worker, two submissions): each kind once for both, and the looker graded exactly as alone.
    out, lives = _graded(tmp_path / "wave", {"looker": LOOKER, "solution_again": ROOT / "solutions"}, "--jobs", "1")
    assert_phases_hold(lives)
    wave = _by_grading(lives)[-2:]
    assert [_kinds_in_turn(grading) for grading in wave] == [[kind.name for kind in phases.KINDS]] * 2
    assert _kinds_in_turn(wave[0] + wave[1]) == [kind.name for kind in phases.KINDS]  # in turns, kind by kind
    alone = {key: value for key, value in results.items() if key != "execution_time"}
    in_wave = load_results(out, "looker")
    assert {key: value for key, value in in_wave.items() if key != "execution_time"} == alone
    assert load_results(out, "solution_again")["score"] == 90


@pytest.mark.slow
def test_a_batch_never_has_two_kinds_alive_at_once(tmp_path: Path) -> None:
    out, lives = _graded(tmp_path, {"looker": LOOKER, **EXAMPLES, "solution_again": ROOT / "solutions"},
                         "--jobs", "2")
    assert_phases_hold(lives)
    assert len({life["grading"] for life in lives}) >= 5  # the plan's recording, and one runner per submission
    assert load_results(out, "looker")["score"] == 90 and "HOLDER-ALIVE" not in shown(load_results(out, "looker"))
    assert [load_results(out, name)["score"] for name in EXAMPLES] == [90, 0, 70]


# -- the rooms themselves


def _held_by_someone(path: Path) -> bool:
    """Whether some other open file description holds a lock on ``path`` (a non-blocking try fails)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        return phases.held(fd)
    finally:
        os.close(fd)


def _until(condition: Any) -> None:
    """Wait until ``condition()`` holds (polled; the test's own timeout bounds it)."""
    pause = threading.Event()
    while not condition():
        pause.wait(0.01)


def _enter_in_thread(rooms: phases.Rooms, kind: int) -> tuple[threading.Thread, threading.Event]:
    entered = threading.Event()

    def enter() -> None:
        rooms.enter(kind)
        entered.set()

    thread = threading.Thread(target=enter, daemon=True)
    thread.start()
    return thread, entered


def test_a_room_waits_until_every_other_room_is_empty(tmp_path: Path) -> None:
    first, second = phases.Rooms(tmp_path / "rooms"), phases.Rooms(tmp_path / "rooms")
    first.enter(0)
    thread, entered = _enter_in_thread(second, 1)
    _until(lambda: _held_by_someone(tmp_path / "rooms" / "want-public-holding") or entered.is_set())  # the second waits for its room
    assert not entered.is_set() and first.inside == 0
    first.leave()
    thread.join(60)
    assert entered.is_set() and second.inside == 1
    second.leave()


def test_the_turn_goes_round_in_phase_order_so_a_grading_behind_goes_first(tmp_path: Path) -> None:
    inside, ahead, behind = (phases.Rooms(tmp_path / "rooms") for _ in range(3))
    inside.enter(1)
    ahead_thread, ahead_in = _enter_in_thread(ahead, 3)  # waits for hidden-holding
    _until(lambda: _held_by_someone(tmp_path / "rooms" / "want-hidden-holding") or ahead_in.is_set())
    behind_thread, behind_in = _enter_in_thread(behind, 2)  # waits for hidden-absent, asked later
    _until(lambda: _held_by_someone(tmp_path / "rooms" / "want-hidden-absent") or behind_in.is_set())
    assert not ahead_in.is_set() and not behind_in.is_set()
    inside.leave()
    behind_thread.join(60)
    assert behind_in.is_set() and not ahead_in.is_set()  # room 2 comes after room 1, before room 3
    behind.leave()
    ahead_thread.join(60)
    assert ahead_in.is_set()
    ahead.leave()


def test_a_wait_for_a_room_is_neither_the_budget_nor_the_time_reported(tmp_path: Path) -> None:
    from autograder.engine import grader, intake
    from autograder.sandbox import runner as sandbox

    folder = tmp_path / "rooms"
    staged = intake.stage(ROOT / "solutions")
    # the runner (and with it the zygote) first, as in every grader: a fork after a room is entered keeps it locked
    runner = sandbox.SandboxRunner(staged.folder, rooms=phases.Rooms(folder))
    other = phases.Rooms(folder)
    other.enter(3)  # another grading is inside hidden-holding
    try:
        grading = grader._Grading("solutions", ROOT / "solutions", runner.limits)
        grading.runner = runner
        began = time.monotonic()
        budget, own = runner._budget_left(), grading._own()
        thread = threading.Thread(target=runner._enter_phase, args=(0,), daemon=True)
        thread.start()
        _until(lambda: _held_by_someone(folder / "want-public-absent"))  # it waits for public-absent
        seen = time.monotonic()
        _until(lambda: time.monotonic() > seen + 0.05)  # the other grading's turn goes on a while
        other.leave()
        waited = time.monotonic() - seen  # at least: it was waiting before it was seen, and entered after
        thread.join(60)
        charged, counted = budget - runner._budget_left(), grading._own() - own
        elapsed = time.monotonic() - began  # since before the first reading, until after the last
        assert runner._kind == 0 and waited >= 0.05
        assert charged <= elapsed - waited  # the wait is not charged to its budget...
        assert counted <= elapsed - waited  # ...nor counted in its execution_time
    finally:
        runner.close()
        shutil.rmtree(staged.folder, ignore_errors=True)


def test_many_may_share_a_room(tmp_path: Path) -> None:
    first, second = phases.Rooms(tmp_path / "rooms"), phases.Rooms(tmp_path / "rooms")
    first.enter(2)
    thread, entered = _enter_in_thread(second, 2)
    thread.join(60)
    assert entered.is_set() and first.inside == second.inside == 2
    first.leave()
    second.leave()


def test_a_thread_inside_a_room_may_not_wait_for_another(tmp_path: Path) -> None:
    first, second = phases.Rooms(tmp_path / "rooms"), phases.Rooms(tmp_path / "rooms")
    first.enter(0)
    with pytest.raises(phases.PhaseOrderError):
        second.enter(1)  # it would wait for itself for ever
    first.leave()
    second.enter(1)
    second.leave()


def test_a_grading_killed_inside_a_room_frees_it(tmp_path: Path) -> None:
    inside = subprocess.Popen([sys.executable, "-c", (
        "import sys, threading; from pathlib import Path; from autograder.sandbox import phases; "
        "phases.Rooms(Path(sys.argv[1])).enter(0); print('inside', flush=True); threading.Event().wait()"),
        str(tmp_path / "rooms")], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert inside.stdout is not None and inside.stdout.readline().strip() == "inside"
        waiting = phases.Rooms(tmp_path / "rooms")
        thread, entered = _enter_in_thread(waiting, 3)
        _until(lambda: _held_by_someone(tmp_path / "rooms" / "want-hidden-holding") or entered.is_set())
        assert not entered.is_set()
        inside.kill()  # SIGKILL: no clean-up of its own
        thread.join(60)
        assert entered.is_set()
        waiting.leave()
    finally:
        inside.kill()
        inside.wait()


def test_the_rooms_folder_must_be_this_users_alone(tmp_path: Path) -> None:
    folder = tmp_path / "rooms"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    with pytest.raises(RuntimeError, match="0700"):
        phases.Rooms(folder).enter(0)
    folder.chmod(0o700)
    rooms = phases.Rooms(folder)
    rooms.enter(1)  # the refusal left this thread inside no room: another may be entered
    rooms.leave()
