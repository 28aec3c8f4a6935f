"""The seccomp allow-list and the built environment (autograder/sandbox/syscalls.py, autograder/sandbox/confine.py), without a grading run.

* What honest code does under torch still works in a confined process (:data:`HABITS`): the allow-list was
  measured over it and over the catalogue (``tests/syscall_census.py``), and a missing call fails a habit here.
* What the list leaves out is refused (:data:`REFUSED`), each attempt first shown to work unconfined: file locks
  (``fcntl``'s lock commands, ``flock``), ``F_SETOWN``/``F_SETSIG``/``O_ASYNC``, the ``chmod`` and ``chown``
  families, other ioctl and prctl commands, ``prlimit64`` on another pid.
* The zygote's erasure: ``/proc/self/environ``, ``/proc/self/cmdline`` and ``sys.argv`` of a process forked after
  :func:`confine.forget_command_line_and_environment` hold nothing of its parent's.

tests/test_seal.py shows the same channels closed between real student processes of a batch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autograder.sandbox import syscalls
from conftest import ROOT, skip_unless_ci

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux seccomp")

#: Honest habits, each the body of a function run in a process confined as a student process is (Landlock and
#: seccomp, torch loaded first); ``{root}`` and ``{scratch}`` are filled in.
HABITS = r'''
import json, os, sys
sys.path[:0] = [{root!r}]
import torch
from autograder.sandbox import confine
scratch = {scratch!r}
os.chdir(scratch)
level = confine.confine(scratch, scratch, False) if {confined!r} else "unconfined"
outcome = {{}}
def habit(name):
    def run(body):
        try:
            body()
            outcome[name] = "ok"
        except BaseException:
            import traceback
            outcome[name] = traceback.format_exc()[-800:]
    return run
@habit("threads")
def _():
    import threading, concurrent.futures
    seen = []
    thread = threading.Thread(target=lambda: seen.append(1)); thread.start(); thread.join()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        assert list(pool.map(abs, [-1, -2])) == [1, 2]
    event = threading.Event(); event.set(); assert event.wait(1) and seen == [1]
@habit("time")
def _():
    import time
    time.sleep(0.01); time.time(); time.perf_counter(); time.process_time(); time.monotonic(); time.thread_time()
    time.strftime("%Y"); time.localtime()
@habit("randomness")
def _():
    import random, secrets, uuid
    os.urandom(8); random.seed(); random.random(); secrets.token_hex(4); uuid.uuid4()
@habit("files in scratch")
def _():
    import glob, pathlib, shutil, tempfile
    os.makedirs("a/b", exist_ok=True)
    with open("a/b/x.txt", "w") as stream:
        stream.write("x" * 10000)
    with open("a/b/x.txt", "a") as stream:
        stream.write("y")
    assert open("a/b/x.txt").read().endswith("y")
    os.rename("a/b/x.txt", "a/b/y.txt"); os.replace("a/b/y.txt", "a/b/z.txt")
    os.stat("a/b/z.txt"); os.path.getsize("a/b/z.txt"); os.listdir("a"); list(pathlib.Path(".").rglob("*.txt"))
    glob.glob("a/**", recursive=True); os.path.exists("nothing"); os.access("a", os.R_OK); os.getcwd()
    shutil.copyfile("a/b/z.txt", "a/copy.txt"); os.remove("a/copy.txt")
    with tempfile.TemporaryDirectory() as folder:
        with tempfile.NamedTemporaryFile(dir=folder) as stream:
            stream.write(b"x"); stream.flush(); os.fsync(stream.fileno())
    fd, name = tempfile.mkstemp(); os.close(fd); os.unlink(name)
    shutil.rmtree("a"); pathlib.Path.home(); os.path.expanduser("~")
    with open("t.bin", "wb") as stream:
        stream.write(b"abc"); stream.truncate(1)
    os.set_inheritable(os.open("t.bin", os.O_RDONLY), True); os.set_blocking(1, True)
@habit("torch")
def _():
    torch.manual_seed(0)
    a = torch.randn(64, 64, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        b = (a @ a).sum()
    b.backward()
    torch.save({{"a": a.detach()}}, "t.pt"); torch.load("t.pt"); os.remove("t.pt")
    torch.nn.Linear(4, 4)(torch.ones(2, 4)).sum().item()
    torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1).zero_grad()
    assert not torch.isfinite(torch.tensor([1.0, float("inf")])).all()
    import numpy
    numpy.linalg.norm(numpy.ones(16))
    grown = bytearray(1 << 24); grown.extend(bytes(1 << 24))  # realloc of a large block
@habit("printing and warnings")
def _():
    import logging, pprint, shutil, warnings
    print("hello", flush=True); sys.stderr.write("err\n"); sys.stderr.flush(); shutil.get_terminal_size()
    logging.basicConfig(); logging.getLogger("x").warning("w")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore"); warnings.warn("w")
    pprint.pformat({{"a": 1}})
@habit("exceptions and tracebacks")
def _():
    import inspect, linecache, traceback
    try:
        json.loads("{{")
    except ValueError:
        traceback.format_exc()
    inspect.getsource(json.loads); linecache.getline(json.__file__, 1)
@habit("the machine")
def _():
    import gc, locale, platform, resource, socket
    os.getpid(); os.getppid(); os.cpu_count(); platform.platform(); platform.python_version()
    resource.getrusage(resource.RUSAGE_SELF); resource.getrlimit(resource.RLIMIT_AS); gc.collect()
    os.getuid(); os.geteuid(); os.getgid(); locale.getpreferredencoding(); os.uname(); os.times()
    socket.gethostname(); len(os.sched_getaffinity(0))
@habit("standard library")
def _():
    import copy, csv, dataclasses, decimal, fractions, hashlib, pickle, re, statistics, zlib
    pickle.loads(pickle.dumps(copy.deepcopy({{"a": [1, 2]}}))); statistics.mean([1, 2]); hashlib.sha256(b"x")
    zlib.compress(b"x"); decimal.Decimal("1.1") + 1; re.compile("a+").match("aa"); fractions.Fraction(1, 3)
@habit("stdin at its end")
def _():
    assert sys.stdin.read() == ""
print("HABITS " + json.dumps({{"level": level, "outcome": outcome}}))
'''


def _run(code: str, scratch: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=scratch,
                          stdin=subprocess.DEVNULL)
    lines = [line for line in done.stdout.splitlines() if line.startswith(("HABITS ", "REFUSED "))]
    assert done.returncode == 0 and lines, done.stdout[-2000:] + done.stderr[-3000:]
    return json.loads(lines[-1].split(" ", 1)[1])


def _needs_seccomp() -> None:
    if syscalls.seccomp is None:
        skip_unless_ci("the pyseccomp binding or libseccomp.so.2 is missing here")


def test_honest_habits_work_under_the_allow_list(tmp_path: Path) -> None:
    _needs_seccomp()
    report = _run(HABITS.format(root=str(ROOT), scratch=str(tmp_path), confined=True), tmp_path)
    assert report["level"] in ("landlock+seccomp", "seccomp")
    assert report["outcome"] == dict.fromkeys(report["outcome"], "ok"), report["outcome"]
    assert len(report["outcome"]) == 10


#: Each attempt: the body of a function that does what the allow-list leaves out and returns normally only if
#: it worked.  Run confined (each must fail with ``OSError``) and unconfined (each must work: the control).
REFUSED = {
    "an OFD lock (its offset carries bytes)":
        "fd = os.open(torch.__file__, os.O_RDONLY)\n"
        "fcntl.fcntl(fd, 37, struct.pack('hhqqi4x', fcntl.F_RDLCK, 0, 123456, 1, 0))",  # F_OFD_SETLK
    "an OFD lock query": "fd = os.open(torch.__file__, os.O_RDONLY)\n"
                         "fcntl.fcntl(fd, 36, struct.pack('hhqqi4x', fcntl.F_WRLCK, 0, 0, 0, 0))",  # F_OFD_GETLK
    "a POSIX lock": "fcntl.lockf(os.open(torch.__file__, os.O_RDONLY), fcntl.LOCK_SH | fcntl.LOCK_NB)",
    "a POSIX lock query": "fd = os.open(torch.__file__, os.O_RDONLY)\n"
                          "fcntl.fcntl(fd, fcntl.F_GETLK, struct.pack('hhqqi4x', fcntl.F_WRLCK, 0, 0, 0, 0))",
    "flock": "fcntl.flock(os.open(torch.__file__, os.O_RDONLY), fcntl.LOCK_SH | fcntl.LOCK_NB)",
    "F_SETOWN (a pid oracle, and a signal's target)": "fcntl.fcntl(os.pipe()[0], fcntl.F_SETOWN, os.getppid())",
    "F_SETOWN_EX": "fcntl.fcntl(os.pipe()[0], 15, struct.pack('ii', 1, os.getppid()))",
    "F_SETSIG": "fcntl.fcntl(os.pipe()[0], 10, 9)",  # SIGKILL on I/O
    "O_ASYNC": "fcntl.fcntl(os.pipe()[0], fcntl.F_SETFL, os.O_ASYNC)",
    "FIOASYNC": "fcntl.ioctl(os.pipe()[0], 0x5452, struct.pack('i', 1))",
    "F_SETLEASE": "fcntl.fcntl(os.open('mine', os.O_RDONLY | os.O_CREAT), 1024, fcntl.F_RDLCK)",
    "F_NOTIFY": "fcntl.fcntl(os.open('.', os.O_RDONLY), 1026, 1)",
    "chmod of its scratch folder": "os.chmod('.', 0o711)",
    "fchmod": "os.chmod(os.open('mine', os.O_RDONLY | os.O_CREAT), 0o644)",
    "chown": "os.chown('mine', os.getuid(), os.getgid())",
    "utime": "os.utime('mine', (0, 0))",
    "prctl PR_SET_DUMPABLE": "ctypes.set_errno(0)\n"
                             "if ctypes.CDLL(None, use_errno=True).prctl(4, 1, 0, 0, 0) != 0:\n"
                             "    raise OSError(ctypes.get_errno(), 'prctl')",
    "prlimit of its parent": "resource.prlimit(os.getppid(), resource.RLIMIT_CPU)",
    "sched_getaffinity of its parent": "os.sched_getaffinity(os.getppid())",
    "setpgid": "os.setpgid(0, 0)",
    "a TCP socket": "socket.socket()",
    "execve": "os.execv('/bin/true', ['true'])",
}

REFUSAL = '''
import ctypes, fcntl, json, os, resource, socket, struct, sys
sys.path[:0] = [{root!r}]
import torch
from autograder.sandbox import confine
os.chdir({scratch!r})
level = confine.confine({scratch!r}, {scratch!r}, False) if {confined!r} else "unconfined"
outcome = {{}}
for name, body in json.loads({attempts!r}).items():
    try:
        exec(body, {{"os": os, "fcntl": fcntl, "struct": struct, "torch": torch, "resource": resource,
                    "socket": socket, "ctypes": ctypes}})
        outcome[name] = "worked"
    except OSError as exc:
        outcome[name] = "refused"
print("REFUSED " + json.dumps({{"level": level, "outcome": outcome}}))
'''


def test_what_the_allow_list_leaves_out_is_refused(tmp_path: Path) -> None:
    """Each attempt works unconfined (as root, in a child of this test), and is refused once confined."""
    _needs_seccomp()
    if os.geteuid() != 0:
        skip_unless_ci("needs root (F_SETLEASE, chown and prlimit of another process work unconfined only then)")
    attempts = {name: body for name, body in REFUSED.items() if name != "execve"}  # exec would end the control
    outcomes = {}
    for confined in (False, True):
        folder = tmp_path / str(confined)
        folder.mkdir()
        code = REFUSAL.format(root=str(ROOT), scratch=str(folder), confined=confined, attempts=json.dumps(attempts))
        outcomes[confined] = _run(code, folder)["outcome"]
    assert outcomes[False] == dict.fromkeys(attempts, "worked")
    assert outcomes[True] == dict.fromkeys(attempts, "refused")
    code = REFUSAL.format(root=str(ROOT), scratch=str(tmp_path), confined=True,
                          attempts=json.dumps({"execve": REFUSED["execve"]}))
    assert _run(code, tmp_path)["outcome"] == {"execve": "refused"}


FORGOTTEN = '''
import json, os, re, sys
sys.path[:0] = [{root!r}]
from autograder.sandbox import confine
confine.forget_command_line_and_environment()
assert os.environ["AMP_SECRET_CANARY"] == {canary!r}  # the process's own code still reads its variables
read, write = os.pipe()
if os.fork() == 0:
    # each run of NULs made one: erased, the kernel's copies are as long as the originals, and one read takes the report
    report = {{name: re.sub("\\0+", "\\0", open("/proc/self/" + name, "rb").read().decode("latin-1"))
              for name in ("environ", "cmdline")}}
    report["argv"] = sys.argv + sys.orig_argv
    os.write(write, json.dumps(report).encode())
    os._exit(0)
os.close(write)
print("REFUSED " + os.read(read, 1 << 20).decode())
'''


def test_a_child_of_the_zygote_reads_nothing_of_the_graders_command_line_and_environment(tmp_path: Path) -> None:
    canary = "amp-canary-" + os.urandom(6).hex()
    code = FORGOTTEN.format(root=str(ROOT), canary=canary)
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "graded-folder")], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "AMP_SECRET_CANARY": canary})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.split("REFUSED ", 1)[1])
    assert set(report["environ"]) <= {"\0"} and set(report["cmdline"]) <= {"\0"}, report
    assert "graded-folder" not in json.dumps(report) and canary not in json.dumps(report)
    assert report["argv"] == ["", sys.executable]
