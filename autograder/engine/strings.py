"""The fixed texts of a student's feedback, in every language the grader speaks: one table.

English is the default and the reference.  The language is, first found:

* ``$AMP_LANGUAGE`` (``en`` or ``ko``): the batch grader, ``make grade AMP_LANGUAGE=ko``;
* ``language.json`` next to this file, ``{"language": "ko"}``: written only into a Gradescope
  zip built with ``python -m autograder.packaging.gradescope --language ko`` (never kept in the
  repository, so an English build cannot pick it up);
* ``en``.

Only the texts change with the language: rubric row titles (by row number), headlines of
results.json, and the limit and refusal messages.  Scores, row
numbers, statuses and visibility never do.  What a failing check explains (its snippet and
its ``what``) stays English: it quotes code.

Standard library only: the batch's summary imports it without torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autograder import settings

LANGUAGE_FILE = Path(__file__).with_name("language.json")
DEFAULT = "en"

MESSAGES: dict[str, dict[str, str]] = {
    "en": {
        "passed": "Passed.",
        "about_submission": "About your submission:",
        "printed": "Output printed by your code:",
        "printed_in_test": "Output printed by your code during this test:",
        "graded": "Graded {name}.",
        "gpu_row_name": "GPU part ({points:g} points): graded by staff on a GPU",
        "gpu_row_output": "Gradescope has no GPU. Staff run the GPU tests (AMP faster than fp32, underflow on CUDA) "
                          "with your amp_step and add these points later. Check your code locally with the CPU tests "
                          "meanwhile.",
        "internal": "The grader hit an internal problem in this test (not your fault); staff can see the details.",
        "flaky": "Your code gave different results for the same calls on different runs (randomness or state "
                 "shared between objects?).",
        "budget_used_up": "time budget used up: all tests of a submission share {seconds:.0f} s, and your code spent "
                          "them (slow calls?); this test was not run (it scores 0)",
        "import_timeout": "importing {file} did not finish within {seconds:.0f} s (an infinite loop at module level?)",
        "import_crash": "importing {file} ended the process (sys.exit/os._exit/a crash at module level?)",
        "import_broke_protocol": "importing {file} wrote to the grader's pipes, so its process could not start "
                                 "(does it write to file descriptors it did not open?)",
        "hung_too_often": "your code hung {count} times in earlier tests that use {file}; the remaining ones are not "
                          "run (they score 0)",
        "call_timeout": "your code did not finish within {seconds:.0f} s (an infinite loop?); it was stopped",
        "call_crash": "your code ended the process while it ran (sys.exit, os._exit, a crash or a memory limit)",
        "isolation_refused": "The autograder refused to grade here because this machine cannot isolate student code "
                             "well enough (not your fault). Staff have been told.",
        "grader_failed": "The autograder failed while grading this submission (not your fault). Staff have the "
                         "details; please let them know.",
        "hidden_row_withheld": "A hidden test: its points count now; what it tried and why it failed stay with the "
                               "course staff until the due date (they would show the hidden inputs).",
        "no_gpu_here": "This grader has no GPU. Staff run the GPU tests (AMP faster than fp32, underflow on CUDA) "
                       "with your amp_step and add these points later.",
        "nothing_uploaded": "Nothing was uploaded: upload loss_scaler.py, amp_step.py and answers.py.",
        "cpu_score": "CPU part: {score:g} of {points:g} points (the GPU part is graded by staff).",
        "row_file_missing": "Not run: {file} is missing (see the top of this feedback).",
        "row_file_broken": "Not run: {file} could not be imported (see the top of this feedback).",
        "row_not_implemented": "{what} is not implemented yet (see {where} in README.md).",
        "public_part_name": "{title}: public examples (no points of their own)",
        "public_part_output": "Examples from the public checks (assignment/checks) failed in this row. Its points, "
                              "graded with further examples too, show after the due date; fix these first:",
        "file_broken": "{file} could not be imported, so every test that needs it scores 0:",
        "not_implemented": "Not implemented yet: {names}. The tests that use them score 0.",
    },
    "ko": {
        "passed": "통과했습니다.",
        "about_submission": "제출물에 대한 안내:",
        "printed": "여러분의 코드가 출력한 내용:",
        "printed_in_test": "이 테스트 중에 여러분의 코드가 출력한 내용:",
        "graded": "{name} 채점을 마쳤습니다.",
        "gpu_row_name": "GPU 파트 ({points:g}점): 조교가 GPU에서 채점",
        "gpu_row_output": "Gradescope에는 GPU가 없습니다. 조교가 여러분의 amp_step으로 GPU 테스트(AMP가 fp32보다 빠른지, "
                          "CUDA에서의 언더플로)를 실행한 뒤 이 점수를 나중에 더합니다. 그동안 CPU 테스트로 코드를 로컬에서 "
                          "확인하세요.",
        "internal": "이 테스트에서 채점기에 내부 문제가 생겼습니다(여러분의 잘못이 아닙니다). 조교가 자세한 내용을 볼 수 있습니다.",
        "flaky": "같은 호출에 대해 실행할 때마다 코드가 다른 결과를 냈습니다(무작위성, 또는 객체 사이에 공유된 상태?).",
        "budget_used_up": "시간 예산 소진: 제출물 하나의 모든 테스트가 {seconds:.0f}초를 나눠 쓰는데, 여러분의 코드가 그 시간을 다 "
                          "썼습니다(느린 호출?). 이 테스트는 실행되지 않았습니다(0점).",
        "import_timeout": "{file}의 import가 {seconds:.0f}초 안에 끝나지 않았습니다(모듈 최상위의 무한 루프?).",
        "import_crash": "{file}의 import가 프로세스를 끝냈습니다(모듈 최상위의 sys.exit/os._exit/충돌?).",
        "import_broke_protocol": "{file}의 import가 채점기의 파이프에 써서 프로세스를 시작할 수 없었습니다"
                                 "(직접 열지 않은 파일 디스크립터에 쓰고 있나요?).",
        "hung_too_often": "{file}을(를) 쓰는 앞선 테스트들에서 코드가 {count}번 멈췄습니다. 나머지 테스트는 실행하지 않습니다(0점).",
        "call_timeout": "코드가 {seconds:.0f}초 안에 끝나지 않아(무한 루프?) 중지했습니다.",
        "call_crash": "코드가 실행 중에 프로세스를 끝냈습니다(sys.exit, os._exit, 충돌 또는 메모리 한도).",
        "isolation_refused": "이 컴퓨터가 학생 코드를 충분히 격리할 수 없어 자동 채점기가 채점을 거부했습니다(여러분의 잘못이 "
                             "아닙니다). 조교에게 알렸습니다.",
        "grader_failed": "이 제출물을 채점하는 중에 자동 채점기가 실패했습니다(여러분의 잘못이 아닙니다). 조교가 자세한 내용을 "
                         "가지고 있으니 알려 주세요.",
        "hidden_row_withheld": "숨겨진 테스트입니다. 점수는 지금 반영되지만, 무엇을 시험했고 왜 실패했는지는 마감일까지 "
                               "조교만 봅니다(숨겨진 입력이 드러나기 때문입니다).",
        "no_gpu_here": "이 채점기에는 GPU가 없습니다. 조교가 여러분의 amp_step으로 GPU 테스트(fp32보다 빠른 AMP, CUDA의 "
                       "언더플로)를 실행하고 이 점수를 나중에 더합니다.",
        "nothing_uploaded": "업로드된 파일이 없습니다. loss_scaler.py, amp_step.py, answers.py를 업로드하세요.",
        "cpu_score": "CPU 부분: {points:g}점 중 {score:g}점(GPU 부분은 조교가 채점합니다).",
        "row_file_missing": "실행하지 않음: {file} 파일이 없습니다(이 피드백의 맨 위 참고).",
        "row_file_broken": "실행하지 않음: {file}을(를) import할 수 없습니다(이 피드백의 맨 위 참고).",
        "row_not_implemented": "{what}이(가) 아직 구현되지 않았습니다(README.md의 {where} 참고).",
        "public_part_name": "{title}: 공개 예제 (이 행 자체의 점수는 없음)",
        "public_part_output": "이 행에서 공개 체크(assignment/checks)의 예제가 실패했습니다. 이 행의 점수는 추가 예제로도 "
                              "채점되며 마감 후에 공개됩니다. 먼저 다음을 고치세요:",
        "file_broken": "{file}을(를) import할 수 없어 이 파일이 필요한 테스트는 모두 0점입니다:",
        "not_implemented": "아직 구현되지 않음: {names}. 이를 사용하는 테스트는 0점입니다.",
    },
}

#: Rubric row titles by number (rubric.py holds the English ones).
TITLES: dict[str, dict[str, str]] = {
    "ko": {
        "1.1": "생성자가 잘못된 인자를 거부함",
        "1.2": "scale(): float32, 오버플로 없음",
        "1.3": "unscale_(): 제자리 연산, None 기울기 건너뜀, 한 번만",
        "1.4": "step(): inf면 건너뛰고, 아니면 step()의 결과를 돌려줌",
        "1.5": "update(): inf/NaN 뒤의 백오프",
        "1.6": "update(): 성장 주기와 추적기",
        "1.7": "스케일은 float32: 반올림된 초깃값과 곱",
        "1.8": "update(): inf로 성장하지 않음",
        "1.9": "update(new_scale)은 추적기를 유지함",
        "1.10": "오버플로가 몇 개든 update 한 번에 백오프 한 번",
        "1.11": "torch.amp.GradScaler와 일치",
        "1.12": "오버플로 감지: 어디에 있든 inf/NaN, 언스케일 전에",
        "1.13": "잘못된 사용은 RuntimeError",
        "1.14": "float16 기울기는 ValueError, 아무것도 바꾸지 않음",
        "1.15": "list와 tuple의 scale(): 같은 컨테이너",
        "1.16": "state_dict(): torch의 키, load로 복원",
        "1.18": "생성자 기본값이 torch와 같음",
        "2.1": "autocast 안에서 순전파와 손실",
        "2.2": "autocast 밖에서 역전파",
        "2.3": "스케일된 손실의 역전파",
        "2.4": "매 스텝 기울기 초기화",
        "2.5": "스케일러를 통해 옵티마이저 스텝",
        "2.6": "step() 뒤에 update() 한 번",
        "2.7": "클리핑 전에 unscale_",
        "2.8": "언스케일되고 그래프에서 떼어 낸 손실을 돌려줌",
        "2.9": "GradScaler와 계약을 따르는 어떤 스케일러로도 동작",
        "2.10": "스케일링으로 fp16 학습이 수렴",
        "3.1": "확인 문제 Q1",
        "3.2": "확인 문제 Q2",
        "3.3": "확인 문제 Q3",
        "3.4": "확인 문제 Q4",
        "3.5": "확인 문제 Q5",
        "4.1": "GPU: AMP가 fp32의 손실에 더 빨리 도달",
        "4.2": "GPU: GradScaler가 float16 언더플로를 구함",
        "4.3": "GPU: ToyLossScaler가 GradScaler('cuda')와 일치",
    },
}

LANGUAGES = tuple(MESSAGES)


class UnknownLanguage(ValueError):
    """A language the table does not have (a typo in $AMP_LANGUAGE or a build option)."""


def check_language(code: str) -> str:
    """``code`` if the table has it; else UnknownLanguage naming the choices."""
    if code not in MESSAGES:
        raise UnknownLanguage(f"unknown feedback language {code!r}: choose one of {', '.join(LANGUAGES)}")
    return code


def language() -> str:
    """The feedback language now: $AMP_LANGUAGE, else language.json beside this file, else English."""
    chosen = settings.language()
    if not chosen and LANGUAGE_FILE.is_file():
        chosen = str(json.loads(LANGUAGE_FILE.read_text(encoding="utf-8")).get("language", ""))
    return check_language(chosen or DEFAULT)


def text(key: str, **fields: Any) -> str:
    """The message ``key`` in the current language, with ``fields`` filled in."""
    return MESSAGES[language()][key].format(**fields)


def fallback_text(key: str) -> str:
    """The message ``key`` in the current language, or in English if the language is unknown: for last-resort
    paths (the grader failed) that must write results.json whatever the configuration."""
    try:
        return text(key)
    except (UnknownLanguage, ValueError, OSError):
        return MESSAGES[DEFAULT][key]


def title(item: Any) -> str:
    """A rubric row's title (``item.number``, ``item.title``) in the current language."""
    return TITLES.get(language(), {}).get(item.number, item.title)


def row_name(item: Any) -> str:
    """The name of a results.json row: its number and title."""
    return f"{item.number} {title(item)}"


def phrases(key: str) -> tuple[str, ...]:
    """The message ``key``'s fixed opening (before its first field or parenthesis) in every language.

    For code that recognises a message in results written in any language (the batch summary).
    """
    return tuple(MESSAGES[code][key].split("{")[0].split("(")[0].strip() for code in LANGUAGES)
