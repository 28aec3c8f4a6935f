"""Isolation and bounds where graders really run: a Gradescope-like container (root
without CAP_SYS_ADMIN), an unprivileged user, concurrent batches; and every path bounded.

The confinement runs are few and representative (one probing submission per mode), not the
whole hostile suite again: each costs one short grading run.

Why one file: every test here drives the same grader run in the same modes (root,
Docker's capabilities, unprivileged) with shared probes.  The levels' layers one at a time and the scratch
watcher, which need no grading run, are in tests/test_isolation_levels.py.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest

from autograder import settings
from autograder.engine import escape, intake
from autograder.sandbox import budget, confine, levels, runner as sandbox
from conftest import ROOT, processes_mentioning, shown, skip_unless_ci

SOLUTIONS = ROOT / "solutions"
FILES = ("loss_scaler.py", "amp_step.py", "answers.py")
#: Docker's default capability set (no CAP_SYS_ADMIN): what Gradescope's containers run with.
DOCKER_CAPS = ("-all,+chown,+dac_override,+fsetid,+fowner,+mknod,+net_raw,+setgid,+setuid,+setfcap,+setpcap,"
               "+net_bind_service,+sys_chroot,+kill,+audit_write")
IS_ROOT = os.geteuid() == 0
HAS_SETPRIV = shutil.which("setpriv") is not None
NOBODY = 65534


def _runs_as_nobody(python: str) -> bool:
    """Whether an unprivileged uid can start ``python`` and import what the grader needs."""
    check = ("import subprocess, sys; "  # the batch starts its workers with sys.executable: that must work too
             "subprocess.run([sys.executable, '-c', 'import torch, pyseccomp, landlock'], check=True)")
    done = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", python,
                           "-c", check], capture_output=True, timeout=120)
    return done.returncode == 0


def _copy_tree(source: str, target: Path) -> None:
    """``source`` copied to ``target``: hard links where one filesystem holds both (instant), else a real copy."""
    if subprocess.run(["cp", "-al", source, str(target)], capture_output=True).returncode != 0:
        shutil.rmtree(target, ignore_errors=True)
        subprocess.run(["cp", "-a", source, str(target)], check=True, capture_output=True)


def reachable_interpreter(folder: Path) -> str:
    """An interpreter with this one's packages that uid nobody can run, built below ``folder`` when needed.

    This interpreter may sit where only root may enter (a pyenv under ``/root``): then its installation is
    copied into ``folder`` (hard links: no disk, no time), and a virtual environment made from the copy gets
    this environment's site-packages the same way.  The grader then runs as nobody exactly as it would
    from a system-wide Python.
    """
    if _runs_as_nobody(sys.executable):
        return sys.executable
    folder.chmod(0o755)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    _copy_tree(sys.base_prefix, folder / "base")
    python = folder / "base" / "bin" / version
    if sys.prefix != sys.base_prefix:  # a virtual environment: the same, over the copied base
        subprocess.run([str(python), "-m", "venv", "--without-pip", str(folder / "venv")], check=True,
                       capture_output=True)
        packages = folder / "venv" / "lib" / version / "site-packages"
        shutil.rmtree(packages)
        _copy_tree(sysconfig.get_paths()["purelib"], packages)
        python = folder / "venv" / "bin" / "python"
    assert _runs_as_nobody(str(python)), f"uid {NOBODY} cannot run {python} even after copying it to {folder}"
    return str(python)


@pytest.fixture(scope="session")
def nobody_python() -> Any:
    """The interpreter the unprivileged runs use (see :func:`reachable_interpreter`); its copy is removed after."""
    if not (IS_ROOT and HAS_SETPRIV):
        skip_unless_ci("needs root and setpriv (to run the grader as another user)")
    folder = Path(tempfile.mkdtemp(prefix="amp-nobody-python-", dir="/var/tmp"))
    try:
        yield reachable_interpreter(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _nobody_reads(path: Path) -> bool:
    """Whether uid nobody may read ``path`` (so every folder above it lets nobody in)."""
    done = subprocess.run(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "test", "-r",
                           str(path)], capture_output=True, timeout=60)
    return done.returncode == 0


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another filesystem
        shutil.copy2(source, target)


#: What a copy of the checkout for uid nobody leaves out: never read by the grader (git's store, virtual
#: environments, caches and build outputs: the ignored paths of .gitignore).
_NOT_FOR_NOBODY = (".git", ".venv*", "__pycache__", ".pytest_cache", ".hypothesis", ".cache", "dist", "build", "out",
                   "*.egg-info", "mutants", ".mutmut-cache")


def reachable_checkout(folder: Path) -> Path:
    """This checkout, or a copy of it that uid nobody can read, made below ``folder`` when needed.

    A checkout may sit where only its owner may enter (a clone below a 0700 folder: ``mktemp -d``, a home
    folder).  A grader run there by its owner reads its own code; the unprivileged tests, though, switch to uid
    nobody, which then cannot import the grader at all.  So, as :func:`reachable_interpreter` does for the
    interpreter, they get a copy of the checkout (hard links: no disk, no time) in a folder every uid may enter,
    and run the grader from there, as a checkout its user can read.
    """
    if _nobody_reads(ROOT / "autograder" / "__init__.py"):
        return ROOT
    folder.chmod(0o755)
    target = folder / "checkout"
    shutil.copytree(ROOT, target, symlinks=True, ignore=shutil.ignore_patterns(*_NOT_FOR_NOBODY),
                    copy_function=_link_or_copy)
    assert _nobody_reads(target / "autograder" / "__init__.py"), f"uid {NOBODY} cannot read the copy in {target}"
    return target


@pytest.fixture(scope="session")
def nobody_root() -> Any:
    """The checkout the unprivileged runs use (see :func:`reachable_checkout`); its copy is removed after."""
    if not (IS_ROOT and HAS_SETPRIV):
        pytest.skip("needs root and setpriv (to run the grader as another user)")
    folder = Path(tempfile.mkdtemp(prefix="amp-nobody-checkout-", dir="/var/tmp"))
    try:
        yield reachable_checkout(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


MODES = {  # "root": as this process runs (the other two need root to start from)
    "root": [],
    "docker": ["setpriv", "--bounding-set", DOCKER_CAPS],
    "unprivileged": ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"],
}


def _skip_reason(mode: str) -> str | None:
    if not IS_ROOT:
        return "needs root (to run the grader as root, as root without CAP_SYS_ADMIN, and as another user)"
    if mode != "root" and not HAS_SETPRIV:
        return "needs setpriv (Debian package util-linux)"
    return None


def needs(mode: str) -> None:
    """Skip the calling test where ``mode`` cannot run here (see :func:`_skip_reason`); fail it in CI."""
    __tracebackhide__ = True
    reason = _skip_reason(mode)
    if reason:
        skip_unless_ci(reason)


def grade_as(mode: str, paths: list[Path], out: Path, *extra: str, env: dict[str, str] | None = None,
             timeout: float = 300, python: str = sys.executable, root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``python -m autograder grade`` run as root, as root with Docker's capabilities, or as nobody (then with
    the ``nobody_python`` and ``nobody_root`` fixtures' interpreter and checkout), from the checkout ``root``."""
    if mode == "unprivileged":
        out.mkdir(parents=True, exist_ok=True)
        os.chown(out, NOBODY, NOBODY)
        for path in paths:
            for item in [path, *path.rglob("*")]:
                os.chown(item, NOBODY, NOBODY)
    command = MODES[mode] + [python, "-m", "autograder", "grade", *map(str, paths), "--out", str(out),
                             "--jobs", "1", *(extra or ("--no-progress",))]
    # Both packages from ``root`` (the public checks too: the editable install's finder would map them to this
    # checkout, which uid nobody may not be able to enter).
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "assignment")]),
                   **(env or {})}
    return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=timeout, env=environment)


