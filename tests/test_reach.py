"""The interpreter's folders reached through descriptors (autograder.sandbox.reach): which folders need one, and the
names a student process then uses."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from autograder.sandbox import reach
from conftest import skip_unless_ci


@pytest.fixture
def public_tmp() -> Iterator[Path]:
    """A folder every user can enter (pytest's own are 0700, under a 0700 base)."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp" if os.path.isdir("/var/tmp") else None))
    os.chmod(folder, 0o755)
    if not reach.enterable_by_others(str(folder)):
        skip_unless_ci(f"{folder.parent} is not enterable by other users here")
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    table: dict[str, int] = {}
    monkeypatch.setattr(reach, "_OPENED", table)
    return table


def test_a_folder_below_a_private_one_is_not_enterable_by_others(public_tmp: Path) -> None:
    tmp_path = public_tmp
    private = tmp_path / "home"
    inner = private / "python" / "lib"
    inner.mkdir(parents=True)
    for folder in (inner, inner.parent):
        os.chmod(folder, 0o755)
    os.chmod(private, 0o755)
    assert reach.enterable_by_others(str(inner))
    os.chmod(private, 0o700)  # root's home, a mktemp -d
    assert not reach.enterable_by_others(str(inner))
    assert not reach.enterable_by_others(str(private))
    os.chmod(private, 0o711)  # searchable, not listable: the folders below it are reachable
    assert reach.enterable_by_others(str(inner)) and not reach.enterable_by_others(str(private))


def test_only_unreachable_folders_are_opened(public_tmp: Path, opened: dict[str, int]) -> None:
    tmp_path = public_tmp
    private, public = tmp_path / "private", tmp_path / "public"
    (private / "lib").mkdir(parents=True)
    public.mkdir()
    os.chmod(private, 0o700)
    os.chmod(public, 0o755)
    try:
        reach.open_unreachable([str(private / "lib"), str(public), str(tmp_path / "missing")])
        assert set(opened) == {str(private / "lib")}
        fd = opened[str(private / "lib")]
        assert os.path.samefile(f"/proc/self/fd/{fd}", private / "lib")
    finally:
        for fd in set(opened.values()):
            os.close(fd)


def test_a_path_takes_the_deepest_opened_folder_that_holds_it(opened: dict[str, int]) -> None:
    opened.update({"/root/py": 3, "/root/py/lib/python3.11": 4})
    assert reach.alias("/root/py/lib/python3.11/wave.py") == "/proc/self/fd/4/wave.py"
    assert reach.alias("/root/py/lib/python3.11") == "/proc/self/fd/4"
    assert reach.alias("/root/py/bin/python") == "/proc/self/fd/3/bin/python"
    assert reach.alias("/root/pyx/lib") == "/root/pyx/lib"  # a sibling that shares a prefix of letters only
    assert reach.alias("/usr/lib/python3") == "/usr/lib/python3"


def test_nothing_is_rerouted_where_nothing_was_opened(opened: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    path = ["/somewhere/lib"]
    monkeypatch.setattr("sys.path", path)
    reach.reroute_imports()
    assert path == ["/somewhere/lib"]
