"""The judge's own code, in process: each test kills mutants of it that the other fast tests let through.

``make mutation-grader`` (mutation/README.md) mutates the judge: the checks that decide a row
(checks.judge: behaviours, cases, expect, effects, diagnose, gpu_reference; the engine's amp_reference)
and the engine and diagnosis code around them (results.json, the call plan, replies, the diagnosis table and report).
Each test here failed with a mutant that the rest of its fast selection let pass: a check that fails
an honest scaler, a failure that names the wrong line, a snippet that does not run, a plan reused
after it disagreed.  The honest student is ``torch.amp.GradScaler('cpu')`` itself (the grader's own
reference), so any failure on it is the judge's; a dishonest one is torch's answers with one
observation changed.  Expected values are written by hand."""

from __future__ import annotations

import ast
import contextlib
import json
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import pytest
from hypothesis import given, settings

from autograder import ROOT
from autograder.diagnosis import match, report, table
from autograder.engine import judge, plan, plan_cache, results, rubric
from checks.judge import behaviours, diagnose, effects, expect, gpu_reference, cases, replies
from checks.runners.harness import SubmissionFault
from checks.words import MISTAKES

Json = Any
Results = list[Json]


class Student:
    """What the checks call as ``student``: torch's answers to each run, passed through ``change``."""

    def __init__(self, change: Callable[[dict[str, Json], Results], Results] = lambda args, results: results) -> None:
        self.change = change

    def run(self, scenario: str, args: dict[str, Json]) -> Results:
        assert scenario == "scaler_ops"
        return self.change(args, cases.torch_results(args))


def failure(check: Callable[..., None], *args: Any) -> str:
    """The message a check fails with (it must fail with an AssertionError: the judge's failure, not a crash)."""
    with pytest.raises(AssertionError) as raised:
        check(*args)
    return str(raised.value)


def observed_scale_times(factor: float, when: Callable[[dict[str, Json]], bool]) -> Callable[..., Results]:
    """A scaler whose last ``observe`` reports the scale times ``factor`` in the runs ``when`` picks."""
    def change(args: dict[str, Json], results: Results) -> Results:
        if when(args):
            results[-1]["ok"]["scale"] *= factor
        return results
    return change


def test_a_failing_scale_of_one_tensor_is_told_as_that_not_as_the_containers() -> None:
    """scale() of a list compares with each item scaled alone first: where one of those single calls raises, the
    message describes scale() of one tensor, not what scale() of the list must return."""
    def single_raises(args: dict[str, Json], results: Results) -> Results:
        results[1] = {"error": {"type": "RuntimeError", "message": "no", "trace": ""}}
        return results

    message = failure(behaviours.lists_and_tuples, Student(single_raises), [2.0, 60000.0], "list")
    assert message.startswith("scale() of one tensor must run: each item of the list is scaled alone first, to "
                              "compare with what scale() of the list returns.\n"), message
    assert "scale() of a list must return" not in message
    def container_raises(args: dict[str, Json], results: Results) -> Results:
        results[-1] = {"error": {"type": "RuntimeError", "message": "no", "trace": ""}}
        return results

    message = failure(behaviours.lists_and_tuples, Student(container_raises), [2.0, 60000.0], "list")
    assert message.startswith("scale() of a list must return a list holding what scale() returns for each item.")


def test_one_backoff_per_update_names_the_last_observation() -> None:
    several_optimizers = observed_scale_times(0.5, lambda args: sum(op["op"] == "step" for op in args["ops"]) > 1)
    message = failure(behaviours.one_backoff_per_update, Student(several_optimizers), 2, 2, math.inf)
    assert "the last line should: print 512.0 0 (what it prints with one overflowing gradient" in message
    assert message.rstrip().endswith("but with your code it prints 256.0 0")


@pytest.mark.parametrize("grads", [[[1.0, math.inf]], [[math.nan, 2.0]], [[1.0, 2.0], [3.0]]])
def test_overflow_detection_passes_an_honest_scaler(grads: list[list[float]]) -> None:
    behaviours.overflow_detection(Student(), 1024.0, grads)


