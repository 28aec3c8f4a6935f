"""The GPU student process's seal, found on the first real GPU run (docs/gpu.md) and proved here on the CPU.

On an H200 (Linux 6.18, driver 580) CUDA did not start under Landlock at all, even with every file readable and
``ioctl()`` on the device nodes, and the preflight's node check asked for MIG's administration nodes.  So a GPU
student process gets no Landlock; its root is built from an allow-list (``autograder.sandbox.view``), read-only but
its scratch and private tmpfs (``mounts.read_only_rest``), and it is sealed only at ``namespaces``: below that
grade-gpu refuses unless the operator asks.  The dry mode runs the same sandbox path on the CPU.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from conftest import ROOT
from test_isolation import DOCKER_CAPS, needs, nobody_python, nobody_root  # noqa: F401 - fixtures

#: Student code that tries to leave a file for another student in world-writable folders (a course's shared
#: folder, /var/crash...); it says what happened to each in the failure it raises.
PROBE = '''
def amp_step(*args, **kwargs):
    import errno
    outcomes = []
    for path in {paths!r}:
        try:
            with open(path, "w") as stream:
                stream.write("a token for another student")
            outcomes.append("WROTE")
        except OSError as exc:
            outcomes.append(errno.errorcode.get(exc.errno, str(exc.errno)))
    raise RuntimeError("probe: " + " ".join(outcomes))
'''


def grade_gpu(*args: str, setpriv: tuple[str, ...] = (), env: dict[str, str] | None = None, python: str = sys.executable,
              root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``grade-gpu --dry`` with ``python`` from the checkout ``root`` (both packages imported from it)."""
    path = {"PYTHONPATH": os.pathsep.join([str(root), str(root / "assignment")])} if root != ROOT else {}
    return subprocess.run([*setpriv, python, "-m", "autograder", "grade-gpu", *args, "--dry"], cwd=root,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **path, **(env or {})})


