"""``make setup`` takes the build of torch the machine uses (autograder/torch_install.py): the CPU build where there is
no NVIDIA GPU, PyPI's CUDA build where there is one, and whatever the venv already holds at the pinned version."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from autograder import torch_install
from conftest import skip_unless_ci

ROOT = Path(__file__).resolve().parents[1]


def test_the_pin_is_pyprojects() -> None:
    assert torch_install.torch_pin() == "torch==2.13.0"
    assert '"torch==2.13.0"' in (ROOT / "pyproject.toml").read_text()


def test_the_cpu_index_is_offered_beside_pips_own() -> None:
    cpu = torch_install.install_command("py", "torch==2.13.0", cpu_index=True)
    gpu = torch_install.install_command("py", "torch==2.13.0", cpu_index=False)
    assert cpu[cpu.index("--extra-index-url") + 1] == "https://download.pytorch.org/whl/cpu"
    assert "--index-url" not in cpu  # pip's own indexes stay: the CPU one is added, never put in their place
    assert "torch==2.13.0" in gpu and not any("download.pytorch.org" in part for part in gpu)


def test_every_package_reads_the_one_cpu_index() -> None:
    from autograder.packaging import gradescope, otter_build

    assert gradescope.TORCH_CPU_INDEX is otter_build.TORCH_CPU_INDEX is torch_install.TORCH_CPU_INDEX
    declared = [path.relative_to(ROOT).as_posix() for path in sorted((ROOT / "autograder").rglob("*.py"))
                if '"https://download.pytorch.org/whl/cpu"' in path.read_text()]
    assert declared == ["autograder/torch_install.py"]


def test_a_venv_holding_the_pinned_torch_keeps_it() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "autograder" / "torch_install.py"), sys.executable],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("torch 2.13.0") and done.stdout.rstrip().endswith("build: kept")


@pytest.mark.skipif(torch_install.has_nvidia_gpu(), reason="an NVIDIA GPU is here: make setup keeps PyPI's CUDA build")
def test_without_a_gpu_pip_resolves_the_cpu_build(tmp_path: Path) -> None:
    """What make setup's command makes pip choose on this machine, resolved without installing anything."""
    command = torch_install.install_command(sys.executable, "torch==2.13.0", torch_install.reachable())
    command[command.index("--quiet")] = "--no-deps"
    done = subprocess.run(command + ["--dry-run", "--ignore-installed", "--report", str(tmp_path / "report.json")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    chosen = [item["metadata"]["version"] for item in json.loads((tmp_path / "report.json").read_text())["install"]]
    if chosen != ["2.13.0+cpu"]:
        skip_unless_ci(f"neither the CPU index nor a local CPU wheel is reachable here: pip chose {chosen}")
    assert chosen == ["2.13.0+cpu"]