def test_overflow_detection_shows_the_update_that_did_not_back_off() -> None:
    ignores_nan = observed_scale_times(2.0, lambda args: True)  # torch backed off to 512; this one stays at 1024
    message = failure(behaviours.overflow_detection, Student(ignores_nan), 1024.0, [[math.nan, 2.0]])
    assert "the last line should: print 512.0 0 (the gradients hold inf/NaN)" in message
    assert "scaler.update()" in message
    assert message.rstrip().endswith("but with your code it prints 1024.0 0")


def test_state_dict_with_a_key_too_many_is_named_as_such() -> None:
    def extra_key(args: dict[str, Json], results: Results) -> Results:
        for op, result in zip(args["ops"], results):
            if op["op"] == "state_dict":
                result["ok"]["zzz"] = 1
        return results

    message = failure(behaviours.state_round_trip, Student(extra_key), {}, [False, True])
    assert ("the last line should: print a dict with the keys ['_growth_tracker', 'backoff_factor', "
            "'growth_factor', 'growth_interval', 'scale']") in message


def test_numbers_in_snippets_are_python_that_runs() -> None:
    assert expect.number(math.inf) == 'float("inf")'
    assert expect.number(-math.inf) == '-float("inf")'
    assert expect.number(1.5) == "1.5"
    assert expect.number([2.0, -math.inf]) == '[2.0, -float("inf")]'


def test_each_printed_op_prints_its_own_observation() -> None:
    assert expect.printing_lines({"op": "observe"}) == [
        "print(float(scaler.get_scale()), int(scaler.get_growth_tracker()))"]
    assert expect.printing_lines({"op": "clip", "opt": 0, "max_norm": 0.5}) == [
        "print(float(torch.nn.utils.clip_grad_norm_(params(opt0), 0.5)))"]
    assert expect.printing_lines({"op": "grads", "opt": 0, "values": [[1.0]]}) == [
        "set_grads(opt0, [torch.tensor([1.0], dtype=torch.float32)])"]


def test_a_tensor_scale_is_shown_as_one_tensor() -> None:
    op = {"op": "scale", "values": [1.0], "dtype": "float16"}
    result = {"ok": {"container": "tensor", "items": [{"dtype": "float16", "values": [4096.0]}]}}
    assert expect.shown(op, result) == "prints torch.float16 4096.0"


def test_long_logs_are_cut_with_a_count_of_the_rest() -> None:
    assert effects.all_lines([f"line {i}" for i in range(10)], limit=8).splitlines()[-1] == "    ... and 2 more"
    assert "more" not in effects.all_lines(["a", "b"], limit=8)


def test_row_2_7_explains_a_missing_unscale_not_the_updates() -> None:
    log = {"log": [{"event": "call"}, {"event": "backward"}, {"event": "scaler.step", "via_scaler": True},
                   {"event": "update"}]}
    assert effects.explain(effects.CLIPPING, log, {"max_grad_norm": 1.0}) == \
        "amp_step never called scaler.unscale_(optimizer)."
    assert effects.explain(effects.UPDATE, log, {}) == "Call 1 called scaler.update() 1 time(s)."


def test_row_2_1_explains_in_a_sentence_before_the_hint() -> None:
    """The explanation is a sentence of its own: the hint after it ("Run the model's forward ...") starts anew."""
    log = {"log": [{"event": "call"}, {"event": "forward", "autocast": False}, {"event": "loss", "autocast": True,
                                                                                  "dtype": "bfloat16"}]}
    assert effects.explain(effects.FORWARD, log, {"dtype": "float16"}) == \
        "The model's forward ran without autocast; the model's loss ran under autocast bfloat16."
    right = {"log": [{"event": "call"}, {"event": "forward", "autocast": True, "dtype": "float16"}]}
    assert effects.explain(effects.FORWARD, right, {"dtype": "float16"}) == ""


def test_a_submission_fault_is_answered_with_its_own_words() -> None:
    def faulty(scenario: str, args: dict[str, Json]) -> Json:
        raise SubmissionFault("the scaler's process stopped")

    assert json.loads(diagnose.answer(faulty, "scaler_ops", {})) == {"fault": "the scaler's process stopped"}


