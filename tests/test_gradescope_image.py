"""The Gradescope zip installs and grades in a fresh OS root, as on Gradescope's base images.

Each test runs the built zip's ``setup.sh`` and then ``run_autograder`` on ``solutions/`` inside a fresh
``debootstrap`` root of Debian 12 (its system Python 3.11 is marked externally managed: PEP 668, like
Ubuntu 24.04's), once with that Python and once with a Python 3.10 put first on ``PATH`` (Ubuntu 22.04's
version). Both must give 90/90 and a ``results.json`` valid against Gradescope's schema.

The Debian base root is made once and kept in the user's cache (``~/.cache/amp-homework-image``, never in
the checkout: a root holds device files that no copy of the checkout may read), so reruns skip
debootstrap; every test copies it afresh. Needs root (chroot, mounts) and debootstrap; CI runs it
(marker ``image``). What it measures (setup.sh and grading time, the sandbox's isolation level) is
printed: run with ``-s`` to see it.

torch: setup.sh takes torch's CPU index unless ``AMP_TORCH_INDEX_URL`` names another, which these tests
set to the index pip uses on this machine, with the wheels folders of this machine's pip configuration
(``PIP_FIND_LINKS``: a CPU build for Python 3.11) visible inside the root. Python 3.10 gets its wheels
from a folder that ``pip download`` fills once, here, with the interpreter's own pip.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest

from autograder.packaging.gradescope import TORCH_INDEX_ENV, build
from conftest import ROOT

pytestmark = [pytest.mark.image, pytest.mark.slow]

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "amp-homework-image"
BASE = CACHE / "bookworm"
SUITE = "bookworm"
SCHEMA = json.loads((Path(__file__).parent / "gradescope_results.schema.json").read_text())
#: A Python 3.10 for the Ubuntu 22.04 stand-in: $AMP_PYTHON310, else pyenv's, else one on PATH.
PYTHON310_ENV = "AMP_PYTHON310"
#: PATH inside the root (Debian's default for root).
CHROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SETUP_TIMEOUT_S = 2400
GRADE_TIMEOUT_S = 900


def _why_not_here() -> str | None:
    if sys.platform != "linux" or os.geteuid() != 0:
        return "needs root on Linux (chroot and mounts)"
    if shutil.which("debootstrap") is None:
        return "needs debootstrap (apt-get install debootstrap; .ci/run installs it)"
    return None


if _why_not_here():
    pytest.skip(_why_not_here(), allow_module_level=True)


def debian_mirror() -> str:
    """The Debian archive that this machine's apt uses (deb822 ``URIs:`` or one-line ``deb`` sources)."""
    sources = sorted(Path("/etc/apt").glob("sources.list.d/*.sources")) + sorted(Path("/etc/apt").glob("sources.list*"))
    for path in sources:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        for uri in re.findall(r"^URIs:\s*(\S+)", text, re.M) + re.findall(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)", text, re.M):
            if uri.rstrip("/").endswith("/debian"):
                return uri
    pytest.fail("no Debian archive in /etc/apt/sources.list*: debootstrap needs one")


def pip_index_url() -> str:
    """The index pip uses on this machine ($PIP_INDEX_URL, pip's configuration, else pip's default)."""
    done = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"], capture_output=True, text=True)
    if os.environ.get("PIP_INDEX_URL"):
        return os.environ["PIP_INDEX_URL"]
    if done.returncode == 0 and done.stdout.strip():
        return done.stdout.strip()
    from pip._internal.models.index import PyPI  # pip's own default, not written out here

    return PyPI.simple_url


def wheel_folders() -> list[Path]:
    """This machine's pip ``find-links`` folders (configuration or $PIP_FIND_LINKS) that exist."""
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    found = re.findall(r"find-links='([^']*)'", done.stdout) + [os.environ.get("PIP_FIND_LINKS", "")]
    return sorted({Path(p) for entry in found for p in entry.split() if p and Path(p).is_dir()})


def sh(*command: str, timeout: float = 600, **kwargs: object) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)  # type: ignore[call-overload]
    assert done.returncode == 0, f"{' '.join(command)} -> {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def mounts_under(root: Path) -> list[str]:
    """Mount points at or below ``root`` (from /proc/self/mountinfo)."""
    prefix = str(root.resolve())
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    return [p for p in points if p == prefix or p.startswith(prefix + "/")]


def remove_root(root: Path) -> None:
    """Unmount everything below ``root``, then delete it; never follows a mount that is still there."""
    for point in sorted(mounts_under(root), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True)
    left = mounts_under(root)
    assert not left, f"still mounted, {root} not deleted: {left}"
    subprocess.run(["rm", "-rf", "--one-file-system", str(root)], check=True)


