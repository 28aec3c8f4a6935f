"""The audit hook (autograder/engine/guard.py) refuses what docs/security.md says it refuses, and only that.

Each attempt runs twice in a fresh interpreter: once with the audit hook armed
(``guard.install``), once without.  The unguarded run is the positive control: every
attempt succeeds there, so a refusal in the guarded run is the guard's doing, not a
sandbox, a missing permission or a typo in the attempt.  One interpreter per mode runs
every attempt (importing torch, which the guard needs, costs seconds): the whole file
takes a few seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

#: Attempts run in a student-like process, by name.  Each is the body of a function; what it returns is ignored.
#: Every attempt cleans up after itself when it is allowed (the unguarded control run really does these things).
ATTEMPTS = {
    # CPython drops a new hook silently when an existing one refuses it: the attempt checks that it runs.
    "sys.addaudithook": "seen = []\nsys.addaudithook(lambda event, args: seen.append(event))\nsys.audit('amp.probe')\n"
                        "if 'amp.probe' not in seen:\n    raise guard.Refused('sys.addaudithook: the new hook never ran')",
    "ctypes": "ctypes.CDLL(None).getpid()",
    "socket": "socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()",
    "unix socket": "socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close()",
    "subprocess": "subprocess.run(['true'], check=True)",
    "os.system": "os.system('true')",
    "os.fork": "pid = os.fork()\nif pid == 0:\n    os._exit(0)\nos.waitpid(pid, 0)",
    "os.kill": "os.kill(os.getpid(), 0)",
    "read outside the submission": "open(OUTSIDE).read()",
    "write into the submission": "open(os.path.join(SUBMISSION, 'forged.txt'), 'w').close()",
    "write outside scratch via os.open": "os.close(os.open(OUTSIDE + '.new', os.O_WRONLY | os.O_CREAT, 0o600))",
    # what honest code does, and what the hook no longer refuses (no grade rests on the process's own state)
    "gc.get_objects": "gc.get_objects()",
    "frames and tracebacks": "try:\n    1 / 0\nexcept ZeroDivisionError as exc:\n    exc.__traceback__.tb_frame.f_back\n"
                             "sys._getframe().f_globals",
    "tracing": "sys.settrace(lambda *a: None); sys.settrace(None)",
    "compile and exec": "exec(compile('x = 1', 'mine', 'exec'), {})",
    "__class__ and __code__": "class A:\n    pass\nclass B:\n    pass\nA().__class__ = B\n"
                              "def f():\n    return 1\ndef g():\n    return 2\nf.__code__ = g.__code__",
    "namedtuple and dataclass": "import collections, dataclasses\n"
                                "collections.namedtuple('P', 'x')(1)\n"
                                "dataclasses.make_dataclass('S', ['a'])(1)",
    "read the submission": "open(os.path.join(SUBMISSION, 'loss_scaler.py')).read()",
    "write scratch": "open(os.path.join(SCRATCH, 'notes.txt'), 'w').write('x')",
    "write /dev/null": "open(os.devnull, 'w').write('x')",
    "read the interpreter's files": "open(os.__file__).read(10)",
    "torch maths": "torch.ones(3).sum().item()",
}
#: What the guard must let through.
ALLOWED = {"read the submission", "write scratch", "write /dev/null", "read the interpreter's files", "torch maths",
           "namedtuple and dataclass", "gc.get_objects", "frames and tracebacks", "tracing", "compile and exec",
           "__class__ and __code__"}
#: Refused attempt -> words its message must hold (the message names the call).
NAMED = {"sys.addaudithook": "sys.addaudithook", "ctypes": "ctypes.", "socket": "socket.", "unix socket": "socket.",
         "subprocess": "subprocess.Popen", "os.system": "os.system", "os.fork": "os.fork", "os.kill": "os.kill",
         "read outside the submission": "opening", "write into the submission": "writing",
         "write outside scratch via os.open": "writing"}
#: Refused without an exception reaching the caller (CPython's rule for ``sys.addaudithook``).
SILENT = {"sys.addaudithook"}

RUNNER = '''
import ctypes, gc, json, os, socket, subprocess, sys, types
sys.path[:0] = [{root!r}, {root!r} + "/assignment"]
import torch
from autograder.engine import guard

SUBMISSION, SCRATCH, OUTSIDE = {submission!r}, {scratch!r}, {outside!r}
ATTEMPTS = json.loads({attempts!r})
def _sample():
    return 0
os.chdir(SCRATCH)
if {armed!r}:
    guard.install(SUBMISSION, SCRATCH)
functions = {{}}
for name, body in ATTEMPTS.items():  # compiled before anything runs: compiling is not what is tested
    source = "def attempt():\\n" + "".join("    " + line + "\\n" for line in body.splitlines())
    scope = dict(globals())
    exec(compile(source, os.path.join(SUBMISSION, "loss_scaler.py"), "exec"), scope)
    functions[name] = scope["attempt"]
outcomes = {{}}
for name, attempt in functions.items():
    try:
        attempt()
        outcomes[name] = "allowed"
    except guard.Refused as exc:
        outcomes[name] = "refused: " + str(exc)
    except Exception as exc:
        outcomes[name] = "error: " + type(exc).__name__ + ": " + str(exc)
print("OUTCOMES " + json.dumps(outcomes))
'''


def run_attempts(tmp_path: Path, armed: bool) -> dict[str, str]:
    """Every attempt's outcome ("allowed", "refused: ...", "error: ...") in a fresh interpreter."""
    base = tmp_path / ("armed" if armed else "control")
    submission, scratch = base / "submission", base / "scratch"
    submission.mkdir(parents=True)
    scratch.mkdir()
    (submission / "loss_scaler.py").write_text("x = 1\n")
    outside = base / "grader-secret.txt"  # neither submission, scratch nor an interpreter folder
    outside.write_text("secret\n")
    code = RUNNER.format(root=str(ROOT), submission=str(submission), scratch=str(scratch), outside=str(outside),
                         attempts=json.dumps(ATTEMPTS), armed=armed)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=str(base))
    lines = [line for line in done.stdout.splitlines() if line.startswith("OUTCOMES ")]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-3000:]
    assert not (submission / "forged.txt").exists() or not armed, "the guard let a write into the submission happen"
    return json.loads(lines[-1][len("OUTCOMES "):])


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, str]]:
    base = tmp_path_factory.mktemp("guard")
    return {"armed": run_attempts(base, True), "control": run_attempts(base, False)}


