"""Points, numbers, titles (in every language), names and visibility of every graded test: the one place they live.

Each :class:`Item` names one pytest test function (public tests live in
``assignment/checks``, hidden ones in ``autograder/hidden``).  A parametrized test
is one item: its cases share the points, and a case failing costs its share.
``python -m autograder rubric`` prints the table; a test in ``tests/`` checks that
every collected test has exactly one item and that the points add up.
"""

from __future__ import annotations

from dataclasses import dataclass

from autograder import settings

PUBLIC, HIDDEN = "public", "hidden"
#: results.json's extra_data key: rubric number -> [passed, all] cases of the row, what its score is a share of
#: (a batch rescores new points from it without running the code again: autograder.batch.rescore)
CASES = "cases"
#: Gradescope visibility of hidden tests; public ones are always "visible".
HIDDEN_VISIBILITY = settings.hidden_visibility()  # at import: the zygote forks student processes from here
#: The ToyLossScaler calls of one training step, in order (Item.reaches names one).
STAGES = ("__init__", "scale", "unscale_", "step", "update")


@dataclass(frozen=True)
class Item:
    number: str
    test: str
    title: str  # in English, the reference language
    points: float
    task: str  # "scaler", "amp_step", "quick_check" or "gpu"
    suite: str = HIDDEN
    #: Task 1: the furthest of a training step's calls (STAGES) the row's scenarios make on the student's scaler;
    #: a scaler that crashes in step() still earns the rows that stop before it (tests/hostile derives its bounds)
    reaches: str = ""
    ko: str = ""  # the title in Korean (every row has one: tests/test_handout_feedback_language.py)
    #: PUBLIC on a hidden row whose hidden test would be a verbatim copy of its public example: the hidden suite
    #: then has no test of that name and the row is graded on the public example alone, a hidden row still (its
    #: results shown when hidden rows are).  Declared, never inferred: a hidden row without it needs a hidden test
    #: (:func:`suite_problem`), so a misspelt name is an error, not a row quietly graded on public inputs.
    inputs: str = ""

    def __post_init__(self) -> None:
        if self.inputs not in ("", PUBLIC) or (self.inputs and self.suite != HIDDEN):
            raise ValueError(f"row {self.number}: inputs={self.inputs!r} (only a hidden row may say inputs='public')")

    @property
    def visibility(self) -> str:
        return "visible" if self.suite == PUBLIC else HIDDEN_VISIBILITY

    @property
    def titles(self) -> dict[str, str]:
        """The row's title by language code (engine.strings.title picks one)."""
        return {"en": self.title, "ko": self.ko}

    @property
    def test_suite(self) -> str:
        """The suite that must define the row's test: a public row's, public; a hidden row's, hidden (its public
        example beside it, which the handout promises every row), or public alone with ``inputs=PUBLIC``."""
        return PUBLIC if self.suite == PUBLIC or self.inputs == PUBLIC else HIDDEN

    @property
    def runs_student_scaler(self) -> bool:
        """Whether the row's test runs the student's ToyLossScaler: Task 1's do; Task 2's run amp_step with
        torch's GradScaler (and a contract scaler of the harness's), the Quick Check runs no scaler.  What a
        submission whose scaler cannot run at all can still earn is the other rows (tests/hostile derives it)."""
        return self.task == "scaler"


