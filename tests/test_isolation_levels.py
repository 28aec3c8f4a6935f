"""The isolation levels layer by layer, without a grading run (tests/test_isolation.py grades with them).

* ``seccomp`` and ``none``: what :func:`confine.confine` applies and reports when Landlock, then libseccomp,
  is missing, and what :func:`confine.probe_level` (the level a run reports and refuses by) measures then;
* the scratch watcher: below ``namespaces`` (no size-capped tmpfs), a call that fills scratch is stopped and
  fails with the scratch message.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.sandbox import budget, confine, syscalls
from conftest import ROOT, skip_unless_ci
from test_isolation import IS_ROOT, MODES, needs, submission, workspace  # noqa: F401 - a fixture


# --------------------------------------------------------------------------- the weaker levels, one layer at a time


LEVEL_CHILD = """
import errno, json, os, socket, sys
sys.path[:0] = [{root!r}]
from autograder.sandbox import confine, syscalls
if {no_landlock!r}:
    confine.landlock = None  # as on a kernel without Landlock
if {no_seccomp!r}:
    syscalls.seccomp = None  # as without libseccomp
os.environ["AMP_LEAK"] = "secret"
scratch = {scratch!r}
report = {{"level": confine.confine(scratch, scratch, False)}}
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    report["tcp socket"] = "made"
except OSError as exc:
    report["tcp socket"] = errno.errorcode.get(exc.errno, str(exc.errno))
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
made = libc.shmget(0, 4096, 0o1600)  # IPC_PRIVATE | IPC_CREAT
report["shmget"] = "made" if made >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
if made >= 0:
    libc.shmctl(made, 0, None)  # IPC_RMID: leave nothing behind
try:
    report["read outside"] = len(open({outside!r}).read())
except OSError as exc:
    report["read outside"] = type(exc).__name__