@pytest.fixture
def shared_folder() -> Path:
    """A world-writable folder under /var, which no cover hides (removed afterwards)."""
    folder = Path("/var") / f"amp-shared-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir(mode=0o1777)
    except PermissionError:
        pytest.skip("needs root (to make a folder under /var)")
    os.chmod(folder, 0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_gpu_student_process_can_write_nowhere_shared(tmp_path: Path, shared_folder: Path) -> None:
    """A world-writable folder in its view (the MPS pipe folder CUDA is told of) is read-only; one outside its view
    does not exist for it."""
    needs("root")
    submission = tmp_path / "probe"
    shutil.copytree(ROOT / "solutions", submission, ignore=shutil.ignore_patterns("__pycache__"))
    kept, elsewhere = shared_folder / "kept", shared_folder / "elsewhere"
    kept.mkdir(mode=0o1777)
    elsewhere.mkdir(mode=0o1777)
    os.chmod(kept, 0o1777)
    os.chmod(elsewhere, 0o1777)
    targets = [str(kept / "from-student"), str(elsewhere / "from-student")]
    with (submission / "amp_step.py").open("a", encoding="utf-8") as stream:
        stream.write(PROBE.format(paths=targets))
    done = grade_gpu(str(submission), "--out", str(tmp_path / "out"), env={"CUDA_MPS_PIPE_DIRECTORY": str(kept)})
    assert done.returncode == 0, done.stderr[-2000:]
    preflight = json.loads((tmp_path / "out" / "gpu_preflight.json").read_text())
    assert preflight["isolation"] == "namespaces" and str(kept) in preflight["facts"]["kept_visible"]
    results = (tmp_path / "out" / "probe" / "gpu_results.json").read_text()
    assert "probe: EROFS ENOENT" in results, results[:3000]  # the probe ran; the mount refused, the other is absent
    assert "WROTE" not in results and not list(shared_folder.glob("*/from-student"))


def test_below_namespaces_grade_gpu_refuses_unless_the_operator_asks(tmp_path: Path, nobody_python: str,
                                                                    nobody_root: Path) -> None:
    """Docker's capabilities (no CAP_SYS_ADMIN): no namespaces, and a GPU process gets no Landlock either.  Graded
    with an interpreter and a checkout the sandbox's uids can read (a checkout in a 0700 folder is not: without a
    mount namespace, nothing re-exposes the libraries CUDA loads, and the preflight says so)."""
    needs("docker")
    docker = ("setpriv", "--inh-caps=-all", f"--bounding-set={DOCKER_CAPS}")
    refused = grade_gpu(str(ROOT / "solutions"), "--out", str(tmp_path / "refused"), setpriv=docker)
    assert refused.returncode == 1
    line = json.loads((tmp_path / "refused" / "gpu_preflight.json").read_text())["line"]
    assert "GPU student code would run at isolation level 'seccomp'" in line and "CAP_SYS_ADMIN" in line, line
    assert "--min-isolation seccomp" in line and not (tmp_path / "refused" / "solutions").exists()

    asked = grade_gpu(str(nobody_root / "solutions"), "--out", str(tmp_path / "asked"), "--min-isolation", "seccomp",
                      setpriv=docker, python=nobody_python, root=nobody_root)
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert "WARNING: GPU student code runs at isolation level 'seccomp'" in asked.stderr
    assert "solutions: 10 / 10" in asked.stdout


def test_only_the_nodes_every_cuda_process_opens_are_required() -> None:
    """MIG's administration nodes (root-only on the H200 that ran it) are not CUDA's: a closed one stops nothing."""
    from autograder.gpu import access as gpu_access
    from autograder.gpu.preflight import problems

    assert [node for node in ("/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia12", "/dev/nvidia-uvm",
                              "/dev/nvidia-uvm-tools", "/dev/nvidia-caps/nvidia-cap1", "/dev/nvidia-modeset")
            if gpu_access.required(node)] == ["/dev/nvidiactl", "/dev/nvidia0", "/dev/nvidia12", "/dev/nvidia-uvm"]
    report = {"torch": "2.13.0", "torch_cuda": "13.0", "rlimit_as": None, "hidden_folders": [], "uid": 64121,
              "groups": [64120], "cuda": {"available": True, "matmul_ok": True},
              "nodes": {"/dev/nvidia-caps/nvidia-cap1": False, "/dev/nvidia-caps/nvidia-cap2": False,
                        "/dev/nvidia0": True, "/dev/nvidiactl": True, "/dev/nvidia-uvm": True}}
    assert problems(report, gpu_access.AccessPlan(), "DEFAULT", dry=False) == []
    closed = problems({**report, "nodes": {**report["nodes"], "/dev/nvidia-uvm": False}}, gpu_access.AccessPlan(),
                      "DEFAULT", dry=False)
    assert len(closed) == 1 and "cannot open /dev/nvidia-uvm:" in closed[0]


REMOUNT_CHILD = '''
import ctypes, errno
from autograder.sandbox import mounts
libc = ctypes.CDLL(None, use_errno=True)
assert libc.unshare(0x00020000) == 0  # a mount namespace of its own (CLONE_NEWNS)
libc.mount(b"none", b"/", None, ctypes.c_ulong(mounts.MS_REC | mounts.MS_PRIVATE), None)  # private: nothing leaks out
sealed = mounts._remount_each_read_only(libc, {{"/proc", "/sys"}})
outcome = []
for path, text in (({target!r}, "a token"), ("/proc/self/comm", "probe")):
    try:
        with open(path, "w") as stream:
            stream.write(text)
        outcome.append("WROTE")
    except OSError as exc:
        outcome.append(errno.errorcode.get(exc.errno, str(exc.errno)))
print(sealed, *outcome)
'''


def test_without_mount_setattr_each_mount_is_remounted_read_only(tmp_path: Path) -> None:
    """The fallback for kernels before 5.12 (or a seccomp profile that refuses mount_setattr)."""
    needs("root")
    target = tmp_path / "from-student"
    done = subprocess.run([sys.executable, "-c", REMOUNT_CHILD.format(target=str(target))], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["True", "EROFS", "WROTE"], done.stdout + done.stderr[-2000:]
    assert not target.exists()  # and its own /proc/<pid> stays writable (where CUDA names its threads)


#: Student code that looks for what it should not see: the absolute paths in its command line but the interpreter
#: (the folder being graded, the output folder), and the paths the test gives it; then reads its own file and
#: writes its scratch folder.
PEEK = '''
def amp_step(*args, **kwargs):
    import errno, os
    def seen(path):
        try:
            os.stat(path)
            return "SEEN"
        except OSError as exc:
            return errno.errorcode.get(exc.errno, str(exc.errno))
    told = [arg for arg in open("/proc/self/cmdline").read().split("\\0")[1:] if arg.startswith("/")]
    with open(__file__) as stream:
        own = "READ" if "def amp_step" in stream.read() else "EMPTY"
    with open("scratch-file", "w") as stream:
        stream.write("mine")
    raise RuntimeError("peek: told=" + ",".join(map(seen, told)) + " given=" + ",".join(map(seen, {paths!r}))
                       + " own=" + own + " scratch=" + seen("scratch-file") + " :end")
'''


def hidden_from_view(workspace: Path, root: Path, allowed: list[str]) -> tuple[Path, list[str], Path]:
    """(the submission ``alice`` with :data:`PEEK` appended, the paths it must not see, a file planted in /tmp that
    the caller removes): a classmate ``bob`` beside it, the checkout ``root``'s grader files, the plan cache
    (``$AMP_PLAN_CACHE``: ``workspace/plan-cache``), and each top folder on the way to none of ``allowed``."""
    folder = workspace / "submissions"
    alice, bob = folder / "alice", folder / "bob"
    for student in (alice, bob):
        shutil.copytree(ROOT / "solutions", student, ignore=shutil.ignore_patterns("__pycache__"))
    (workspace / "plan-cache").mkdir()
    planted = Path("/tmp") / f"amp-planted-{uuid.uuid4().hex[:8]}"
    planted.write_text("a classmate's token")
    real = [Path(path).resolve() for path in allowed]
    tops = [top for top in ("/work", "/home", "/root", "/srv", "/opt", "/mnt", "/var", "/run", "/media")
            if Path(top).is_dir() and not any(path.is_relative_to(top) for path in real)]
    secret = [str(bob / "amp_step.py"), str(folder), str(planted), str(root / "autograder" / "hidden"),
              str(root / "tests"), str(root / "solutions"), str(root / "autograder"), str(workspace / "plan-cache"),
              *tops]
    with (alice / "amp_step.py").open("a", encoding="utf-8") as stream:
        stream.write(PEEK.format(paths=secret))
    return alice, secret, planted


def test_a_gpu_student_process_sees_only_its_allow_list(tmp_path: Path) -> None:
    """Its view is built: the folder being graded (named in its command line), a classmate's submission, the
    grader's files and caches, /tmp and the top folders that hold no allowed path do not exist for it at all."""
    needs("root")
    allowed = [sys.prefix, sys.base_prefix, str(ROOT / "assignment" / "checks")]
    alice, secret, planted = hidden_from_view(tmp_path, ROOT, allowed)
    try:
        done = grade_gpu(str(alice), "--out", str(tmp_path / "out"),
                         env={"AMP_PLAN_CACHE": str(tmp_path / "plan-cache")})
    finally:
        planted.unlink()
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "out" / "gpu_preflight.json").read_text())["isolation"] == "namespaces"
    results = json.loads((tmp_path / "out" / "alice" / "gpu_results.json").read_text())
    text = next(test["output"] for test in results["tests"] if "peek: " in test["output"])
    # told: what its command line names (nothing: the zygote erased it); given: the folder being graded, a classmate,
    # the grader's files, whose paths it is handed here
    given = ",".join(["ENOENT"] * len(secret))
    assert f"peek: told= given={given} own=READ scratch=SEEN :end" in text, text