def results_of(out: Path, name: str) -> dict[str, Any]:
    return json.loads((out / name / "results.json").read_text())


def submission(folder: Path, patches: dict[str, str]) -> Path:
    """The reference solution with text appended to some of its files."""
    folder.mkdir(parents=True)
    for name in FILES:
        (folder / name).write_text((SOLUTIONS / name).read_text() + patches.get(name, ""))
    return folder


class Listener:
    """A TCP listener on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.server.accept()
            except OSError:
                return
            self.accepted += 1
            connection.close()

    def close(self) -> None:
        self.server.close()


#: The two questions every confined process is asked (indented for a function body): does a TCP connection to
#: ``{port}`` on localhost work, and can ``{secret}`` (a grader file) be read?  Filled in with ``str.format``.
NET_AND_READ = '''
    try:
        client = socket.socket()
        client.settimeout(2)
        client.connect((b"127.0.0.1", {port}))  # bytes: no lazy import of the idna codec
        report["net"] = "connected"
    except Exception as exc:
        report["net"] = type(exc).__name__
    try:
        report["read"] = len(open({secret!r}).read())
    except Exception as exc:
        report["read"] = type(exc).__name__
'''

PROBE = '''

def _probe():  # hostile: network, grader files, SysV IPC, a daemon, files outside scratch, the grader's environment
    import ctypes, json, os, re, socket, subprocess, sys
    report = {{}}
''' + NET_AND_READ + '''    libc = ctypes.CDLL(None, use_errno=True)
    report["shm"] = libc.shmget({key}, 1 << 20, 0o1666)  # IPC_CREAT | 0666
    import resource
    report["rlimits"] = {{name: resource.getrlimit(getattr(resource, name))[0]
                         for name in ("RLIMIT_NOFILE", "RLIMIT_FSIZE", "RLIMIT_CPU")}}
    try:  # one byte past the file-size limit
        with open("big", "wb") as stream:
            stream.write(b"x" * (report["rlimits"]["RLIMIT_FSIZE"] + 1))
        report["file size"] = "written"
    except OSError as exc:
        report["file size"] = exc.errno
    handles = []
    try:  # descriptors until refused
        for _ in range(100_000):
            handles.append(open(os.devnull))
        report["open files"] = "unbounded"
    except OSError:
        report["open files"] = len(handles)
    for handle in handles:
        handle.close()
    report["pid"], report["ppid"] = os.getpid(), os.getppid()
    try:  # the grader's test process, alive all along
        os.kill({outsider}, 0)
        report["outsider"] = "signalled"
    except OSError as exc:
        report["outsider"] = type(exc).__name__
    try:  # every process this one can see, with its command line where readable
        report["processes"] = {{}}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    report["processes"][entry] = open("/proc/%s/cmdline" % entry, "rb").read()[:120].decode("latin-1")
                except OSError:
                    report["processes"][entry] = None
    except OSError as exc:
        report["processes"] = type(exc).__name__
    try:
        subprocess.Popen(["/bin/sh", "-c", "sleep 300; : {token}"], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        report["daemon"] = "started"
    except Exception as exc:
        report["daemon"] = type(exc).__name__
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):
        try:
            with open(os.path.join(folder, "{token}"), "w") as stream:
                stream.write("left behind")
            report[folder] = "written"
        except Exception as exc:
            report[folder] = type(exc).__name__
    report["env"] = sorted(os.environ)
    for name in ("environ", "cmdline"):  # the kernel's copies of what the process started with, each run of NULs
        try:  # made one: erased, they are as long as the grader's own, which a deep checkout makes long
            report[name] = re.sub("\\0+", "\\0", open("/proc/self/" + name, "rb").read().decode("latin-1"))
        except OSError as exc:
            report[name] = type(exc).__name__
    report["argv"] = [sys.argv, getattr(sys, "orig_argv", [])]
    print("PROBE " + json.dumps(report))


_probe()
'''


def _shm_keys() -> set[int]:
    lines = Path("/proc/sysvipc/shm").read_text().splitlines()
    return {int(line.split()[0]) for line in lines[1:] if line.split()}


def _nobody_gets_user_namespaces(python: str) -> bool:
    """Whether uid nobody may unshare a user namespace with the others (unprivileged user namespaces enabled)."""
    flags = 0x10000000 | 0x00020000 | 0x40000000 | 0x08000000 | 0x20000000  # USER | NS | NET | IPC | PID
    code = f"import ctypes; raise SystemExit(ctypes.CDLL(None).unshare({flags}) != 0)"
    return subprocess.run(MODES["unprivileged"] + [python, "-c", code], capture_output=True, timeout=60).returncode == 0


def _expected_level(mode: str, python: str = sys.executable) -> str:
    """Root gets namespaces, and so does an ordinary user where unprivileged user namespaces are enabled; root
    without CAP_SYS_ADMIN (and a user without them) gets Landlock (where the kernel has it) and seccomp."""
    if mode == "docker" or (mode == "unprivileged" and not _nobody_gets_user_namespaces(python)):
        return "landlock+seccomp" if confine.landlock_abi() >= 1 else "seccomp"
    return "namespaces"


@pytest.fixture
def workspace(tmp_path: Path) -> Any:
    """A folder every uid may enter (pytest's own tmp folders are 0700 root), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="amp-isolation-test-", dir="/var/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("mode", list(MODES))
def test_confinement_holds_in_every_mode(mode: str, workspace: Path, request: pytest.FixtureRequest) -> None:
    needs(mode)
    python = request.getfixturevalue("nobody_python") if mode == "unprivileged" else sys.executable
    root = request.getfixturevalue("nobody_root") if mode == "unprivileged" else ROOT
    tmp_path = workspace
    token = f"amp-probe-{uuid.uuid4().hex[:12]}"
    key = int(uuid.uuid4().hex[:7], 16)
    listener = Listener()
    secret = root / "autograder" / "hidden" / "test_hidden_scaler.py"  # the grading checkout's
    probe = submission(tmp_path / "probe", {"loss_scaler.py": PROBE.format(port=listener.port, secret=str(secret),
                                                                       key=key, token=token,
                                                                       outsider=os.getpid())})
    canary = f"amp-canary-{uuid.uuid4().hex[:12]}"  # in the grader's environment: in no student process's
    try:
        done = grade_as(mode, [probe], tmp_path / "out", python=python, root=root, env={"AMP_SECRET_CANARY": canary})
    finally:
        listener.close()
    assert done.returncode == 0, done.stderr[-3000:]
    assert "\x1b" not in done.stdout
    results = results_of(tmp_path / "out", "probe")
    reports = [json.loads(line[len("PROBE "):]) for line in shown(results).splitlines()
               if line.startswith("PROBE ")]
    assert reports, shown(results)[-2000:]
    report = reports[0]
    assert listener.accepted == 0 and report["net"] != "connected"  # no network
    assert isinstance(report["read"], str), "a hidden test file was readable"  # grader files unreadable
    assert set(report["env"]) <= set(confine.clean_environment("/x"))  # a clean environment
    # nothing of the grader's command line (which names the graded folder) or environment, not even the kernel's
    # copies: erased by the zygote before it forked (unreadable anyway once the process is non-dumpable and its
    # uid is not root's, whose its /proc files then are)
    assert report["environ"] == "PermissionError" or set(report["environ"]) <= {"\0"}, report
    # the command line names only the grader's pid (the zygote's marker, for ps)
    assert report["cmdline"] == "PermissionError" or report["cmdline"].rstrip("\0").startswith("amp-student grader="), report
    assert "/" not in report["cmdline"], report
    assert canary not in json.dumps(report) and str(probe) not in json.dumps(report), report
    assert report["shm"] == -1  # no SysV IPC (seccomp, below every level reached here)...
    assert key not in _shm_keys()  # ...so no IPC object to outlive the process
    limits = sandbox.Limits()  # rlimits: set, and enforced
    assert report["rlimits"] == {"RLIMIT_NOFILE": limits.open_files, "RLIMIT_FSIZE": limits.file_bytes,
                                 "RLIMIT_CPU": limits.cpu_seconds}
    assert report["file size"] == errno.EFBIG and report["open files"] < limits.open_files
    assert not processes_mentioning(token)  # no process left
    for folder in ("/tmp", "/var/tmp", "/dev/shm"):  # nothing written outside scratch survives
        assert not (Path(folder) / token).exists(), f"{folder}/{token} survived"
    assert results["score"] == 90, results["output"][-2000:]  # results valid: the probe broke nothing graded
    level = results["extra_data"]["isolation"]
    assert level == _expected_level(mode, python)
    if level == "namespaces":  # no other process visible: PID 1 of its own PID namespace, no parent in it
        assert (report["pid"], report["ppid"]) == (1, 0), report
    # seccomp refuses a signal to any pid but the process's own, before the kernel looks the pid up
    assert report["outsider"] == "PermissionError", report
    # Landlock (under every level here) lists nothing in /proc; without it, only the process itself would show
    assert report["processes"] == "PermissionError" or set(report["processes"]) == {str(report["pid"])}, report
    staff_log = (tmp_path / "out" / "probe" / "staff.log").read_text()
    assert staff_log.splitlines()[0] == f"isolation level: {level}"  # promised on the first line
    assert f"- {escape.markdown_inline(level)}: 1 submission(s)" in (tmp_path / "out" / "summary.md").read_text()


CONFINED_CHILD = """
import json, os, socket, sys
sys.path[:0] = [{root!r}, {checks!r}]  # both packages from the checkout nobody reads, never the install's paths
from autograder.sandbox import confine
level = confine.probe_level()
read_fd, write_fd = os.pipe()
pid = os.fork()
if pid == 0:  # a student process as the sandbox makes it, minus torch: namespaces, then Landlock + seccomp
    import ctypes
    spaced = confine.enter_namespaces(ctypes.CDLL(None, use_errno=True), False)
    scratch = {scratch!r}
    report = {{"level": confine.confine(scratch, scratch, spaced)}}
""" + NET_AND_READ + """    os.write(write_fd, json.dumps(report).encode())
    os._exit(0)
os.close(write_fd)
print(json.dumps({{"probe": level, "child": json.loads(os.read(read_fd, 65536) or b"{{}}")}}))
"""


def test_unprivileged_user_gets_confined(workspace: Path, nobody_python: str, nobody_root: Path) -> None:
    """As an ordinary user: the level probed, and a confined process reaches neither the network nor the grader's
    files."""
    scratch = workspace / "scratch"
    scratch.mkdir()
    os.chown(scratch, NOBODY, NOBODY)
    listener = Listener()
    secret = nobody_root / "autograder" / "hidden" / "test_hidden_scaler.py"
    code = CONFINED_CHILD.format(root=str(nobody_root), checks=str(nobody_root / "assignment"), scratch=str(scratch),
                                 port=listener.port, secret=str(secret))
    try:
        done = subprocess.run(MODES["unprivileged"] + [nobody_python, "-c", code], capture_output=True, text=True,
                              timeout=120, cwd="/", env={"PATH": "/usr/bin:/bin"})
    finally:
        listener.close()
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout.splitlines()[-1])
    # docs/security.md's promise (isolation levels): namespaces where unprivileged user namespaces are enabled, Landlock+seccomp elsewhere
    assert data["probe"] == data["child"]["level"] == _expected_level("unprivileged", nobody_python)
    assert listener.accepted == 0 and data["child"]["net"] != "connected"
    assert isinstance(data["child"]["read"], str)  # a world-readable grader file, yet unreadable here


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="needs a virtual environment to reach through a symlink")
def test_a_virtual_environment_reached_through_a_symlink_still_grades_correct_code_fully(tmp_path: Path) -> None:
    """``~/venv -> /data/venv`` (or a worktree's .venv): covering /tmp or /home used to hide the link, so every
    student process failed its first lazy import and correct code scored 10/90, blamed on the student."""
    link = tmp_path / "venv"  # below /tmp: a folder the sandbox covers
    link.symlink_to(sys.prefix)
    python = link / "bin" / Path(sys.executable).name
    done = subprocess.run([str(python), "-m", "autograder", "grade", str(SOLUTIONS), "--out", str(tmp_path / "out"),
                           "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr
    data = results_of(tmp_path / "out", "solutions")
    assert data["score"] == 90, [t["output"][:300] for t in data["tests"] if t["score"] != t["max_score"]]


LATE_IMPORTS = """
import colorsys, graphlib, wave  # the standard library, never loaded before a student process starts
import torch.utils.file_baton  # torch, the same
"""


@pytest.mark.parametrize("mode", list(MODES))
def test_modules_first_imported_by_student_code_import_in_every_mode(mode: str, workspace: Path,
                                                                    request: pytest.FixtureRequest) -> None:
    """Correct code that imports what no student process had loaded gets full marks at every level: a uid of its
    own cannot enter a pyenv under /root (0700) unless the grader reaches it for it (autograder.sandbox.reach)."""
    needs(mode)
    python = request.getfixturevalue("nobody_python") if mode == "unprivileged" else sys.executable
    root = request.getfixturevalue("nobody_root") if mode == "unprivileged" else ROOT
    folder = workspace / "late"
    folder.mkdir()
    for name in FILES:
        text = (SOLUTIONS / name).read_text()
        if name != "answers.py":  # after the first lines (a docstring, then ``from __future__``)
            text = text.replace("from __future__ import annotations\n",
                                "from __future__ import annotations\n" + LATE_IMPORTS, 1)
        (folder / name).write_text(text)
    assert LATE_IMPORTS in (folder / "loss_scaler.py").read_text()
    done = grade_as(mode, [folder], workspace / "out", python=python, root=root)
    assert done.returncode == 0, done.stderr[-3000:]
    data = results_of(workspace / "out", "late")
    assert data["score"] == 90, [t["output"][:500] for t in data["tests"] if t["score"] != t["max_score"]]


@pytest.mark.parametrize("mode", ["root", "docker"])
def test_a_reference_inside_a_private_folder_is_recorded_from_a_staged_copy(mode: str, tmp_path: Path) -> None:
    """A checkout cloned into a folder of mode 0700 (``mktemp -d``, root's home): the reference solution's student
    processes, under uids of their own, cannot enter it. They read a staged copy, as every submission's do; read in
    place, the canary refused to grade ("the reference solution loses points on this machine")."""
    needs(mode)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    reference = private / "solutions"
    shutil.copytree(SOLUTIONS, reference)
    env = {**settings.test_hooks_env(reference=str(reference)), settings.PLAN_CACHE.env: str(tmp_path / "cache")}
    done = grade_as(mode, [SOLUTIONS], tmp_path / "out", env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert results_of(tmp_path / "out", "solutions")["score"] == 90
    assert (tmp_path / "cache").is_dir() and any((tmp_path / "cache").iterdir())  # recorded, not taken from a cache


def test_min_isolation_refuses_below_the_level_reached(tmp_path: Path) -> None:
    needs("docker")
    done = grade_as("docker", [SOLUTIONS], tmp_path / "out", "--min-isolation", "namespaces")
    assert done.returncode == 2
    assert "Refusing to grade" in done.stderr and "'namespaces'" in done.stderr
    assert not (tmp_path / "out" / "gradebook.csv").exists()
    done = grade_as("docker", [SOLUTIONS], tmp_path / "out", env={settings.MIN_ISOLATION.env: "bogus"})
    assert done.returncode == 2 and "unknown isolation level 'bogus'" in done.stderr


def test_gradescope_refuses_below_amp_min_isolation_with_a_results_file(tmp_path: Path) -> None:
    needs("docker")
    (tmp_path / "submission").mkdir()
    (tmp_path / "results").mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AUTOGRADER_ROOT": str(tmp_path),
           settings.MIN_ISOLATION.env: "namespaces"}
    done = subprocess.run(MODES["docker"] + [sys.executable, "-m", "autograder.platforms.gradescope"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((tmp_path / "results" / "results.json").read_text())
    assert results["score"] == 0 and "refused" in results["output"]
    assert results["extra_data"]["isolation"] == _expected_level("docker")
    assert "Refusing to grade" in done.stdout  # the staff-only output


HOARDER = '''

def _hoard():  # writes into its scratch folder (the working directory) until refused
    import os
    written = 0
    block = b"x" * (1 << 20)
    try:
        for k in range(600):
            with open("hoard-%d" % k, "wb") as stream:
                stream.write(block * 1)
            written += len(block)
    except OSError:
        pass
    print("HOARDED %d" % written)


_hoard()
'''


@pytest.mark.parametrize("mode", ["root", "docker"])
def test_huge_scratch_writes_are_capped(mode: str, tmp_path: Path) -> None:
    needs(mode)
    hoarder = submission(tmp_path / "hoarder", {"loss_scaler.py": HOARDER})
    done = grade_as(mode, [hoarder], tmp_path / "out")
    assert done.returncode == 0, done.stderr[-3000:]
    results = results_of(tmp_path / "out", "hoarder")
    written = [int(line.split()[1]) for line in shown(results).splitlines() if line.startswith("HOARDED ")]
    if mode == "root":  # a size-capped tmpfs: writes fail at the cap
        assert written and max(written) <= confine.SCRATCH_BYTES
    else:  # no tmpfs: measured when the import ends (then a guard thread polls), the file is refused as written
        assert "importing loss_scaler.py wrote more than 256 MiB" in json.dumps(results), shown(results)[-2000:]
    assert not list(Path("/tmp").glob("amp-scratch-*/hoard-0"))  # nothing of it left


TMP_SPY = '''

def _spy():  # for a few seconds, looks for another student's staged files beside its own (under $TMPDIR)
    import json, os, time
    mine = os.path.dirname(os.path.abspath(__file__))
    report = {{"start": time.time(), "own": False, "listing": None, "other_folders": 0, "found": False}}
    try:
        report["own"] = {marker!r} in open(__file__).read()  # the positive control: a staged file can be read
    except OSError as exc:
        report["own"] = type(exc).__name__
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            entries = [os.path.join(os.path.dirname(mine), e) for e in os.listdir(os.path.dirname(mine))]
            report["listing"] = "listed"
        except OSError as exc:
            entries, report["listing"] = [], type(exc).__name__
        others = [e for e in entries if os.path.basename(e).startswith("amp-submission-") and e != mine]
        report["other_folders"] = max(report["other_folders"], len(others))
        for folder in others:
            try:
                if {other!r} in open(os.path.join(folder, "loss_scaler.py")).read():
                    report["found"] = True
            except OSError:
                pass
        time.sleep(0.1)
    report["end"] = time.time()
    print("SPY " + json.dumps(report))


_spy()
'''


def _watch_staging(folder: Path, until: threading.Event) -> list[tuple[float, int]]:
    """(time, staging folders in ``folder``) every 50 ms until ``until`` is set, as the grader's own user sees it."""
    samples = []
    while not until.is_set():
        samples.append((time.time(), len(list(folder.glob("amp-submission-*")))))
        time.sleep(0.05)
    return samples


def test_staged_submissions_stay_private_with_tmpdir_elsewhere(tmp_path: Path) -> None:
    """Two submissions staged side by side under a ``TMPDIR`` the sandbox does not cover: each one's code, while
    the other is staged (seen from outside), can read its own staged file but not the other's."""
    if not IS_ROOT:
        skip_unless_ci("needs root (two sandbox uids)")
    tmpdir = Path("/var/lib") / f"amp-tmp-{uuid.uuid4().hex[:8]}"  # outside every folder the sandbox covers
    tmpdir.mkdir(mode=0o755)
    try:
        names = []
        for k in range(2):
            marker = f"SECRET-MARKER-{k}-{uuid.uuid4().hex[:6]}"
            spy = TMP_SPY.format(marker=marker, other=f"SECRET-MARKER-{1 - k}-")
            folder = submission(tmp_path / "batch" / f"s{k}", {"loss_scaler.py": f"\n# {marker}\n" + spy})
            names.append(folder.name)
        done_event, samples = threading.Event(), []
        watcher = threading.Thread(target=lambda: samples.extend(_watch_staging(tmpdir, done_event)), daemon=True)
        watcher.start()
        try:
            done = grade_as("root", [tmp_path / "batch"], tmp_path / "out", "--jobs", "2",
                            env={"TMPDIR": str(tmpdir)})
        finally:
            done_event.set()
            watcher.join(timeout=10)
        assert done.returncode == 0, done.stderr[-3000:]
        both_staged = [when for when, count in samples if count >= 2]
        for name in names:
            results = results_of(tmp_path / "out", name)
            assert results["score"] == 90
            spies = [json.loads(line[4:]) for line in shown(results).splitlines() if line.startswith("SPY ")]
            assert spies, shown(results)[-2000:]
            for report in spies:
                assert report["own"] is True, report  # reading a staged file works from there...
                assert not report["found"], report  # ...yet the other's never was read
            # the spies looked while the other submission was staged (the comparison means something)
            assert any(r["start"] <= when <= r["end"] for r in spies for when in both_staged), (spies, both_staged[:3])
        assert not list(tmpdir.glob("amp-submission-*"))  # cleaned up
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


SLOW = '''

_original_init = ToyLossScaler.__init__


def _slow_init(self, *args, **kwargs):  # slow, not hanging: just under the call limit
    import time
    time.sleep(1.5)
    _original_init(self, *args, **kwargs)


ToyLossScaler.__init__ = _slow_init
'''


def test_slow_submission_is_graded_within_its_budget(tmp_path: Path) -> None:
    slow = submission(tmp_path / "slow", {"loss_scaler.py": SLOW})
    limits = {"submission_seconds": 12, "call_seconds": 2}
    started = time.monotonic()
    done = grade_as("root", [slow], tmp_path / "out",
                    env={"AMP_SANDBOX_LIMITS": json.dumps(limits)})
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-3000:]
    results = results_of(tmp_path / "out", "slow")
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["errored"] == 0 and summary["graded"] == 1  # graded, not errored
    assert "time budget used up" in json.dumps(results)
    assert "time limit" in results["extra_data"]["limits_hit"].values()
    assert results["execution_time"] <= limits["submission_seconds"] + 8  # the judge's bookkeeping after it
    assert elapsed < budget.watchdog_seconds(limits["submission_seconds"])  # the watchdog never had to act
    assert 0 < results["score"] < 90  # the tests that ran before the budget was spent kept their points


def test_one_budget_everywhere() -> None:
    from autograder.batch import run as batch
    from autograder.sandbox import runner as sandbox
    from autograder import cli

    assert budget.SUBMISSION_SECONDS <= 300
    assert sandbox.Limits().submission_seconds == budget.SUBMISSION_SECONDS
    pool = batch.LocalPool(Path("/nonexistent"), 1, (), {"submission_seconds": 42})
    assert pool.watchdog == budget.watchdog_seconds(42)
    assert batch.LocalPool(Path("/nonexistent"), 1, (), {}).watchdog == budget.watchdog_seconds()
    help_text = cli.build_parser()._subparsers._group_actions[0].choices["grade"].format_help()  # type: ignore
    assert f"({budget.SUBMISSION_SECONDS:g})" in " ".join(help_text.split())


# --------------------------------------------------------------------------- intake


def test_pathological_zip_names_are_read_in_linear_time(tmp_path: Path) -> None:
    archive = tmp_path / "names.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for k in range(40):  # what took 825 s with the backtracking regular expression
            bundle.writestr(f"{k:02d}" + " " * 65_000 + "(1).py", b"x")
        for k in range(2_000):
            bundle.writestr(f"d/{'n' * 200}{k}_{k}.py", b"x")
        bundle.writestr("loss_scaler.py", (SOLUTIONS / "loss_scaler.py").read_bytes())
    started = time.process_time()  # CPU time: a busy machine slows the clock, not the work
    staged = intake.stage(archive, workdir=tmp_path)
    elapsed = time.process_time() - started
    try:
        assert elapsed < 5
        assert staged.found == ["loss_scaler.py"]
        assert any("names longer than" in note for note in staged.notes)
    finally:
        shutil.rmtree(staged.folder)


def test_intake_caps_members_and_cleans_up(tmp_path: Path) -> None:
    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w") as bundle:
        for k in range(intake.MAX_MEMBERS + 1):
            bundle.writestr(f"f{k}", b"")
    work = tmp_path / "work"
    work.mkdir()
    with pytest.raises(intake.IntakeError, match="entries"):
        intake.stage(archive, workdir=work)
    assert not list(work.iterdir())  # no staging folder left behind
    with pytest.raises(intake.IntakeError, match="time budget"):
        intake.stage(SOLUTIONS, workdir=work, deadline=time.monotonic() - 1)
    assert not list(work.iterdir())


def test_staging_is_private(tmp_path: Path) -> None:
    staged = intake.stage(SOLUTIONS, workdir=tmp_path)
    try:
        assert staged.folder.stat().st_mode & 0o777 == 0o700
        assert all(p.stat().st_mode & 0o777 == 0o600 for p in staged.folder.iterdir())
    finally:
        shutil.rmtree(staged.folder)


def test_stale_staging_folders_of_dead_processes_are_swept(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = tmp_path / f"{intake.STAGING_PREFIX}{dead.pid}-abc"
    live = tmp_path / f"{intake.STAGING_PREFIX}{os.getppid()}-abc"
    stale.mkdir()
    live.mkdir()
    intake.sweep_stale(tmp_path)
    assert not stale.exists() and live.exists()


@pytest.mark.parametrize("name, expected", [
    ("loss_scaler.py", ("loss_scaler.py", True)),
    ("Loss_Scaler (1).py", ("loss_scaler.py", False)),
    ("amp_step-2.py", ("amp_step.py", False)),
    ("answers copy.py", ("answers.py", False)),
    ("loss_scaler.py.txt", ("loss_scaler.py", False)),
    ("x" * 300 + ".py", (None, False)),
    ("loss_scaler_" + "1" * 300 + ".py", (None, False)),
    ("notes.txt", (None, False)),
])
def test_contract_names(name: str, expected: tuple[str | None, bool]) -> None:
    assert intake.contract_name(name) == expected


# --------------------------------------------------------------------------- escaping


INJECTIONS = ['=HYPERLINK("http://evil.example/","x")', "+1+1", "-2+3", "@SUM(1,1)", "\tTAB", "\rCR",
              "**Score: 90 / 90** [/b] <img src=x onerror=alert(1)>", "\x1b[31mred\x1b[0m \x1b]0;title\x07"]


def test_escapes_are_total() -> None:
    for text in INJECTIONS:
        cell = escape.csv_cell(text)
        assert isinstance(cell, str) and not cell.startswith(escape.FORMULA_PREFIXES)
        inline = escape.markdown_inline(text)
        assert "<" not in inline and "\x1b" not in inline and "\n" not in inline and "**" not in inline
        assert "\x1b" not in escape.console(text) and "\x07" not in escape.console(text)
    assert escape.csv_cell(-1.5) == -1.5  # numbers are never text


def outside_code_fences(markdown: str) -> str:
    kept, fence = [], ""
    for line in markdown.splitlines():
        stripped = line.strip()
        if fence and stripped == fence:
            fence = ""
        elif not fence and stripped.startswith("```"):
            fence = stripped.rstrip("text")
        elif not fence:
            kept.append(line)
    return "\n".join(kept)


def test_injection_in_every_field_of_a_gradescope_export(tmp_path: Path) -> None:
    export = tmp_path / "export"
    first = export / "submission_1"
    first.mkdir(parents=True)
    for name in FILES:
        shutil.copy(SOLUTIONS / name, first / name)
    second = export / "submission_2"
    second.mkdir()
    evil_name = "e[b]\x1b[2J<img src=x onerror=alert(1)>**Score: 90**=1+1.zip"  # a name cannot hold "/"
    (second / evil_name).write_bytes(b"PK\x03\x04 not really a zip")
    people = [{":name:": INJECTIONS[6] + " " + INJECTIONS[7], ":sid:": INJECTIONS[1], ":email:": INJECTIONS[3]},
              {":name:": INJECTIONS[0], ":sid:": INJECTIONS[2], ":email:": INJECTIONS[4]}]
    metadata = {"submission_1": {":submitters:": people}, "submission_2": {":submitters:": [people[1]]}}
    (export / "submission_metadata.yml").write_text(json.dumps(metadata))  # JSON is YAML
    out = tmp_path / "out"
    done = grade_as("root", [export], out, "--progress")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "\x1b[2J" not in done.stdout and "\x1b]0" not in done.stdout and "\x07" not in done.stdout
    assert "\x1b" not in done.stderr
    import csv

    rows = list(csv.reader((out / "gradebook.csv").read_text().splitlines()))
    for row in rows[1:]:
        for cell in row:
            assert not cell.startswith(escape.FORMULA_PREFIXES), cell
    for path in [out / "summary.md", *out.glob("*/feedback.md")]:
        text = path.read_text()
        assert "\x1b" not in text and "\x07" not in text, path
        assert "<img" not in outside_code_fences(text), path  # inside a fence Markdown shows it as typed
    feedback = (out / "submission_1" / "feedback.md").read_text()
    score_lines = [line for line in feedback.splitlines() if "Score:" in line]
    assert score_lines[0].startswith("**Score: 90 / 90**")  # the real one comes first...
    assert all("\\*\\*Score" in line for line in score_lines[1:])  # ...and the forged one is shown as typed
    assert "not a readable zip" in (out / "summary.md").read_text()


def test_console_report_survives_markup_and_escape_codes(capsys: pytest.CaptureFixture[str]) -> None:
    from autograder.batch import console, inputs, summary
    from autograder.engine import rubric
    from autograder.batch.ledger import Entry

    reason = "x.zip holds [/b] and \x1b]0;pwned\x07 \x1b[2J"
    results = {"score": 0.0, "tests": [{"number": item.number, "score": 0.0, "max_score": item.points,
                                        "status": "failed", "output": "x"} for item in rubric.ITEMS]}
    rows = [(inputs.Submission("s[/b]", Path("s"), "s"), Entry("s[/b]", "d", "g", "errored", 0.0, 90.0, results,
                                                                reason=reason))]
    console.print_report(rows, summary.summarize(rows), Path("/out"))
    shown = capsys.readouterr().out
    assert "[/b]" in shown and "\x1b" not in shown and "\x07" not in shown


# --------------------------------------------------------------------------- one set of examples


def test_hidden_suite_explores_the_same_scenarios_from_cli_and_gradescope(tmp_path: Path) -> None:
    script = ROOT / "tests" / "scenario_calls.py"
    gradescope_modules = ["autograder.packaging.gradescope", "autograder.cli", "autograder.batch.worker", "autograder.batch.run",
                          "autograder.batch.summary", "autograder.sandbox.runner", "autograder.packaging.otter_bridge"]
    calls = []
    for preload in ([], gradescope_modules):
        done = subprocess.run([sys.executable, str(script), *preload], cwd=tmp_path, capture_output=True, text=True,
                              timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, done.stderr[-3000:]
        data = json.loads(done.stdout.splitlines()[-1])
        assert data["passed"] == data["cases"]
        calls.append(data["calls"])
    assert len(calls[0]) > 100 and calls[0] == calls[1]
    assert not list(tmp_path.iterdir())  # nothing written (no .hypothesis/constants) in the working directory


def test_min_isolation_from_the_environment_refuses_below_a_valid_level(tmp_path: Path) -> None:
    """``AMP_MIN_ISOLATION=namespaces`` (a valid level, not a typo) refuses where only Landlock+seccomp are reached."""
    needs("docker")
    done = grade_as("docker", [SOLUTIONS], tmp_path / "out", env={settings.MIN_ISOLATION.env: "namespaces"})
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Refusing to grade" in done.stderr and f"level {_expected_level('docker')!r}" in done.stderr
    assert not (tmp_path / "out" / "gradebook.csv").exists()
    assert levels.refusal("landlock+seccomp", "landlock+seccomp") is None  # at the level itself: no refusal
