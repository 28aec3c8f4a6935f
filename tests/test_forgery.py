"""The attack corpus (tests/attacks.py) graded end to end: no attack earns more than its honest baseline.

Every attack is graded by ``python -m autograder grade`` twice: at the isolation level this
machine gives root (``namespaces``) and at the one Gradescope's containers give (root without
``CAP_SYS_ADMIN``: ``landlock+seccomp``), so that these tests show which layer stops what
(docs/security.md's table of layers comes from these runs).  Nothing in the student process is
restricted by a rule of Python: what an attack reaches for is either not there (torch's scaler and
its kernels, the grader's files, another program) or decides nothing (the harness's records, the
probe's log), because the judge recomputes every effect it grades.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from attacks import (ANSWERS, ATTACKS, BASELINES, PRINTERS, SKELETON, SKELETON_WITH_ANSWERS, TELLERS, appended,
                     is_hidden_input)
from conftest import ROOT, load_results, skip_unless_ci
from test_isolation import DOCKER_CAPS

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux sandbox")]

#: name -> (command prefix, the isolation level the batch must report)
DOCKER = ["setpriv", "--bounding-set", DOCKER_CAPS]
LAYERS = {
    "namespaces": ([], "namespaces"),
    "landlock+seccomp": (DOCKER, "landlock+seccomp"),
}


def _write(root: Path, cases: dict[str, dict[str, str]]) -> list[Path]:
    folders = []
    for name, files in cases.items():
        folder = root / name
        folder.mkdir(parents=True)
        for filename, text in files.items():
            (folder / filename).write_text(text)
        folders.append(folder)
    return folders


def _rows(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {test["number"]: test for test in results["tests"] if test.get("max_score")}


def _grade_all(root: Path, cases: dict[str, dict[str, str]], layers: str = "namespaces") -> dict[str, dict[str, Any]]:
    prefix, level = LAYERS[layers]
    if os.geteuid() != 0 or (prefix and shutil.which("setpriv") is None):
        skip_unless_ci("needs root and setpriv (util-linux): the isolation levels root reaches")
    out = root / "out"
    command = [*prefix, sys.executable, "-m", "autograder", "grade", *map(str, _write(root / "in", cases)),
               "--out", str(out), "--jobs", "2"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    graded = {name: load_results(out, name) for name in cases}
    assert {results["extra_data"]["isolation"] for results in graded.values()} == {level}
    return graded


@pytest.fixture(scope="module", params=list(LAYERS))
def graded(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    cases = {**{name: files for name, (files, _) in ATTACKS.items()}, **BASELINES}
    return _grade_all(tmp_path_factory.mktemp("forgery"), cases, request.param)


@pytest.mark.parametrize("name", list(ATTACKS))
def test_attack_earns_no_more_than_its_honest_baseline(graded: dict[str, dict[str, Any]], name: str) -> None:
    baseline = ATTACKS[name][1]
    honest = SKELETON_WITH_ANSWERS if baseline == "skeleton" else graded[baseline]["score"]
    assert graded[name]["score"] <= honest, {n: r["score"] for n, r in _rows(graded[name]).items() if r["score"]}


def test_the_bug_baseline_really_loses_its_row(graded: dict[str, dict[str, Any]]) -> None:
    """The hidden-bug attack's baseline loses row 2.4, and so does the attack (else the comparison proves nothing)."""
    assert _rows(graded["bug_no_zero_grad"])["2.4"]["score"] == 0 < graded["bug_no_zero_grad"]["score"]
    assert _rows(graded["bug_no_zero_grad_hidden"])["2.4"]["score"] == 0


@pytest.mark.parametrize("name, words", [
    ("wraps_gradscaler", "torch.amp.GradScaler is not available while loss_scaler.py runs"),
    ("aten_kernels", "torch._amp_foreach_non_finite_check_and_unscale_ is not available while loss_scaler.py runs"),
])
def test_delegation_fails_with_a_message_that_says_why(graded: dict[str, dict[str, Any]], name: str,
                                                       words: str) -> None:
    """What stands in for torch's scaler says what Task 1 asks, in the rows it costs."""
    outputs = " ".join(row["output"] for number, row in _rows(graded[name]).items() if number.startswith("1."))
    assert words in outputs, outputs[:1500]


