"""What only the grader says to a student, in every language: the messages no student process and no public check
says (the checks' own, which ship to students, are in ``checks/words.py``).

The same rules as the checks' words: a table per language keyed by message id, the language ``$AMP_LANGUAGE`` asks
for (:func:`checks.words.language`), the English text where a language has none yet.  :func:`say` renders a message
of either table, so a grader module speaks through it alone.
"""

from __future__ import annotations

from typing import Any

from checks import words

EN: dict[str, str] = {
    # ---- a configuration of amp_step in words, what differs from a correct one (autograder.engine.amp_reference);
    # recorded in checks/amp_effects.json in every language, for a student's local run
    "config.under": "{name} under {where}",
    "config.autocast": "autocast {dtype}",
    "config.no_autocast": "no autocast",
    "config.half": "model.half()",
    "config.no_half": "no model.half()",
    "config.unscaled_backward": "backward of the unscaled loss",
    "config.scaled_backward": "backward of the scaled loss",
    "config.zero_grad": "zero_grad {value}",
    "config.clipping": "clipping: {value}",
    "config.step": "step: {value}",
    "config.update": "update: {value}",
    "config.correct": "correct",
    "config.value.before": "before",
    "config.value.after_backward": "after backward",
    "config.value.after_step": "after step",
    "config.value.never": "never",
    "config.value.correct": "correct",
    "config.value.unscale_always": "unscale always",
    "config.value.clip_then_unscale": "clip then unscale",
    "config.value.clip_only": "clip only",
    "config.value.no_clip": "no clip",
    "config.value.scaler": "scaler",
    "config.value.twice": "twice",
    "config.value.direct": "direct",
    "config.value.before_step": "before step",
    "config.value.after_clean_step": "after clean step",
    "config.value.when_clean": "only when the gradients were finite",
    "config.value.unscale_twice": "unscale_ before clipping and again before the step",
    # ---- a row of Task 2 whose effects a wrong amp_step could leave too (autograder.engine.amp_reference)
    "effects.masked": "your amp_step's effects are those of one that gets this right, but also those of one that gets "
                      "it wrong ({wrong}): with {masked}, it leaves no effect we could check",
    # ---- a catalogued mistake in the diagnosis report's "what happens when" column (autograder.diagnosis.words)
    "mistake.words": "{words}.",
    # ---- why a call of the underflow run is no AMP step (autograder.engine.underflow_steps)
    "underflow.not_amp": "call {number} did not do what any such amp_step does there: {why}",
    "underflow.no_calls": "no call's effects came back",
    "underflow.raised": "it raised {error}: {message}\n{trace}",
    "underflow.error": "the error should be {want} but is {have}",
    "underflow.weight": "the weight should be {want} but is {have}",
    "underflow.grad": "the weight's gradient should be {want} but is {have}",
    "underflow.scaler": "the scaler should be {want} but is {have}",
    # ---- Task 3, the hidden Quick Check (autograder/hidden/test_hidden_quick_check.py)
    "quick.unanswered": "{question} is unanswered in answers.py (set {question} = \"A\", \"B\", \"C\" or \"D\").",
    "quick.not_letter": "{question} must be one letter, \"A\" to \"D\"; answers.py has {given}.",
    "quick.wrong": "{question}: {given} is not the right choice. Reread the matching section of the handout.",
    # ---- otter's test files and their bridge (autograder/packaging/otter_build.py bakes these into the test
    # files: grader.check in a student's notebook, otter's grading run)
    "otter.bridge_changed": "{bridge} is missing or is not the file this test was built with (SHA-256 differs)",
    "otter.bridge_broken": "{bridge} could not be loaded ({error})",
    "otter.setup_error": "Autograder setup error: {problem}. Please tell the staff.",
    "otter.download_bridge": "{problem}. grader.check needs it: download {bridge} again (it comes with the assignment) "
                             "and keep it, unchanged, next to this notebook.",
    "otter.no_grader": "Autograder setup error: {grader} is missing from {folder} (it ships in the files/ folder of the "
                       "otter autograder zip). Please tell the staff.",
    "otter.judge_failed": "Autograder error: the judge exited with status {status} and wrote no results. Please tell "
                          "the staff.\n{log}",
    "otter.no_result": "Autograder error: no result for test {number}. Please tell the staff.",
    "otter.no_checks": "The public checks (the checks/ folder of the assignment) are not next to this notebook "
                       "({folder}). Open the notebook in the assignment folder.",
    "otter.pytest_failed": "pytest could not run the public checks:\n{log}",
    "otter.did_not_run": "The public check {node} did not run (see the output of python -m pytest).",
    "otter.check_failed": "failed",
    "otter.row_failed": "Failed.",
    "otter.missing_hint": "If you worked in the notebook: submit the zip its last cell makes (it holds the .py files "
                          "that the %%writefile cells wrote), or upload those .py files.",
    "otter.passed_part": "{name} (passed part: {score} of {points} points)",
    "otter.failed_part": "{name} (failed part: {score} of {points} points)",
}

