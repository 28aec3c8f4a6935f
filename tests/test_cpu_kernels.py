"""One arithmetic for every grading, whatever the CPU or the environment: the portable one (checks/arithmetic.py).

torch chooses its CPU kernels once per process (``ATEN_CPU_CAPABILITY``, else the best the processor has), and MKL
its code path likewise.  Left to choose, the judge and the student processes could compute with different sets, and
the recorded answers (diagnosis tables, Task-2 effects) would hold only on the CPU that recorded them: grades and
"Likely mistake" lines would depend on a variable nobody looks at.  The grader pins the portable paths in every
process, whatever ``ATEN_CPU_CAPABILITY`` the caller set.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT


def _capability_in_student_process(tmp_path: Path, capability: str) -> str:
    code = """
        import json, os, sys
        from pathlib import Path
        from autograder.engine import grader
        grader.start()
        from autograder.sandbox.runner import SandboxRunner
        runner = SandboxRunner(Path(sys.argv[1]))
        try:
            runner.begin_test("probe", public=True)
            runner.run("scaler_ops", {"world": {"optimizers": [{"groups": [[2]]}]}, "ops": [{"op": "new"}]})
        except Exception:
            pass
        finally:
            runner.close()
        print(json.dumps(runner.output_by_test()))
    """
    folder = tmp_path / "sub"
    folder.mkdir()
    for name in ("loss_scaler.py", "amp_step.py", "answers.py"):
        (folder / name).write_text((ROOT / "solutions" / name).read_text())
    with (folder / "loss_scaler.py").open("a") as stream:
        stream.write("\nimport os, torch as _t\nprint('KERNELS', _t.backends.cpu.get_cpu_capability(), "
                     "os.environ.get('MKL_CBWR'))\n")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": capability}
    done = subprocess.run([sys.executable, "-c", "\n".join(line[8:] for line in code.splitlines()), str(folder)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = "".join(json.loads(done.stdout.strip().splitlines()[-1]).values())
    return " ".join(next(line.split()[1:] for line in printed.splitlines() if line.startswith("KERNELS")))


@pytest.mark.parametrize("capability", ["", "default", "avx2", "avx512"])
def test_student_processes_compute_with_the_portable_kernels_whatever_the_caller_asked(tmp_path: Path,
                                                                                        capability: str) -> None:
    assert _capability_in_student_process(tmp_path, capability) == "DEFAULT COMPATIBLE"


def test_a_judge_that_computed_before_the_pin_is_refused() -> None:
    """The pin comes too late once torch has computed: the grader says so rather than grade on other kernels."""
    code = ("import os, torch; os.environ.pop('ATEN_CPU_CAPABILITY', None); torch.ones(2).sum()\n"
            "from autograder.sandbox import zygote\n"
            "try:\n    zygote.start_zygote()\nexcept RuntimeError as exc:\n    print('REFUSED', exc)\n")
    env = {key: value for key, value in os.environ.items() if key != "ATEN_CPU_CAPABILITY"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "REFUSED torch computed before the grader pinned its CPU kernels" in done.stdout, done.stdout + done.stderr