def test_a_local_failure_is_explained_from_its_own_rows_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AMP_LANGUAGE", "en")
    monkeypatch.setitem(MISTAKES["en"], "halves", "the scale is halved")  # read when the line is worded, not stored
    test, calls = "test_update_backs_off_after_inf_or_nan", [["scaler_ops", {"ops": []}, 20]]

    def buggy(scenario: str, args: dict[str, Json]) -> Json:
        return {"scale": 0.5}

    bug = diagnose.digest(calls, [diagnose.answer(buggy, "scaler_ops", {"ops": []})])
    table = diagnose.Table({"case[0]": diagnose.CaseDigests(test, "reference", {"halves": bug}, calls)},
                           {"halves": [test]}, public_only=True)
    (tmp_path / "diagnosis.json").write_text(table.to_json())
    assert diagnose.explain_local_failure(test, buggy, tmp_path / "diagnosis.json") == \
        "Likely mistake: this is what happens when the scale is halved."


def test_a_rows_digests_come_from_its_own_answered_cases_only() -> None:
    cases = [SimpleNamespace(test=test, name=name, calls=[])
             for test, name in (("test_a", "a[0]"), ("test_b", "b[0]"), ("test_b", "b[1]"), ("test_c", "c[0]"))]
    answers = {"a[0]": ["1"], "b[0]": ["2"], "c[0]": ["3"]}  # b[1] was never answered
    assert set(match.row_digests(cases, answers, "test_b")) == {"b[0]"}


def test_a_flaky_failure_says_so_and_keeps_the_checks_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AMP_LANGUAGE", "en")
    message, trace = judge._student_message(BaseExceptionGroup("flaky", [AssertionError("the scale is 2.0")]))
    assert message.startswith("Your code gave different results for the same calls on different runs")
    assert message.endswith("\nthe scale is 2.0") and trace == ""