report["env"] = sorted(os.environ)
print(json.dumps(report))
"""


@pytest.mark.parametrize("level, no_landlock, no_seccomp", [("seccomp", True, False), ("none", True, True)])
def test_the_weaker_levels_report_what_they_apply(level: str, no_landlock: bool, no_seccomp: bool,
                                                  tmp_path: Path) -> None:
    """Without Landlock the level is ``seccomp``: TCP sockets and SysV IPC are refused, files are not guarded by
    Landlock; without libseccomp too it is ``none``: nothing is refused. Either way the environment is clean."""
    if syscalls.seccomp is None:
        skip_unless_ci("the pyseccomp binding or libseccomp.so.2 is missing here")
    outside = tmp_path / "grader-file.txt"
    outside.write_text("x")
    code = LEVEL_CHILD.format(root=str(ROOT), no_landlock=no_landlock, no_seccomp=no_seccomp,
                              scratch=str(tmp_path), outside=str(outside))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["level"] == level
    assert set(report["env"]) == set(confine.clean_environment(str(tmp_path)))
    assert report["read outside"] == 1  # no Landlock in either: files rest on the uid switch and 0700 modes
    if level == "seccomp":
        assert report["tcp socket"] == "EACCES" and report["shmget"] == "EPERM"
    else:
        assert report["tcp socket"] == "made" and report["shmget"] == "made"


@pytest.mark.parametrize("missing, level", [("landlock", "seccomp"), ("landlock seccomp", "none")])
def test_the_probe_measures_the_weaker_levels(missing: str, level: str) -> None:
    """The level a run reports and refuses by (``probe_level``) drops when a layer is missing."""
    if not IS_ROOT or syscalls.seccomp is None:
        skip_unless_ci("needs root (the probe drops to nobody) and the seccomp binding")
    code = (f"import sys; sys.path[:0] = [{str(ROOT)!r}]\n"
            "from autograder.sandbox import confine, syscalls\n"
            "confine.enter_namespaces = lambda libc, is_root, tell=None: False  # as without CAP_SYS_ADMIN\n"
            + "".join(f"{'syscalls' if name == 'seccomp' else 'confine'}.{name} = None\n" for name in missing.split())
            + "print(confine.probe_level())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == level


# --------------------------------------------------------------------------- the scratch watcher during calls


WATCHED = '''
import json, sys
from pathlib import Path
sys.path[:0] = [{root!r}, {root!r} + "/assignment"]
from autograder.sandbox import runner as sandbox
sandbox.start_zygote()
from checks.runners import harness
runner = sandbox.SandboxRunner(Path({submission!r}), limits=sandbox.Limits(call_seconds=30, import_seconds=30))
runner.begin_test("t")
args = {{"world": {{"optimizers": [{{"groups": [[2]]}}], "device": "cpu"}}, "ops": [{{"op": "new"}}, {{"op": "observe"}}]}}
try:
    report = {{"outcome": "returned", "reply": json.dumps(runner.run("scaler_ops", args))[:600]}}
except harness.SubmissionFault as exc:
    report = {{"outcome": "fault", "message": str(exc)}}
report.update(isolation=runner.isolation, limits=runner.limits_hit, scratch=str(runner._scratch))
runner.close()
print("WATCHED " + json.dumps(report))
'''

FILLER = '''

_original_init = ToyLossScaler.__init__


def _filling_init(self, *args, **kwargs):  # fills scratch during a call, slowly enough for a watcher to see
    import time
    block = b"x" * (1 << 20)
    for k in range(75):  # files of 8 MiB: RLIMIT_FSIZE (16 MiB) bounds each one
        with open("filler-%d" % k, "wb") as stream:
            for _ in range(8):
                stream.write(block)
                stream.flush()
                time.sleep(0.01)
    _original_init(self, *args, **kwargs)


ToyLossScaler.__init__ = _filling_init
'''


def test_the_scratch_watcher_stops_a_call_that_fills_scratch(workspace: Path) -> None:
    """Below ``namespaces`` (no size-capped tmpfs) a watcher stops the process within moments of passing the cap,
    and the call fails with the scratch message (Docker's capabilities: no namespaces here)."""
    needs("docker")
    filler = submission(workspace / "filler", {"loss_scaler.py": FILLER})
    code = WATCHED.format(root=str(ROOT), submission=str(filler))
    done = subprocess.run(MODES["docker"] + [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env={**os.environ})
    lines = [line for line in done.stdout.splitlines() if line.startswith("WATCHED ")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-3000:]
    report = json.loads(lines[-1][len("WATCHED "):])
    assert report["isolation"] != "namespaces"  # the watcher's case, not the tmpfs's
    assert report["outcome"] == "fault" and "wrote more than 256 MiB" in report["message"], report.get("reply")
    assert report["limits"] == {"t": budget.CRASH_LIMIT}  # stopped, not left to write its 600 MiB and time out
    assert not Path(report["scratch"]).exists()


def test_a_stale_errno_does_not_read_as_a_kernel_without_landlock() -> None:
    """The binding takes any non-zero errno after its syscall for a failure: earlier code's errno must not lower
    the level (it once made a test expect ``seccomp`` where the grader, rightly, reached Landlock)."""
    fresh = subprocess.run([sys.executable, "-c", f"import sys; sys.path[:0] = [{str(ROOT)!r}]\n"
                            "from autograder.sandbox import confine; print(confine.landlock_abi())"],
                           capture_output=True, text=True, timeout=60)
    assert fresh.returncode == 0, fresh.stderr
    ctypes.set_errno(13)  # EACCES, left by some earlier call
    assert confine.landlock_abi() == int(fresh.stdout.split()[-1])


@pytest.mark.skipif(confine.landlock is None, reason="no Landlock binding")
def test_read_rules_list_each_entry_on_the_way_to_a_hidden_file_and_follow_links(tmp_path: Path) -> None:
    """Landlock only allows: a folder holding a hidden file is listed and each of its entries gets its own rule
    (recursively along the way), every rule on the real path a link leads to, the hidden file none."""
    top = tmp_path / "top"
    (top / "pkg" / "sub").mkdir(parents=True)
    for name in ("a.txt", "pkg/hidden.py", "pkg/other.py", "pkg/sub/x.py"):
        (top / name).write_text("x\n")
    (top / "to_pkg").symlink_to("pkg")  # a linked folder: the rules are its target's, listed again
    (top / "to_a").symlink_to("a.txt")
    (top / "dangling").symlink_to("nowhere")
    real = Path(os.path.realpath(top))
    read, listing, file = (confine.FSAccess.READ_FILE | confine.FSAccess.READ_DIR | confine.FSAccess.EXECUTE,
                           confine.FSAccess.READ_DIR, confine.FSAccess.READ_FILE)
    pkg = [(str(real / "pkg"), listing), (str(real / "pkg" / "other.py"), file), (str(real / "pkg" / "sub"), read)]
    expected = [(str(real), listing), (str(real / "a.txt"), file), (str(real / "nowhere"), file), *pkg,
                (str(real / "a.txt"), file), *pkg]
    rules = confine._read_rules(str(top / "to_pkg" / ".."), [str(real / "pkg" / "hidden.py")], read)
    assert rules == expected
    assert confine._read_rules(str(top / "to_pkg"), [], read) == [(str(real / "pkg"), read)]  # nothing hidden below