def test_every_attempt_works_without_the_guard(outcomes: dict[str, dict[str, str]]) -> None:
    """The control: unguarded, each attempt really does what it says (so a refusal below is the guard's)."""
    assert outcomes["control"] == {name: "allowed" for name in ATTEMPTS}


@pytest.mark.parametrize("name", sorted(set(ATTEMPTS) - ALLOWED))
def test_the_guard_refuses_it_and_names_the_call(outcomes: dict[str, dict[str, str]], name: str) -> None:
    got = outcomes["armed"][name]
    assert got.startswith("refused: "), got
    assert NAMED[name] in got, got
    if name not in SILENT:
        assert "not allowed while the grader runs your code" in got, got


@pytest.mark.parametrize("name", sorted(ALLOWED))
def test_the_guard_lets_honest_code_through(outcomes: dict[str, dict[str, str]], name: str) -> None:
    assert outcomes["armed"][name] == "allowed"


def test_switching_a_layer_off_changes_the_grader_fingerprint(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/security.md: the test hooks are part of the grader fingerprint, so a batch regrades when they change."""
    from autograder import settings

    from autograder.batch.run import grader_fingerprint

    switch, off = settings.test_hooks_env(runtime_guard=False).popitem()
    monkeypatch.delenv(switch, raising=False)
    monkeypatch.delenv("AMP_UNRELATED_SETTING", raising=False)
    default = grader_fingerprint({})
    monkeypatch.setenv("AMP_UNRELATED_SETTING", "1")  # the control: a variable the grader does not read
    assert grader_fingerprint({}) == default
    monkeypatch.setenv(switch, off)
    assert grader_fingerprint({}) != default
