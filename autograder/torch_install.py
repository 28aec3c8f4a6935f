"""Which build of torch an install takes, declared once: ``make setup`` runs this file, and every package the
grader builds (Gradescope, PrairieLearn, GitHub Classroom, otter, the notebooks) reads :data:`TORCH_CPU_INDEX` here.

PyPI's build of torch for Linux is a CUDA build of several GB; a machine without an NVIDIA GPU uses none of it.
``make setup`` therefore offers pip torch's CPU index *beside* the indexes pip is configured with: for the pinned
``torch==X`` pip then sees both ``X`` (PyPI's, CUDA) and ``X+cpu`` (the CPU index's, or a local wheel pip's
find-links hold) and takes ``X+cpu``, the higher version by PEP 440 (a local label sorts above none).  The index is
offered only when one request reaches it (pip would otherwise retry it for every package); where neither it nor a
local CPU wheel can be reached, pip takes the build it finds, and this says so.  A machine with an
NVIDIA GPU keeps PyPI's CUDA build, and a venv that already holds the pinned torch, of either build, keeps it.

Standard library only: it runs with the system's Python before the virtual environment has anything in it.
Usage: ``python3 autograder/torch_install.py VENV_PYTHON``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

#: torch's CPU wheels (and, mirrored there, the packages torch depends on).
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
#: The device nodes of NVIDIA's driver: present where a CUDA build of torch can use a GPU.
NVIDIA_NODES = ("/dev/nvidiactl", "/dev/nvidia0")


def torch_pin(pyproject: Path = PYPROJECT) -> str:
    """The requirement pyproject.toml pins torch with (``torch==X``)."""
    found = re.search(r'"(torch==[^";\s]+)"', pyproject.read_text(encoding="utf-8"))
    if not found:
        raise SystemExit(f"{pyproject} pins no torch==VERSION")
    return found.group(1)


def has_nvidia_gpu() -> bool:
    """Whether this machine has an NVIDIA driver's device nodes (then PyPI's CUDA build is the one to use)."""
    return any(os.path.exists(node) for node in NVIDIA_NODES)


def reachable(url: str = TORCH_CPU_INDEX, seconds: float = 10.0) -> bool:
    """Whether one request to ``url`` gets an answer (through the proxies the environment names, as pip's do)."""
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/torch/", timeout=seconds):
            return True
    except (OSError, ValueError):
        return False


def installed_torch(python: str) -> str | None:
    """The version of torch in ``python``'s environment (``2.13.0+cpu``, ``2.13.0``), or None."""
    done = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('torch'))"],
                          capture_output=True, text=True)
    return done.stdout.strip() or None if done.returncode == 0 else None


def install_command(python: str, pin: str, cpu_index: bool) -> list[str]:
    """The pip command that installs ``pin``, with the CPU index offered beside pip's own where ``cpu_index``."""
    command = [python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", pin]
    return command + ["--extra-index-url", TORCH_CPU_INDEX] if cpu_index else command


def build_of(version: str) -> str:
    """``"CPU"`` for a ``+cpu`` version, else the CUDA build PyPI and the CUDA indexes give."""
    return "CPU" if version.endswith("+cpu") else "CUDA (several GB; it runs on a CPU too)"


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    python, pin = argv[0], torch_pin()
    version = installed_torch(python)
    if version and version.split("+")[0] == pin.split("==")[1]:
        print(f"torch {version} is already in this environment, {build_of(version)} build: kept")
        return 0
    gpu = has_nvidia_gpu()
    offered = not gpu and reachable()
    print(f"installing {pin}: " + ("an NVIDIA GPU is here, so PyPI's CUDA build" if gpu else
                                   f"no NVIDIA GPU here, so the CPU build ({TORCH_CPU_INDEX}" +
                                   (")" if offered else " cannot be reached: a local CPU wheel, if pip has one)")))
    done = subprocess.run(install_command(python, pin, offered))
    if done.returncode != 0:
        return done.returncode
    version = installed_torch(python) or "?"
    print(f"installed torch {version}, {build_of(version)} build")
    if not gpu and not version.endswith("+cpu"):
        print(f"note: neither {TORCH_CPU_INDEX} nor a local CPU wheel could be reached, so pip installed the build it "
              f"found; grading is the same with it", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