ITEMS: tuple[Item, ...] = (
    # Task 1: ToyLossScaler
    Item("1.1", "test_constructor_rejects_bad_arguments", "Constructor rejects bad arguments", 3, "scaler", PUBLIC,
         reaches="__init__", ko="생성자가 잘못된 인자를 거부함"),
    Item("1.2", "test_scale_returns_float32_without_overflow", "scale(): float32, no overflow", 3, "scaler", PUBLIC,
         reaches="scale", ko="scale(): float32, 오버플로 없음"),
    Item("1.3", "test_unscale_divides_grads_in_place", "unscale_(): in place, None grads skipped, once", 3, "scaler", PUBLIC,
         reaches="step", ko="unscale_(): 제자리 연산, None 기울기 건너뜀, 한 번만"),
    Item("1.4", "test_step_is_skipped_on_inf_or_nan", "step(): skips on inf, else returns step()'s result", 3, "scaler", PUBLIC,
         reaches="step", ko="step(): inf면 건너뛰고, 아니면 step()의 결과를 돌려줌"),
    Item("1.5", "test_update_backs_off_after_inf_or_nan", "update(): backoff after inf/NaN", 4, "scaler", PUBLIC,
         reaches="update", ko="update(): inf/NaN 뒤의 백오프"),
    Item("1.6", "test_update_rule_properties", "update(): growth cadence and tracker", 5, "scaler",
         reaches="update", ko="update(): 성장 주기와 추적기"),
    Item("1.7", "test_update_rule_non_power_of_two_factors", "The scale is float32: rounded init and products", 3, "scaler",
         reaches="update", ko="스케일은 float32: 반올림된 초깃값과 곱"),
    Item("1.8", "test_growth_skipped_when_float32_would_overflow", "update(): no growth to inf", 2, "scaler",
         reaches="update", ko="update(): inf로 성장하지 않음"),
    Item("1.9", "test_update_new_scale_keeps_tracker", "update(new_scale) keeps the tracker", 2, "scaler",
         reaches="update", ko="update(new_scale)은 추적기를 유지함"),
    Item("1.10", "test_one_backoff_per_update", "One backoff per update, however many overflow", 3, "scaler",
         reaches="update", ko="오버플로가 몇 개든 update 한 번에 백오프 한 번"),
    Item("1.11", "test_matches_torch_gradscaler", "Matches torch.amp.GradScaler", 9, "scaler",
         reaches="update", ko="torch.amp.GradScaler와 일치"),
    Item("1.12", "test_unscale_bit_exact", "Overflow detection: inf/NaN anywhere, before unscaling", 2, "scaler",
         reaches="update", ko="오버플로 감지: 어디에 있든 inf/NaN, 언스케일 전에"),
    Item("1.13", "test_misuse_raises_runtime_error", "Misuse raises RuntimeError", 3, "scaler",
         reaches="update", ko="잘못된 사용은 RuntimeError"),
    Item("1.14", "test_float16_grads_rejected", "float16 gradients raise ValueError, change nothing", 1, "scaler",
         reaches="unscale_", ko="float16 기울기는 ValueError, 아무것도 바꾸지 않음"),
    Item("1.15", "test_scale_lists_and_tuples", "scale() of lists and tuples: same container", 1, "scaler",
         reaches="scale", ko="list와 tuple의 scale(): 같은 컨테이너"),
    Item("1.16", "test_state_dict_round_trip", "state_dict(): torch's keys; load restores it", 2, "scaler",
         reaches="update", ko="state_dict(): torch의 키, load로 복원"),
    Item("1.18", "test_defaults_and_restored_state", "Constructor defaults are torch's", 1, "scaler",
         reaches="__init__", ko="생성자 기본값이 torch와 같음", inputs=PUBLIC),
    # Task 2: amp_step
    Item("2.1", "test_amp_step_forward_under_autocast", "Forward and loss under autocast", 4, "amp_step", PUBLIC,
         ko="autocast 안에서 순전파와 손실"),
    Item("2.2", "test_amp_step_backward_outside_autocast", "Backward outside autocast", 3, "amp_step", PUBLIC,
         ko="autocast 밖에서 역전파"),
    Item("2.3", "test_amp_step_backward_sees_scaled_loss", "Backward of the scaled loss", 3, "amp_step", PUBLIC,
         ko="스케일된 손실의 역전파"),
    Item("2.4", "test_amp_step_zeroes_grads_every_step", "Gradients zeroed every step", 3, "amp_step",
         ko="매 스텝 기울기 초기화"),
    Item("2.5", "test_amp_step_steps_through_scaler", "Optimizer stepped once, through the scaler", 4, "amp_step",
         ko="스케일러를 통해 옵티마이저 스텝"),
    Item("2.6", "test_amp_step_updates_once_after_step", "update() once, after step()", 3, "amp_step",
         ko="step() 뒤에 update() 한 번"),
    Item("2.7", "test_amp_step_unscales_before_clipping", "unscale_ before clipping", 3, "amp_step",
         ko="클리핑 전에 unscale_"),
    Item("2.8", "test_amp_step_returns_unscaled_detached_loss", "Returns the unscaled, detached loss", 2, "amp_step",
         ko="언스케일되고 그래프에서 떼어 낸 손실을 돌려줌"),
    Item("2.9", "test_amp_step_works_with_both_scalers", "Works with GradScaler and any contract scaler", 2, "amp_step",
         ko="GradScaler와 계약을 따르는 어떤 스케일러로도 동작"),
    Item("2.10", "test_underflow_training_converges", "fp16 training converges with scaling", 3, "amp_step",
         ko="스케일링으로 fp16 학습이 수렴"),
    # Task 3: Quick Check
    Item("3.1", "test_quick_check_q1", "Quick Check Q1", 2, "quick_check",
         ko="확인 문제 Q1"),
    Item("3.2", "test_quick_check_q2", "Quick Check Q2", 2, "quick_check",
         ko="확인 문제 Q2"),
    Item("3.3", "test_quick_check_q3", "Quick Check Q3", 2, "quick_check",
         ko="확인 문제 Q3"),
    Item("3.4", "test_quick_check_q4", "Quick Check Q4", 2, "quick_check",
         ko="확인 문제 Q4"),
    Item("3.5", "test_quick_check_q5", "Quick Check Q5", 2, "quick_check",
         ko="확인 문제 Q5"),
)