@pytest.mark.parametrize("setting,used", [("", True), ("on", True), ("1", True), ("off", False), ("OFF", False)])
def test_only_off_switches_the_shipped_plan_off(setting: str, used: bool, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plan.json").write_text("{}")
    monkeypatch.setattr(plan, "SHIPPED", tmp_path / "plan.json")
    monkeypatch.setattr(plan, "_parsed", lambda text, origin: origin)
    monkeypatch.setenv("AMP_PLAN", setting)
    assert plan.shipped_plan() == ("shipped" if used else None)


def test_closing_the_reference_process_ends_it() -> None:
    reference = gpu_reference.ReferenceProcess(timeout=60)
    process = reference._process = reference._start()
    try:
        reference.close()
        assert process.poll() is not None and reference._process is None
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_a_reference_error_reaches_the_judge_as_its_last_8000_characters() -> None:
    request = json.dumps({"kind": "k" * 9000, "args": {}}) + "\n"
    done = subprocess.run([sys.executable, "-m", "checks.judge.gpu_reference"], input=request, capture_output=True,
                          text=True, cwd=ROOT / "assignment", timeout=60)
    error = json.loads(done.stdout)["error"]
    assert len(error) == 8000 and error.rstrip().endswith("k" * 100 + "'")


def test_the_update_rule_written_out() -> None:
    kwargs = {"growth_interval": 3, "growth_factor": 2.0, "backoff_factor": 0.25}
    assert cases.model_update(1024.0, 0, False, kwargs) == (1024.0, 1)
    assert cases.model_update(1024.0, 2, False, kwargs) == (2048.0, 0)
    assert cases.model_update(1024.0, 2, True, kwargs) == (256.0, 0)
    assert cases.model_update(3.0e38, 2, False, kwargs) == (3.0e38, 0)  # no growth to inf


KWARGS = {"init_scale": 1024.0, "growth_factor": 2.0, "backoff_factor": 0.5, "growth_interval": 2}
#: Every check of the scaler, with inputs that reach its growth, backoff, skipping and error paths.
CHECKS: dict[str, Callable[[Student], None]] = {
    "backoff": lambda s: behaviours.backoff(s, KWARGS, [[0], [], [1], [0, 1]], 2),
    "growth": lambda s: behaviours.growth(s, KWARGS, [[], [], [], [0], [], []], 2),
    "one_backoff_per_update": lambda s: behaviours.one_backoff_per_update(s, 3, 2, math.nan),
    "matches_torch": lambda s: behaviours.matches_torch(s, cases.run_args(KWARGS, [False, True, False, False]), True),
    "skipped_step": lambda s: [behaviours.skipped_step(s, [2, 1], -math.inf, path) for path in ("step", "unscale_", "clip")],
    "overflow_detection": lambda s: behaviours.overflow_detection(s, 65536.0, [[1.0, 3.0e38], [2.0]]),
    "misuse": lambda s: behaviours.misuse(s, ["unscale_", "unscale_"]),
    "float16_rejected": lambda s: behaviours.float16_rejected(s, [1.0, 2.0]),
    "lists_and_tuples": lambda s: [behaviours.lists_and_tuples(s, [1.0, 2.5], c) for c in ("list", "tuple")],
    "state_round_trip": lambda s: behaviours.state_round_trip(s, KWARGS, [False, False, True]),
    "defaults": lambda s: behaviours.defaults(s),
}


@pytest.mark.parametrize("check", list(CHECKS))
def test_every_check_passes_torch_itself(check: str) -> None:
    CHECKS[check](Student())


@pytest.mark.parametrize("check", ["backoff", "growth", "matches_torch", "defaults"])
def test_a_scale_off_by_a_factor_of_two_fails_the_checks_that_observe_it(check: str) -> None:
    def last_scale_doubled(args: dict[str, Json], results: Results) -> Results:
        last = max(i for i, op in enumerate(args["ops"]) if op["op"] == "observe")
        results[last]["ok"]["scale"] *= 2.0
        return results

    failure(CHECKS[check], Student(last_scale_doubled))


@settings(max_examples=300, derandomize=True, database=None)
@given(kwargs=cases.scaler_kwargs(powers_of_two=False))
def test_the_hidden_suites_constructor_arguments_are_valid(kwargs: dict[str, Json]) -> None:
    assert kwargs["init_scale"] > 0 and kwargs["growth_factor"] > 1.0 and 0.0 < kwargs["backoff_factor"] < 1.0
    assert isinstance(kwargs["growth_interval"], int) and kwargs["growth_interval"] >= 1


def test_a_row_passes_at_full_marks_unless_it_failed() -> None:
    failed = "".join(["fail", "ed"])  # as read from results.json: not the interned literal
    assert rubric.row_passed({"score": 3.0, "max_score": 3.0, "status": "passed"})
    assert not rubric.row_passed({"score": 2.0, "max_score": 3.0, "status": "passed"})
    assert not rubric.row_passed({"score": 3.0, "max_score": 3.0, "status": failed})
    assert not rubric.row_passed(None)


@pytest.mark.parametrize("passing_ranks,discrimination", [({1, 2, 3, 7}, 1.0), ({1, 2, 3, 9}, 2 / 3)])
def test_discrimination_compares_the_top_and_bottom_27_percent(passing_ranks: set[int], discrimination: float) -> None:
    # ten submissions ranked by score: the upper and the lower group are three each (27 % of 10, rounded)
    graded = [report.Graded(f"s{rank:02}", 11.0 - rank, {"1.1": {"name": "1.1 t", "max_score": 3.0,
                                                                  "score": 3.0 if rank in passing_ranks else 0.0}})
              for rank in range(1, 11)]
    (stats,) = report.item_stats(["1.1 t"], graded)
    assert stats.pass_rate == 0.4 and stats.discrimination == pytest.approx(discrimination)


def test_the_students_table_covers_the_public_checks_only() -> None:
    """Every row with a public example (a hidden row's too: its public check fails locally like the grader's row)."""
    covered = table.public_tests()
    defined = set()
    for module in (ROOT / "assignment" / "checks").glob("test_public_*.py"):
        defined |= {node.name for node in ast.walk(ast.parse(module.read_text(encoding="utf-8")))
                    if isinstance(node, ast.FunctionDef)}
    assert covered == defined & {item.test for item in rubric.ITEMS if item.task != "gpu"}
    assert {"test_unscale_bit_exact", "test_amp_step_unscales_before_clipping",
            "test_constructor_rejects_bad_arguments", "test_underflow_training_converges"} <= covered
    assert not {"test_hidden_whatever", "test_gpu_amp_reaches_fp32_loss_sooner"} & covered  # GPU rows: no table


def test_grading_reads_the_table_it_is_given_and_survives_a_missing_one(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    given = diagnose.Table({}, {"halves": ["test_update_backs_off_after_inf_or_nan"]}, twins=[["halves", "other"]])
    (tmp_path / "given.json").write_text(given.to_json())
    monkeypatch.setenv("AMP_DIAGNOSIS", str(tmp_path / "given.json"))
    assert table.current_table() == given
    monkeypatch.setenv("AMP_DIAGNOSIS", str(tmp_path / "missing.json"))
    assert table.current_table() is None
    monkeypatch.setenv("AMP_DIAGNOSIS", "off")
    assert table.current_table() is None


def test_a_built_table_is_returned_to_the_packaging(monkeypatch: pytest.MonkeyPatch) -> None:
    def build(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        Path(command[command.index("--out") + 1]).write_text('{"built": true}')
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.delenv("AMP_DIAGNOSIS", raising=False)
    monkeypatch.setattr(subprocess, "run", build)
    assert table.recorded_table() == '{"built": true}'


def test_writing_the_plan_for_the_zip_exits_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from autograder.engine import grader

    monkeypatch.setattr(grader, "start", lambda: None)  # the packaging reads the exit status
    monkeypatch.setattr(plan, "record", lambda: SimpleNamespace(cases=[], to_json=lambda: '{"cases": []}'))
    from autograder import cli

    assert cli.main(["record-plan", "--write", str(tmp_path / "plan.json")]) == 0
    assert (tmp_path / "plan.json").read_text() == '{"cases": []}'


def test_a_row_shows_what_the_code_printed_during_its_test(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AMP_LANGUAGE", "en")
    row = SimpleNamespace(message="The scale should be 2.0.", output="debug: 4.0\n")
    assert results._row_output(row) == ("The scale should be 2.0.\n\nOutput printed by your code during this test:\n"
                                        "debug: 4.0\n")


def test_notes_about_a_submission_open_its_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AMP_LANGUAGE", "en")
    monkeypatch.setenv("AMP_DIAGNOSIS", "off")
    report = SimpleNamespace(rows=[], notes=["answers.py is missing", "extra.py was ignored"], output="", score=0.0,
                             seconds=1.0, scenarios=0, plan=None, answers=None)
    assert results.gradescope_results(report)["output"] == \
        "About your submission:\n- answers.py is missing\n- extra.py was ignored"


def test_a_cached_plan_that_disagrees_with_the_reference_is_recorded_again(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "loss_scaler.py").write_text("")
    monkeypatch.delenv("AMP_PLAN", raising=False)
    monkeypatch.setattr(plan, "shipped_plan", lambda: None)
    monkeypatch.setattr(plan_cache, "read", lambda key: "the cached plan")  # still there after the wait
    monkeypatch.setattr(plan_cache, "recording", lambda key: contextlib.nullcontext())
    monkeypatch.setattr(plan_cache, "write", lambda key, text: None)
    monkeypatch.setattr(plan, "_parsed", lambda text, origin: None if text is None else "the cached plan")
    monkeypatch.setattr(plan, "_agrees", lambda found, solution, runner_factory: False)
    monkeypatch.setattr(plan, "record", lambda solution, runner_factory=None: SimpleNamespace(to_json=lambda: "new"))
    assert plan.current_plan(solution=tmp_path, check=True, key="k").to_json() == "new"


def test_a_returned_value_record_with_a_key_too_many_is_refused() -> None:
    honest = {"type": "Tensor", "dtype": "float32", "requires_grad": False, "numel": 1, "value": 0.5}
    assert replies._returned(honest) is None
    assert replies._returned({**honest, "grad_fn": "MulBackward0"}) == "a returned-value record of the wrong shape"