@pytest.fixture(scope="session")
def debian_base() -> Path:
    """A minimal Debian 12 root, made by debootstrap once and kept in CACHE/bookworm."""
    stamp = BASE / ".complete"
    if not stamp.is_file():
        if BASE.exists():
            remove_root(BASE)
        partial = BASE.with_name(BASE.name + ".partial")
        if partial.exists():
            remove_root(partial)
        partial.parent.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        try:
            sh("debootstrap", "--variant=minbase", SUITE, str(partial), debian_mirror(), timeout=1800)
        finally:
            for point in sorted(mounts_under(partial), key=len, reverse=True):
                subprocess.run(["umount", "-l", point], capture_output=True)
        partial.rename(BASE)
        stamp.write_text(f"debootstrap {SUITE} in {time.monotonic() - started:.0f} s\n")
    return BASE


@contextlib.contextmanager
def fresh_root(base: Path, name: str) -> Iterator[Path]:
    """A copy of ``base`` with /proc, /dev and /sys mounted, the host's DNS and CA bundle; removed afterwards."""
    root = CACHE / "roots" / name
    if root.exists():
        remove_root(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    sh("cp", "-a", str(base), str(root))
    try:
        for etc in ("resolv.conf", "hosts"):
            if Path("/etc", etc).is_file():
                (root / "etc" / etc).unlink(missing_ok=True)
                shutil.copy(Path("/etc", etc), root / "etc" / etc)
        # The egress of this machine may present its own CA: pip inside the root trusts what the host trusts.
        shutil.copy(Path(os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"), root / "host-ca.crt")
        sh("mount", "-t", "proc", "proc", str(root / "proc"))
        for system in ("dev", "sys"):  # torch reads /sys for its CPU info; /dev for /dev/shm and /dev/null
            sh("mount", "--rbind", f"/{system}", str(root / system))
            sh("mount", "--make-rslave", str(root / system))
        yield root
    finally:
        remove_root(root)


def bind_readonly(source: Path, root: Path, inside: str) -> str:
    target = root / inside.lstrip("/")
    target.mkdir(parents=True, exist_ok=True)
    sh("mount", "--bind", str(source), str(target))
    sh("mount", "-o", "remount,bind,ro", str(target))
    return inside


def in_root(root: Path, script: str, env: dict[str, str], timeout: float) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``bash -c script`` inside ``root`` with exactly ``env`` (over a default PATH, HOME, LANG); return it and its seconds."""
    merged = {"PATH": CHROOT_PATH, "HOME": "/root", "LANG": "C.UTF-8", **env}
    environment = ["env", "-i", *(f"{k}={v}" for k, v in merged.items())]
    started = time.monotonic()
    done = subprocess.run(["chroot", str(root), *environment, "bash", "-c", script], capture_output=True, text=True,
                          timeout=timeout)
    return done, time.monotonic() - started


def find_python(version: str) -> Path | None:
    """A working interpreter of ``version`` ("3.10") with venv and ensurepip: $AMP_PYTHON310 for 3.10, pyenv's, or PATH's."""
    candidates = [os.environ.get(PYTHON310_ENV, "")] if version == "3.10" else []
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += sorted(map(str, pyenv_root.glob(f"versions/{version}.*/bin/python{version}")), reverse=True)
    candidates += [shutil.which(f"python{version}") or ""]
    for candidate in filter(None, candidates):
        done = subprocess.run([candidate, "-c", "import sys, venv, ensurepip; print('%d.%d' % sys.version_info[:2])"],
                              capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == version:
            return Path(candidate)
    return None


def wheels_for(python: Path, requirements: Path) -> Path:
    """A folder with every wheel that ``requirements`` needs on ``python`` (kept in CACHE)."""
    folder = CACHE / f"wheels-{python.name}"
    stamp = folder / ".complete"
    if stamp.is_file() and stamp.read_text() == requirements.read_text():
        return folder
    sh(str(python), "-m", "pip", "download", "--quiet", "--only-binary=:all:", "-d", str(folder), "-r",
       str(requirements), timeout=3600)
    stamp.write_text(requirements.read_text())
    return folder


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13"])
def test_zip_requirements_resolve(version: str, autograder_zip: Path, tmp_path: Path) -> None:
    """``pip install -r requirements.txt`` resolves on each Python claimed (markers evaluated by that Python)."""
    python = find_python(version)
    if python is None:
        pytest.skip(f"no Python {version} here")
    requirements = tmp_path / "requirements.txt"
    requirements.write_bytes(zipfile.ZipFile(autograder_zip).read("requirements.txt"))
    done = sh(str(python), "-m", "pip", "install", "--dry-run", "--ignore-installed", "--only-binary=:all:",
              "--target", str(tmp_path / "target"), "-r", str(requirements), timeout=900)
    would = done.stdout.splitlines()[-1]
    for line in requirements.read_text().splitlines():
        if ";" in line:  # an environment marker: pip decided with this Python whether it applies
            continue
        assert re.sub(r"[-_.]", "-", line.split(";")[0].replace("==", "-")).lower() in re.sub(r"[-_.]", "-", would).lower(), \
            f"{line} not in pip's plan on {version}: {would}"


@pytest.fixture(scope="module")
def autograder_zip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("dist") / "autograder.zip")


def install_and_grade(root: Path, autograder_zip: Path, env: dict[str, str], python: str) -> dict:
    """Lay out /autograder as Gradescope does, run setup.sh, then run_autograder on solutions/; return results.json."""
    autograder = root / "autograder"
    with zipfile.ZipFile(autograder_zip) as bundle:  # as unzip does: with the modes the zip records
        for info in bundle.infolist():
            path = Path(bundle.extract(info, autograder / "source"))
            if info.external_attr >> 16:
                path.chmod(info.external_attr >> 16 & 0o777)
    (autograder / "submission").mkdir()
    for name in ("loss_scaler.py", "amp_step.py", "answers.py"):
        shutil.copy(ROOT / "solutions" / name, autograder / "submission" / name)
    (autograder / "results").mkdir()

    done, setup_s = in_root(root, "cd /autograder/source && bash ./setup.sh", env, SETUP_TIMEOUT_S)
    assert done.returncode == 0, f"setup.sh failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    version, _ = in_root(root, "/autograder/venv/bin/python -c 'import sys, torch; print(sys.version_info[:2], torch.__version__)'",
                         {}, 120)
    assert version.returncode == 0 and version.stdout.startswith(python), version.stdout + version.stderr

    # Gradescope copies run_autograder to /autograder and runs it there, with the system's environment.
    shutil.copy2(autograder / "source" / "run_autograder", autograder / "run_autograder")
    done, grade_s = in_root(root, "/autograder/run_autograder", {}, GRADE_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-4000:]
    results = json.loads((autograder / "results" / "results.json").read_text())
    jsonschema.validate(results, SCHEMA)
    # A chroot must not weaken the sandbox: the same level as the grader reaches on this machine.
    host = sh(sys.executable, "-c", "from autograder.sandbox import confine; print(confine.probe_level())", cwd=ROOT)
    assert results["extra_data"]["isolation"] == host.stdout.strip(), (results["extra_data"], host.stdout)
    print(f"\n[{python}] setup.sh {setup_s:.0f} s; run_autograder {grade_s:.1f} s (execution_time "
          f"{results.get('execution_time')} s); isolation {results.get('extra_data', {}).get('isolation')!r}")
    return results


def assert_full_marks(results: dict) -> None:
    failed = [f"{t.get('number')} {t.get('name')}: {str(t.get('output', ''))[:300]}" for t in results["tests"]
              if t.get("score", 0) < t.get("max_score", 0)]
    assert results["score"] == 90, f"{results['score']}/90; lost on:\n" + "\n".join(failed) + "\n" + results.get("output", "")[-2000:]


def test_debian12_pep668_image_grades_the_solution(debian_base: Path, autograder_zip: Path) -> None:
    with fresh_root(debian_base, "debian12") as root:
        env = {TORCH_INDEX_ENV: pip_index_url(), "PIP_CERT": "/host-ca.crt"}
        links = [bind_readonly(folder, root, f"/host-wheels/{i}") for i, folder in enumerate(wheel_folders())]
        if links:
            env["PIP_FIND_LINKS"] = " ".join(links)
        results = install_and_grade(root, autograder_zip, env, python="(3, 11)")
        assert_full_marks(results)
        # The stand-in is a PEP 668 image, and setup.sh left its system Python alone.
        assert list(root.glob("usr/lib/python3*/EXTERNALLY-MANAGED")), "the root's Python is not marked externally managed"
        system, _ = in_root(root, "python3 -c 'import torch'", {}, 60)
        assert system.returncode != 0 and "No module named 'torch'" in system.stderr


def test_python310_image_grades_the_solution(debian_base: Path, autograder_zip: Path) -> None:
    python = find_python("3.10")
    if python is None:
        pytest.skip(f"no Python 3.10 with venv and ensurepip here (set ${PYTHON310_ENV})")
    requirements = CACHE / "requirements-zip.txt"
    CACHE.mkdir(parents=True, exist_ok=True)
    requirements.write_bytes(zipfile.ZipFile(autograder_zip).read("requirements.txt"))
    wheels = wheels_for(python, requirements)
    with fresh_root(debian_base, "python310") as root:
        # Outside /root (0700 in the root too): the sandbox uid must read the interpreter's standard library.
        prefix = python.resolve().parent.parent
        # First on PATH, so setup.sh's python3 is 3.10 (as on Ubuntu 22.04); a venv made from a symlink to it
        # would look for the standard library beside the link, so no symlink.
        bind_readonly(prefix, root, "/opt/python3.10")
        # Its libpython is found through the loader's cache, as a system-wide install's is (its RUNPATH names the host's folder).
        (root / "etc/ld.so.conf.d/python3.10.conf").write_text("/opt/python3.10/lib\n")
        done, _ = in_root(root, "ldconfig && python3 --version", {"PATH": f"/opt/python3.10/bin:{CHROOT_PATH}"}, 60)
        assert done.stdout.startswith("Python 3.10"), done.stdout + done.stderr
        env = {"PATH": f"/opt/python3.10/bin:{CHROOT_PATH}", TORCH_INDEX_ENV: pip_index_url(), "PIP_CERT": "/host-ca.crt",
               "PIP_FIND_LINKS": bind_readonly(wheels, root, "/host-wheels/py310")}
        results = install_and_grade(root, autograder_zip, env, python="(3, 10)")
        assert_full_marks(results)