KO: dict[str, str] = {
    # ---- a configuration of amp_step in words, what differs from a correct one (autograder.engine.amp_reference);
    # recorded in checks/amp_effects.json in every language, for a student's local run
    "config.under": "{name}: {where}",
    "config.autocast": "autocast {dtype}",
    "config.no_autocast": "autocast 없음",
    "config.half": "model.half() 사용",
    "config.no_half": "model.half() 없음",
    "config.unscaled_backward": "스케일하지 않은 손실의 역전파",
    "config.scaled_backward": "스케일한 손실의 역전파",
    "config.zero_grad": "zero_grad 시점: {value}",
    "config.clipping": "클리핑: {value}",
    "config.step": "스텝: {value}",
    "config.update": "update: {value}",
    "config.correct": "올바름",
    "config.value.before": "순전파 전",
    "config.value.after_backward": "backward() 뒤",
    "config.value.after_step": "스텝 뒤",
    "config.value.never": "호출 안 함",
    "config.value.correct": "올바름",
    "config.value.unscale_always": "항상 언스케일",
    "config.value.clip_then_unscale": "클리핑 뒤 언스케일",
    "config.value.clip_only": "언스케일 없이 클리핑",
    "config.value.no_clip": "클리핑 안 함",
    "config.value.scaler": "스케일러를 통해",
    "config.value.twice": "두 번",
    "config.value.direct": "optimizer.step() 직접 호출",
    "config.value.before_step": "스텝 전",
    "config.value.after_clean_step": "깨끗한 스텝 뒤에만",
    "config.value.when_clean": "기울기가 유한할 때만",
    "config.value.unscale_twice": "클리핑 전에 언스케일하고 스텝 전에 다시 언스케일",
    # ---- a row of Task 2 whose effects a wrong amp_step could leave too (autograder.engine.amp_reference)
    "effects.masked": "여러분의 amp_step이 남긴 효과는 이것을 올바르게 하는 amp_step의 효과이기도 하고, 잘못하는 "
                      "amp_step({wrong})의 효과이기도 합니다. {masked} 때문에 확인할 수 있는 효과가 남지 않습니다",
    # ---- a catalogued mistake in the diagnosis report's "what happens when" column (autograder.diagnosis.words)
    "mistake.words": "{words} 경우",
    # ---- why a call of the underflow run is no AMP step (autograder.engine.underflow_steps)
    "underflow.not_amp": "호출 {number}은 그런 amp_step이 그 자리에서 하는 일을 하지 않았습니다: {why}",
    "underflow.no_calls": "어떤 호출의 효과도 돌아오지 않았습니다",
    "underflow.raised": "{error} 예외가 발생했습니다: {message}\n{trace}",
    "underflow.error": "오류는 {want}이어야 하는데 {have}입니다",
    "underflow.weight": "가중치의 올바른 값은 {want}인데 실제 값은 {have}입니다",
    "underflow.grad": "가중치 기울기의 올바른 값은 {want}인데 실제 값은 {have}입니다",
    "underflow.scaler": "스케일러의 올바른 상태는 {want}인데 실제 상태는 {have}입니다",
    # ---- Task 3, the hidden Quick Check (autograder/hidden/test_hidden_quick_check.py)
    "quick.unanswered": "answers.py에 {question}의 답이 없습니다({question} = \"A\", \"B\", \"C\", \"D\" 중 하나로 "
                        "정하세요).",
    "quick.not_letter": "{question}의 답은 \"A\"부터 \"D\"까지 중 글자 하나여야 합니다. answers.py의 답: {given}.",
    "quick.wrong": "{question}: 맞는 답이 아닙니다(답: {given}). 과제 안내서의 해당 절을 다시 읽어 보세요.",
    # ---- otter's test files and their bridge (autograder/packaging/otter_build.py bakes these into the test
    # files: grader.check in a student's notebook, otter's grading run)
    "otter.bridge_changed": "{bridge} 파일이 없거나 이 테스트를 만들 때의 파일이 아닙니다(SHA-256이 다름)",
    "otter.bridge_broken": "{bridge}를 불러올 수 없습니다({error})",
    "otter.setup_error": "자동 채점기 설정 오류: {problem}. 조교에게 알려 주세요.",
    "otter.download_bridge": "{problem}. grader.check에 이 파일이 필요합니다. {bridge}를 다시 내려받아(과제와 함께 "
                             "배포됩니다) 바꾸지 말고 이 노트북 옆에 두세요.",
    "otter.no_grader": "자동 채점기 설정 오류: {folder}에 {grader}가 없습니다(otter 자동 채점기 zip의 files/ 폴더에 "
                       "들어 있습니다). 조교에게 알려 주세요.",
    "otter.judge_failed": "자동 채점기 오류: 채점기가 상태 {status}로 끝났고 결과를 쓰지 않았습니다. 조교에게 알려 "
                          "주세요.\n{log}",
    "otter.no_result": "자동 채점기 오류: 테스트 {number}의 결과가 없습니다. 조교에게 알려 주세요.",
    "otter.no_checks": "공개 테스트(과제의 checks/ 폴더)가 이 노트북 옆에 없습니다({folder}). 과제 폴더 안에서 "
                       "노트북을 여세요.",
    "otter.pytest_failed": "pytest가 공개 테스트를 실행하지 못했습니다:\n{log}",
    "otter.did_not_run": "공개 테스트 {node}가 실행되지 않았습니다(python -m pytest의 출력을 보세요).",
    "otter.check_failed": "실패",
    "otter.row_failed": "실패했습니다.",
    "otter.missing_hint": "노트북에서 작업했다면 노트북의 마지막 셀이 만드는 zip(%%writefile 셀이 쓴 .py 파일이 "
                          "들어 있음)을 제출하거나, 그 .py 파일들을 올리세요.",
    "otter.passed_part": "{name} (통과한 부분: {points}점 중 {score}점)",
    "otter.failed_part": "{name} (실패한 부분: {points}점 중 {score}점)",
}

TABLES: dict[str, dict[str, str]] = {"en": EN, "ko": KO}


def template(key: str, code: str = "") -> str:
    """The template of the grader's message ``key`` in language ``code`` (the current one by default); English where
    that language has none."""
    return words.template(key, code, TABLES)


def say(key: str, **fields: Any) -> str:
    """The message ``key`` in the current language, with ``fields`` filled in: the grader's own, or the checks'."""
    return template(key).format(**fields) if key in EN else words.say(key, **fields)