@pytest.fixture(scope="module", params=["namespaces"])
def graded_printers(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tellers = {name: files for name, (files, _) in TELLERS.items()}
    return _grade_all(tmp_path_factory.mktemp("printers"), {**PRINTERS, **tellers}, request.param)


def shown_at_once(results: dict[str, Any]) -> list[str]:
    """Every text students see before the due date: on Gradescope the visible rows (a hidden row's public-example
    companion among them) and the output; on PrairieLearn every message (hidden rows withheld but their public
    examples') and the output."""
    from autograder.engine.results import with_public_parts
    from autograder.platforms.prairielearn import prairielearn_results

    gradescope = with_public_parts(results)
    prairielearn = prairielearn_results(results)
    return ([test["output"] for test in gradescope["tests"] if test["visibility"] == "visible"] + [results["output"]]
            + [test["message"] for test in prairielearn["tests"]] + [prairielearn["output"], prairielearn["message"]])


@pytest.mark.parametrize("name, marker", [("printing_solution", "FORGERY-SEES"), ("late_printing_solution", "LATE-SEES")])
def test_hidden_inputs_never_reach_what_students_see_at_once(graded_printers: dict[str, Any], name: str,
                                                             marker: str) -> None:
    """What a process that served hidden tests prints (at once, or late from a thread while another process
    crashes) is shown only in hidden rows, never in a visible row or in the output shown before the due date.
    Each line carries its process's token and the scaler's arguments: no process that printed a hidden input may
    have its token where students look at once.  (A hidden row shows public processes' tokens too: its public
    example's output is filed under the row.)"""
    results = graded_printers[name]
    # lines the code printed (its source may be quoted too): token, init_scale, growth_factor, backoff_factor
    printed = re.compile(rf"^\s*{marker} (\S+) (\S+) (\S+) (\S+)", re.M)

    def tokens(texts: list[str], hidden_inputs_only: bool = False) -> set[str]:
        return {token for text in texts for token, *values in printed.findall(text)
                if not hidden_inputs_only or is_hidden_input(*map(float, values))}

    rows = list(_rows(results).values())
    hidden = tokens([row["output"] for row in rows if row["visibility"] != "visible"], hidden_inputs_only=True)
    visible = tokens(shown_at_once(results))
    assert hidden and visible, (hidden, visible)
    assert not hidden & visible


@pytest.mark.parametrize("name", list(TELLERS))
def test_hidden_inputs_never_reach_what_students_see_at_once_through_failure_texts(
        graded_printers: dict[str, Any], name: str) -> None:
    """What a process writes after it saw a hidden input (here: an exception's message naming the hidden inputs it
    saw, or a "method not implemented" spelt from one) is shown only in hidden rows: never in a visible row, in a
    hidden row's public-example companion (those examples run in processes that serve nothing hidden, their calls
    made after the call plan's batches included), or in a note of the output (built from public tests' texts)."""
    results, marker = graded_printers[name], TELLERS[name][1]
    told = [row["number"] for row in _rows(results).values() if row["visibility"] != "visible" and marker in row["output"]]
    assert told, "the attack told its hidden inputs somewhere (else this proves nothing)"
    leaked = [text[:600] for text in shown_at_once(results) if marker in text]
    assert not leaked, leaked


def test_answers_file_is_read_not_run(tmp_path: Path) -> None:
    """answers.py is parsed, never executed: code around the answers (here a harness patch) never runs."""
    from attacks import HARNESS_PATCHED

    results = _grade_all(tmp_path, {"answers_code": {**SKELETON, "answers.py": appended(
        ANSWERS, HARNESS_PATCHED + "\nopen('/tmp/answers-ran', 'w').write('x')\n")}})["answers_code"]
    assert results["score"] == SKELETON_WITH_ANSWERS
    assert not Path("/tmp/answers-ran").exists()


#: Answers the GPU scenarios itself from amp_step.py's module level, found through ``gc``: well-formed, instant
#: replies for the runs the grader times and measures itself (run_train: the untrained model's weights;
#: run_gpu_underflow: a made-up weight).
GPU_FORGERY = '''
import gc

gc.unfreeze()  # the zygote froze its heap out of the collector's sight, not out of a student's
for _obj in gc.get_objects():
    if type(_obj).__name__ == "module" and getattr(_obj, "__name__", "") == "checks.runners.gpu_runs":
        def _instant_train(args, amp_step, root=None, _g=_obj):
            cfg = _g.speed_config(args.get("device", "cuda"), **{k: v for k, v in args.items() if k != "device"})
            return {"ok": None, "weights": _g._copy_out_weights(list(_g.build_model(cfg).parameters()))}

        _obj.run_train = _instant_train
        _obj.run_gpu_underflow = lambda args, amp_step, root=None: {"ok": None, "final_weight": [1e-4] * 16,
                                                                     "device_info": {"name": "forged"}}
'''


def test_gpu_part_cannot_be_forged_in_dry_mode(tmp_path: Path) -> None:
    """Nothing refuses the forgery (student code may patch its own process): it earns nothing because no GPU row
    reads what the student process computes -- the grader times the round trips and computes the losses from the
    weights copied out.  Graded beside its honest twin (the skeleton amp_step), it earns 0 wherever the twin does."""
    _write(tmp_path, {"gpu_forgery": {**SKELETON, "answers.py": ANSWERS,
                                       "amp_step.py": appended(SKELETON["amp_step.py"], GPU_FORGERY)},
                      "gpu_honest": {**SKELETON, "answers.py": ANSWERS}})
    done = subprocess.run([sys.executable, "-m", "autograder", "grade-gpu", str(tmp_path / "gpu_forgery"),
                           str(tmp_path / "gpu_honest"), "--out", str(tmp_path / "out"), "--dry"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    rows = {name: {test["number"]: test for test in json.loads(
        (tmp_path / "out" / name / "gpu_results.json").read_text())["tests"]} for name in ("gpu_forgery", "gpu_honest")}
    honest, forged = rows["gpu_honest"], rows["gpu_forgery"]
    assert all(test["score"] == 0 for test in honest.values())  # the skeleton earns nothing on the GPU part
    for number, test in forged.items():
        assert test["score"] <= honest[number]["score"] == 0, (number, test["output"][:600])
    for number in ("4.1", "4.2"):  # the forged replies were the ones judged (the skeleton would have raised)
        assert "NotImplementedError" not in forged[number]["output"], forged[number]["output"][:600]
        assert "computed by the grader" in forged[number]["output"] or "grader computed" in forged[number]["output"]


def test_gpu_judge_keeps_its_secrets_and_its_verdicts(tmp_path: Path) -> None:
    """The GPU attacks of tests/attacks.py beside their honest twin (the skeleton amp_step with the solution's
    scaler: 4.3's points only), in one ``grade-gpu --dry`` run: fitting the weights to an evaluation batch rebuilt
    from the run's seed, writing the answer into the weights, and claiming a device failure (a "CUDA error" from a
    file outside the submission, the grader's "internal problem" words) each earn no more than the twin, row by row,
    and every one is graded: the judge's batch is drawn from its own randomness, 4.1 and 4.2 check the steps, and
    whose fault a failure is comes from the judge's own canary."""
    from attacks import GPU_ATTACKS, GPU_TWIN

    _write(tmp_path, {**GPU_ATTACKS, "gpu_twin": GPU_TWIN})
    names = [*GPU_ATTACKS, "gpu_twin"]
    done = subprocess.run([sys.executable, "-m", "autograder", "grade-gpu", *(str(tmp_path / n) for n in names),
                           "--out", str(tmp_path / "out"), "--dry"], cwd=ROOT, capture_output=True, text=True,
                          timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    results = {name: json.loads((tmp_path / "out" / name / "gpu_results.json").read_text()) for name in names}
    assert {name: data["status"] for name, data in results.items()} == {name: "graded" for name in names}, done.stdout
    twin = {test["number"]: test["score"] for test in results["gpu_twin"]["tests"]}
    assert twin == {"4.1": 0.0, "4.2": 0.0, "4.3": 2.0}
    for name in GPU_ATTACKS:
        got = {test["number"]: test["score"] for test in results[name]["tests"]}
        assert all(got[number] <= twin[number] for number in twin), (name, got, done.stdout[-1500:])