#: Tests of the GPU part (graded by staff on a GPU; informational on Gradescope).  Their
#: points are shares of GPU_PART_POINTS (env AMP_GPU_POINTS, default 10).
GPU_PART_POINTS = settings.gpu_points()
GPU_ITEMS: tuple[Item, ...] = (
    Item("4.1", "test_gpu_amp_reaches_fp32_loss_sooner", "GPU: AMP reaches fp32's loss sooner",
         GPU_PART_POINTS * 0.5, "gpu", PUBLIC, ko="GPU: AMP가 fp32의 손실에 더 빨리 도달"),
    Item("4.2", "test_gpu_underflow_needs_the_scaler", "GPU: GradScaler rescues float16 underflow",
         GPU_PART_POINTS * 0.3, "gpu", PUBLIC, ko="GPU: GradScaler가 float16 언더플로를 구함"),
    Item("4.3", "test_gpu_toy_scaler_matches_cuda_gradscaler", "GPU: ToyLossScaler matches GradScaler('cuda')",
         GPU_PART_POINTS * 0.2, "gpu", PUBLIC, ko="GPU: ToyLossScaler가 GradScaler('cuda')와 일치"),
)

BY_TEST = {item.test: item for item in ITEMS + GPU_ITEMS}


def suite_problem(item: Item, found: set[str]) -> str | None:
    """Why the suites that define ``item``'s test (``found``: PUBLIC, HIDDEN) are not what the row declares, or
    None.  A hidden row may also have a public example; a public row, or one graded on public inputs alone, never
    has a hidden test (its hidden inputs would be graded in a row that shows them, or copy the public example)."""
    if not found:
        return None  # collected nowhere: the judge's "not collected"
    if item.test_suite not in found:
        return (f"row {item.number}: {item.test} is not in the {item.test_suite} suite (a misspelt name? a hidden "
                "row graded on its public example alone says inputs='public')")
    if HIDDEN in found and item.test_suite != HIDDEN:
        return f"row {item.number}: the hidden suite defines {item.test}, which the row grades on public inputs alone"
    return None


def max_points(items: tuple[Item, ...] = ITEMS) -> float:
    return sum(item.points for item in items)


def row_passed(row: dict | None) -> bool:
    """Whether a results.json test row counts as passed in every report (summary, class report, items.csv).

    Full points and not marked failed: a 0-point row passes only by its status (its score says nothing).
    One definition, so summary.md and report.html never count the same row differently.
    """
    if not isinstance(row, dict):
        return False
    return float(row.get("score", 0.0)) >= float(row.get("max_score", 0.0)) and row.get("status") != "failed"
