"""The fixed texts of a student's feedback, in every language the grader speaks: one table.

English is the default and the reference.  The language is, first found:

* ``$AMP_LANGUAGE`` (``en`` or ``ko``): the batch grader, ``make grade AMP_LANGUAGE=ko``;
* ``language.json`` next to this file, ``{"language": "ko"}``: written only into a Gradescope
  zip built with ``python -m autograder.packaging.gradescope --language ko`` (never kept in the
  repository, so an English build cannot pick it up);
* ``en``.

Only the texts change with the language: rubric row titles (declared with each row in ``rubric.py``), headlines of
results.json, the limit and refusal messages, intake's notes, and the frames of feedback.md,
summary.md, report.html, the console table and the ``rubric`` command.  Scores, row numbers,
statuses and visibility never do.  What a failing check explains is the checks' own table
(``checks/words.py``, which ``checks`` keeps beside itself: it imports nothing of the grader);
code, values and identifiers stay as they are in every language.

Standard library only: the batch's summary imports it without torch.

One file past 400 lines: a table of texts, each in every language, declared once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from checks import words

LANGUAGE_FILE = Path(__file__).with_name("language.json")
DEFAULT = "en"

MESSAGES: dict[str, dict[str, str]] = {
    "en": {
        "passed": "Passed.",
        "same_failure": "fails the same way",
        "about_submission": "About your submission:",
        "printed": "Output printed by your code:",
        "printed_in_test": "Output printed by your code during this test:",
        "graded": "Graded {name}.",
        "gpu_row_name": "GPU part ({points:g} points): graded by staff on a GPU",
        "gpu_row_output": "This grader has no GPU. Staff run the GPU tests (AMP faster than fp32, underflow on CUDA) "
                          "with your amp_step and add these points later. Check your code locally with the CPU tests "
                          "meanwhile.",
        "gpu_row_output_gradescope": "Gradescope has no GPU. Staff run the GPU tests (AMP faster than fp32, underflow "
                                     "on CUDA) with your amp_step and add these points later. Check your code locally "
                                     "with the CPU tests meanwhile.",
        "internal": "The grader hit an internal problem in this test (not your fault); staff can see the details.",
        "flaky": "Your code gave different results for the same calls on different runs (randomness or state "
                 "shared between objects?).",
        "budget_used_up": "time budget used up: all tests of a submission share {seconds:.0f} s, and your code spent "
                          "them (slow calls?); this test was not run (it scores 0)",
        "import_timeout": "importing {file} did not finish within {seconds:.0f} s (an infinite loop at module level?)",
        "import_waited": "importing {file} did not finish within {seconds:.0f} s (waiting for something: sleep, input(), "
                         "a lock, a child process?)",
        "import_crash": "importing {file} ended the process (sys.exit/os._exit/a crash at module level?)",
        "import_broke_protocol": "importing {file} wrote to the grader's pipes, so its process could not start "
                                 "(does it write to file descriptors it did not open?)",
        "hung_too_often": "your code hung {count} times in earlier tests that use {file}; the remaining ones are not "
                          "run (they score 0)",
        "call_timeout": "your code did not finish within {seconds:.0f} s (an infinite loop?); it was stopped",
        "call_waited": "your code did not finish within {seconds:.0f} s (waiting for something: sleep, input(), a lock, "
                       "a child process?); it was stopped",
        "call_crash": "your code ended the process while it ran (sys.exit, os._exit, a crash or a memory limit)",
        "isolation_refused": "The autograder refused to grade here because this machine cannot isolate student code "
                             "well enough (not your fault). Staff have been told.",
        "grader_failed": "The autograder failed while grading this submission (not your fault). Staff have the "
                         "details; please let them know.",
        "hidden_row_withheld": "A hidden test: its points count now; what it tried and why it failed are not shown "
                               "here (they would show the hidden inputs). Ask the course staff about it.",
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
        "task": "Task {number}",
        "gpu_fault": "The grader could not grade the GPU part because of an internal problem (not your fault); "
                     "staff will regrade it.",
        "fault": "The grader could not grade this submission because of an internal problem (not your fault); "
                 "staff have the details and will regrade it.",
        # intake (engine.intake): notes on how the submission's files were found, and why it could not be read
        "intake.too_slow": "Reading your submission took longer than the whole time budget; it was stopped.",
        "intake.too_large": "{shown} was skipped: larger than {mib:g} MiB.",
        "intake.found_instead": "Found {files}, not graded: if one of them is your {missing}, rename it {missing}.",
        "batch.renamed": "{source} is graded as {name}: another submission is already named {base}.",
        "batch.no_submission": "no submission found in {path}: it holds no .py file, notebook or zip (expected "
                               "loss_scaler.py, amp_step.py and answers.py, or folders or zips of submissions)",
        "feedback.renamed": "Graded as **{name}**: another submission in this batch is also named {base} (this one "
                            "is {source}).",
        "intake.renamed": "Used {shown} as {name}; please name the file exactly {name}.",
        "intake.in_folder": "Found {name} inside a folder ({shown}); upload it at the top level next time.",
        "intake.several": "Several files could be {name}; graded {shown}, ignored {others}.",
        "intake.too_many": "Your submission holds more than {limit} files and folders; only the first ones were "
                           "searched.",
        "intake.symlink": "{shown} is a symbolic link and was ignored; upload the file itself.",
        "intake.zip_too_many": "{archive} holds {count} entries; that is not a submission.",
        "intake.zip_symlink": "{member} in {archive} is a symbolic link and was ignored.",
        "intake.zip_unsafe": "{member} in {archive} has an unsafe path; read as {name}.",
        "intake.zip_long_names": "{count} entries of {archive} have names longer than {limit} characters; they were "
                                 "skipped.",
        "intake.zip_broken": "{archive} is not a readable zip archive ({error}).",
        "intake.not_found": "{submission} does not exist.",
        "intake.from_zip": "Read your files from {archive}.",
        "intake.zip_unreadable": "{archive} is not a readable zip archive.",
        "intake.not_submission": "{submission} is neither a folder nor a zip archive.",
        "intake.missing": "Missing: {files}. The tests that need them score 0.",
        "intake.notebook_not_files": "Found {notebook}: the autograder grades the .py files, not the notebook. Run "
                                     "every task cell, then the notebook's last cell: it makes a zip of "
                                     "loss_scaler.py, amp_step.py and answers.py. Upload that zip.",
        # feedback.md (batch.summary)
        "feedback.title": "# Feedback: {name}",
        "feedback.by": "Submitted by: {people}",
        "feedback.score": "**Score: {score} / {top}** (CPU part; the GPU part ({gpu} points) is graded separately by "
                          "staff).",
        "feedback.not_graded": "**Your submission could not be graded:** {reason}",
        "feedback.see_below": "see below.",
        "feedback.about": "## About your submission",
        "feedback.tests": "## Tests",
        "feedback.tests_head": "| Test | Score | Result |",
        "feedback.passed": "passed",
        "feedback.failed": "**failed**",
        "feedback.wrong": "## What went wrong",
        "feedback.group": "{numbers} ({count} tests)",
        # summary.md and the console table (batch.summary)
        "summary.title": "# Batch grading summary",
        "summary.counts": "- Submissions: **{submissions}**; graded: {graded} ({full} with full marks, {lost} lost "
                          "points); could not be graded: **{errored}**; hit a limit: **{limit}**.",
        "summary.scores": "- Scores out of {top} (the graded submissions only): mean {mean}, median {median}, min {min}, "
                          "max {max}.",
        "summary.histogram": "Score histogram",
        "summary.histogram_head": "| Score | Submissions |",
        "summary.tests": "## Tests, most failed first",
        "summary.tests_head": "| Test | Title | Points | Passed | Failed | Pass rate |",
        "summary.problems": "## Limits hit and faults",
        "summary.problems_head": "| Problem | Submissions | Which |",
        "summary.more": ", … ({count} more)",
        "summary.none": "None.",
        "summary.not_graded": "## Could not be graded",
        "summary.not_graded_text": "No score, not a zero: their score cells in gradebook.csv are empty (its status column "
                                   "says why), and they are outside every statistic above (mean, histogram, tests).",
        "summary.isolation": "## Isolation of student code",
        "summary.isolation_line": "- {level}: {count} submission(s)",
        "summary.unsealed": "**Not sealed**: {levels} is below {sealed}, allowed by --min-isolation: one student's "
                            "processes may have passed data to another's, and read files the grader's user can read.",
        "summary.not_recorded": "Not recorded.",
        "console.title": "Grades (CPU part, out of {top}; GPU part graded separately)",
        "console.title_some": ": the {shown} with problems of {total}; all are in gradebook.csv",
        "console.columns": "student|score|failed tests|problems",
        "console.not_graded": "not graded: {reason}",
        "console.totals": "{submissions} submission(s): {graded} graded ({full} full marks), {errored} could not be "
                          "graded, {limit} hit a limit.",
        "console.mean": " Mean {mean}, median {median} / {top}.",
        "console.wrote": "Wrote into {out}: {files}; and per submission ({count}) results.json and feedback.md "
                         "(in {folder}).",
        "console.opened.report.html": "the class page: students, rows, mistakes, similarity",
        "console.opened.similarity.html": "similar code side by side",
        "console.opened.changes.csv": "what a regrade moved",
        "console.plan": "{total} submission(s): {done} already graded, {rescored}{todo} to grade{reasons}{where}.",
        "console.rescored": "{count} rescored (only the rubric points changed: no code run), ",
        "console.reasons": " ({reasons})",
        "console.reason": "{count} {why}",
        "console.why.forced": "forced",
        "console.why.new": "new",
        "console.why.changed": "changed since their last grading",
        "console.why.grader": "graded by another version of the grader or limits",
        "console.why.retry": "not graded last time",
        "console.slurm": " on Slurm",
        "console.workers": " with {jobs} worker(s)",
        "console.withheld": " Not graded, listed apart: {nothing} with nothing submitted, {superseded} superseded by "
                            "another submission of the same SID.",
        "console.isolation": "isolation level for student code here: {level}",
        "batch.same_sid": "SID {sid} submitted more than once: {submissions}; graded {kept} (the {choice}: --same-sid "
                          "chooses), the others are listed as superseded.",
        "batch.same_sid_all": "SID {sid} submitted more than once: {submissions}; each is graded (--same-sid all).",
        "withheld.nothing": "Nothing submitted: the upload holds no file to grade (no score, not a zero).",
        "withheld.superseded": "Superseded {reason}: another submission of the same SID is graded instead (no score "
                               "here, not a zero).",
        "summary.nothing": "## Nothing submitted",
        "summary.nothing_text": "{count} upload(s) held no file to grade: no score, not a zero (gradebook.csv's status "
                                "says \"nothing submitted\"), and in no statistic.",
        "summary.same_sid": "## Submitted more than once (same SID)",
        "summary.same_sid_line": "- SID {sid}: {submissions}; graded: {graded}.",
        "rubric.total": "total CPU {cpu} + GPU {gpu}",
        # the kinds of problem summary.md and the console count (batch.summary.PROBLEMS, sandbox.budget)
        "problem.time limit": "time limit",
        "problem.crash, exit or memory limit": "crash, exit or memory limit",
        "problem.interfered with the grader": "interfered with the grader",
        "problem.import error": "import error",
        "problem.missing file": "missing file",
        "problem.file too large": "file skipped: too large",
        "problem.grader fault": "grader fault",
        "problem.not graded": "not graded",
        "sim.heading": "Similarity",
        "sim.with_solution": " and with the reference solution (`solutions/`; `--no-similarity-solution` to skip)",
        "sim.without_solution": " (not with the reference solution: {why})",
        "sim.compared": "{count} submission(s) compared pairwise on {files}{solution} (the skeleton's code does not "
                        "count); [{csv}]({csv}) has every pair that shares code, [{link}]({link}) shows the flagged "
                        "pairs side by side.",
        "sim.threshold": "Threshold **{threshold}**: {reason}.",
        "sim.floor": "the floor, as a class of {count} submission(s) is too small to estimate its own outlier fence "
                     "(used from {least} submissions on)",
        "sim.fence": "upper outlier fence of the {count} pair scores, Q3 + 1.5 IQR = {q3} + 1.5 x {iqr} = {fence}, "
                     "kept within [{floor}, {ceiling}]",
        "sim.identical": "- [Identical files]({link}): {labels}.",
        "sim.matches_solution": "- **Matches the reference solution** ({score}): {label}.",
        "sim.matches_torch": "- **Matches torch's own GradScaler** ({score}): {label}.",
        "sim.markers": "- [Solution markers]({link}) (`# BEGIN SOLUTION`, `# END SOLUTION`, `# SOLUTION`) left in: "
                       "{found}.",
        "sim.no_pair": "No pair reaches it.",
        "sim.flagged": "{count} pair(s) at or above it (identical submissions counted once)",
        "sim.top": "; the top {count} (all in [{link}]({link})):",
        "sim.columns": "#|Pair|Score",
        "sim.tokens": "tokens",
        "sim.joiner": " and ",
        "sim.set": "set with --similarity-threshold",
        "sim.solution_has_none": "{solution} has none of {files}",
        "sim.reference_label": "reference: {label}",
        "sim.solution_label": "the reference solution (solutions/)",
        "sim.torch_label": "torch's own GradScaler (torch/amp/grad_scaler.py)",
        "sim.cluster_label": "{count} identical submissions: {labels}",
    },
    "ko": {
        "passed": "통과했습니다.",
        "same_failure": "같은 방식으로 실패합니다",
        "about_submission": "제출물에 대한 안내:",
        "printed": "여러분의 코드가 출력한 내용:",
        "printed_in_test": "이 테스트 중에 여러분의 코드가 출력한 내용:",
        "graded": "{name} 채점을 마쳤습니다.",
        "gpu_row_name": "GPU 파트 ({points:g}점): 조교가 GPU에서 채점",
        "gpu_row_output": "이 채점기에는 GPU가 없습니다. 조교가 여러분의 amp_step으로 GPU 테스트(AMP가 fp32보다 빠른지, "
                          "CUDA에서의 언더플로)를 실행한 뒤 이 점수를 나중에 더합니다. 그동안 CPU 테스트로 코드를 로컬에서 "
                          "확인하세요.",
        "gpu_row_output_gradescope": "Gradescope에는 GPU가 없습니다. 조교가 여러분의 amp_step으로 GPU 테스트(AMP가 "
                                     "fp32보다 빠른지, CUDA에서의 언더플로)를 실행한 뒤 이 점수를 나중에 더합니다. 그동안 "
                                     "CPU 테스트로 코드를 로컬에서 확인하세요.",
        "internal": "이 테스트에서 채점기에 내부 문제가 생겼습니다(여러분의 잘못이 아닙니다). 조교가 자세한 내용을 볼 수 있습니다.",
        "flaky": "같은 호출에 대해 실행할 때마다 코드가 다른 결과를 냈습니다(무작위성, 또는 객체 사이에 공유된 상태?).",
        "budget_used_up": "시간 예산 소진: 제출물 하나의 모든 테스트가 {seconds:.0f}초를 나눠 쓰는데, 여러분의 코드가 그 시간을 다 "
                          "썼습니다(느린 호출?). 이 테스트는 실행되지 않았습니다(0점).",
        "import_timeout": "{file}의 import가 {seconds:.0f}초 안에 끝나지 않았습니다(모듈 최상위의 무한 루프?).",
        "import_waited": "{file}의 import가 {seconds:.0f}초 안에 끝나지 않았습니다(sleep, input(), 잠금, 자식 프로세스 등을 "
                         "기다리고 있나요?).",
        "import_crash": "{file}의 import가 프로세스를 끝냈습니다(모듈 최상위의 sys.exit/os._exit/충돌?).",
        "import_broke_protocol": "{file}의 import가 채점기의 파이프에 써서 프로세스를 시작할 수 없었습니다"
                                 "(직접 열지 않은 파일 디스크립터에 쓰고 있나요?).",
        "hung_too_often": "{file}를 쓰는 앞선 테스트들에서 코드가 {count}번 멈췄습니다. 나머지 테스트는 실행하지 않습니다(0점).",
        "call_timeout": "코드가 {seconds:.0f}초 안에 끝나지 않아(무한 루프?) 중지했습니다.",
        "call_waited": "코드가 {seconds:.0f}초 안에 끝나지 않아(sleep, input(), 잠금, 자식 프로세스 등을 기다리고 있나요?) "
                       "중지했습니다.",
        "call_crash": "코드가 실행 중에 프로세스를 끝냈습니다(sys.exit, os._exit, 충돌 또는 메모리 한도).",
        "isolation_refused": "이 컴퓨터가 학생 코드를 충분히 격리할 수 없어 자동 채점기가 채점을 거부했습니다(여러분의 잘못이 "
                             "아닙니다). 조교에게 알렸습니다.",
        "grader_failed": "이 제출물을 채점하는 중에 자동 채점기가 실패했습니다(여러분의 잘못이 아닙니다). 조교가 자세한 내용을 "
                         "가지고 있으니 알려 주세요.",
        "hidden_row_withheld": "숨겨진 테스트입니다. 점수는 지금 반영되지만, 무엇을 시험했고 왜 실패했는지는 여기에 "
                               "보이지 않습니다(숨겨진 입력이 드러나기 때문입니다). 궁금하면 조교에게 물어보세요.",
        "no_gpu_here": "이 채점기에는 GPU가 없습니다. 조교가 여러분의 amp_step으로 GPU 테스트(fp32보다 빠른 AMP, CUDA의 "
                       "언더플로)를 실행하고 이 점수를 나중에 더합니다.",
        "nothing_uploaded": "업로드된 파일이 없습니다. loss_scaler.py, amp_step.py, answers.py를 업로드하세요.",
        "cpu_score": "CPU 부분: {points:g}점 중 {score:g}점(GPU 부분은 조교가 채점합니다).",
        "row_file_missing": "실행하지 않음: {file} 파일이 없습니다(이 피드백의 맨 위 참고).",
        "row_file_broken": "실행하지 않음: {file}를 import할 수 없습니다(이 피드백의 맨 위 참고).",
        "row_not_implemented": "아직 구현되지 않음: {what}(README.ko.md의 {where} 참고).",
        "file_broken": "{file}를 import할 수 없어 이 파일이 필요한 테스트는 모두 0점입니다:",
        "public_part_name": "{title}: 공개 예제(이 항목 자체의 점수는 없음)",
        "public_part_output": "이 항목에서 공개 테스트(assignment/checks)의 예제가 실패했습니다. 이 항목의 점수는 추가 "
                              "예제로도 채점되며 마감 후에 공개됩니다. 먼저 다음을 고치세요:",
        "not_implemented": "아직 구현되지 않음: {names}. 이를 사용하는 테스트는 0점입니다.",
        "task": "과제 {number}",
        "gpu_fault": "내부 문제로 채점기가 GPU 파트를 채점하지 못했습니다(여러분의 잘못이 아닙니다). 조교가 다시 채점할 "
                     "것입니다.",
        "fault": "내부 문제로 채점기가 이 제출물을 채점하지 못했습니다(여러분의 잘못이 아닙니다). 조교가 자세한 내용을 "
                 "가지고 있으며 다시 채점할 것입니다.",
        "intake.too_slow": "제출물을 읽는 데 전체 시간 예산보다 오래 걸려 중지했습니다.",
        "intake.too_large": "{shown}는 {mib:g} MiB보다 커서 건너뛰었습니다.",
        "intake.found_instead": "{files}를 찾았지만 채점하지 않았습니다. 그중 하나가 {missing}이면 이름을 {missing}로 "
                                "바꾸세요.",
        "batch.renamed": "{source}는 {name}(으)로 채점합니다. 이미 {base}라는 제출물이 있습니다.",
        "batch.no_submission": "{path}에서 제출물을 찾지 못했습니다. .py 파일, 노트북, zip 파일이 없습니다(loss_scaler.py, "
                               "amp_step.py, answers.py 또는 제출물들의 폴더나 zip이 필요합니다).",
        "feedback.renamed": "**{name}**(으)로 채점했습니다. 이 일괄 채점에 {base}라는 제출물이 또 있습니다(이 제출물: "
                            "{source}).",
        "intake.renamed": "{shown}를 {name}로 사용했습니다. 파일 이름을 정확히 {name}로 지어 주세요.",
        "intake.in_folder": "폴더 안에서 {name}를 찾았습니다({shown}). 다음에는 최상위에 올리세요.",
        "intake.several": "{name}일 수 있는 파일이 여러 개입니다. {shown}를 채점하고 {others}는 무시했습니다.",
        "intake.too_many": "제출물에 파일과 폴더가 {limit}개보다 많아서 앞부분만 찾아보았습니다.",
        "intake.symlink": "{shown}는 심볼릭 링크라서 무시했습니다. 파일 자체를 올리세요.",
        "intake.zip_too_many": "{archive}에 항목이 {count}개 있습니다. 제출물이 아닙니다.",
        "intake.zip_symlink": "{archive}의 {member}: 심볼릭 링크라서 무시했습니다.",
        "intake.zip_unsafe": "{archive}의 {member}: 안전하지 않은 경로라서 {name}로 읽었습니다.",
        "intake.zip_long_names": "{archive}의 항목 {count}개는 이름이 {limit}자보다 길어서 건너뛰었습니다.",
        "intake.zip_broken": "{archive}은 읽을 수 있는 zip 파일이 아닙니다({error}).",
        "intake.not_found": "찾을 수 없습니다: {submission}.",
        "intake.from_zip": "{archive}에서 파일을 읽었습니다.",
        "intake.zip_unreadable": "{archive}은 읽을 수 있는 zip 파일이 아닙니다.",
        "intake.not_submission": "폴더도 zip 파일도 아닙니다: {submission}.",
        "intake.missing": "없는 파일: {files}. 이 파일이 필요한 테스트는 0점입니다.",
        "intake.notebook_not_files": "{notebook}이 있습니다. 자동 채점기는 노트북이 아니라 .py 파일을 채점합니다. 모든 "
                                     "과제 셀을 실행한 뒤 노트북의 마지막 셀을 실행하세요. 그 셀이 loss_scaler.py, "
                                     "amp_step.py, answers.py를 담은 zip을 만듭니다. 그 zip을 올리세요.",
        "feedback.title": "# 피드백: {name}",
        "feedback.by": "제출한 사람: {people}",
        "feedback.score": "**점수: {score} / {top}** CPU 파트의 점수입니다. GPU 파트({gpu}점)는 조교가 따로 채점합니다.",
        "feedback.not_graded": "**제출물을 채점할 수 없었습니다:** {reason}",
        "feedback.see_below": "아래를 보세요.",
        "feedback.about": "## 제출물에 대한 안내",
        "feedback.tests": "## 테스트",
        "feedback.tests_head": "| 테스트 | 점수 | 결과 |",
        "feedback.passed": "통과",
        "feedback.failed": "**실패**",
        "feedback.wrong": "## 무엇이 잘못되었나",
        "feedback.group": "{numbers} (테스트 {count}개)",
        "summary.title": "# 일괄 채점 요약",
        "summary.counts": "- 제출물: **{submissions}**개. 채점됨: {graded}개(만점 {full}개, 감점 {lost}개). 채점할 수 "
                          "없음: **{errored}**개. 한도에 걸림: **{limit}**개.",
        "summary.scores": "- 점수({top}점 만점, 채점된 제출물만): 평균 {mean}, 중앙값 {median}, 최저 {min}, 최고 {max}.",
        "summary.histogram": "점수 히스토그램",
        "summary.histogram_head": "| 점수 | 제출물 |",
        "summary.tests": "## 테스트, 가장 많이 실패한 것부터",
        "summary.tests_head": "| 테스트 | 제목 | 배점 | 통과 | 실패 | 통과율 |",
        "summary.problems": "## 한도 초과와 오류",
        "summary.problems_head": "| 문제 | 제출물 | 목록 |",
        "summary.more": ", … ({count}개 더)",
        "summary.none": "없음.",
        "summary.not_graded": "## 채점할 수 없었던 제출물",
        "summary.not_graded_text": "0점이 아니라 점수가 없습니다. gradebook.csv의 점수 칸은 비어 있고(status 열에 이유가 "
                                   "있음), 위의 어떤 통계(평균, 히스토그램, 테스트)에도 들어가지 않습니다.",
        "summary.isolation": "## 학생 코드의 격리 수준",
        "summary.isolation_line": "- {level}: 제출물 {count}개",
        "summary.unsealed": "**격리되지 않음**: {levels} 수준은 {sealed}보다 낮으며 --min-isolation으로 허용되었습니다. "
                            "한 학생의 프로세스가 다른 학생의 프로세스에 데이터를 넘기거나 채점기 사용자가 읽을 수 있는 "
                            "파일을 읽었을 수 있습니다.",
        "summary.not_recorded": "기록되지 않음.",
        "console.title": "점수 (CPU 파트, {top}점 만점. GPU 파트는 따로 채점)",
        "console.title_some": ": 전체 {total}개 중 문제가 있는 {shown}개. 모두 gradebook.csv에 있습니다",
        "console.columns": "학생|점수|실패한 테스트|문제",
        "console.not_graded": "채점 안 됨: {reason}",
        "console.totals": "제출물 {submissions}개: 채점 {graded}개(만점 {full}개), 채점할 수 없음 {errored}개, "
                          "한도에 걸림 {limit}개.",
        "console.mean": " 평균 {mean}, 중앙값 {median} / {top}.",
        "console.wrote": "{out}에 썼습니다: {files}. 제출물마다({count}개) results.json과 feedback.md({folder} 안).",
        "console.opened.report.html": "반 전체 페이지: 학생, 항목, 실수, 유사도",
        "console.opened.similarity.html": "비슷한 코드를 나란히",
        "console.opened.changes.csv": "재채점으로 바뀐 것",
        "console.plan": "제출물 {total}개: 이미 채점됨 {done}개, {rescored}채점할 것 {todo}개{reasons}{where}.",
        "console.rescored": "다시 계산함 {count}개(루브릭 배점만 바뀜: 코드는 실행하지 않음), ",
        "console.reasons": "({reasons})",
        "console.reason": "{why} {count}개",
        "console.why.forced": "강제 재채점",
        "console.why.new": "새 제출물",
        "console.why.changed": "지난 채점 뒤 파일이 바뀜",
        "console.why.grader": "다른 버전의 채점기나 한도로 채점됨",
        "console.why.retry": "지난번에 채점되지 않음",
        "console.slurm": ", Slurm에서",
        "console.workers": ", 작업자 {jobs}개로",
        "console.withheld": " 채점하지 않고 따로 나열함: 제출한 것이 없음 {nothing}개, 같은 학번의 다른 제출물로 "
                            "대체됨 {superseded}개.",
        "console.isolation": "이 기계에서 학생 코드의 격리 수준: {level}",
        "batch.same_sid": "학번 {sid}의 제출물이 여러 개입니다: {submissions}. {kept}를 채점하고({choice}: --same-sid로 "
                          "고릅니다) 나머지는 대체됨으로 나열합니다.",
        "batch.same_sid_all": "학번 {sid}의 제출물이 여러 개입니다: {submissions}. 모두 채점합니다(--same-sid all).",
        "withheld.nothing": "제출한 것이 없습니다: 채점할 파일이 없습니다(0점이 아니라 점수가 없습니다).",
        "withheld.superseded": "대체됨({reason}): 같은 학번의 다른 제출물을 대신 채점합니다(여기에는 0점이 아니라 "
                               "점수가 없습니다).",
        "summary.nothing": "## 제출한 것이 없는 제출물",
        "summary.nothing_text": "{count}개의 업로드에 채점할 파일이 없었습니다. 0점이 아니라 점수가 없으며(gradebook.csv의 "
                                "status 열: \"nothing submitted\") 어떤 통계에도 들어가지 않습니다.",
        "summary.same_sid": "## 두 번 이상 제출한 학번",
        "summary.same_sid_line": "- 학번 {sid}: {submissions}. 채점한 것: {graded}.",
        "rubric.total": "합계 CPU {cpu} + GPU {gpu}",
        "problem.time limit": "시간 한도",
        "problem.crash, exit or memory limit": "충돌, 종료 또는 메모리 한도",
        "problem.interfered with the grader": "채점기 방해",
        "problem.import error": "import 오류",
        "problem.missing file": "파일 없음",
        "problem.file too large": "파일 건너뜀: 너무 큼",
        "problem.grader fault": "채점기 오류",
        "problem.not graded": "채점 안 됨",
        "sim.heading": "유사도",
        "sim.with_solution": ", 그리고 참조 답안(`solutions/`)과도 비교(`--no-similarity-solution`이면 건너뜀)",
        "sim.without_solution": "(참조 답안과는 비교하지 않음: {why})",
        "sim.compared": "제출물 {count}개를 {files}에 대해 둘씩 비교했습니다{solution}(뼈대 코드는 세지 않음). "
                        "코드를 공유하는 모든 쌍은 [{csv}]({csv})에, 표시된 쌍을 나란히 본 것은 [{link}]({link})에 "
                        "있습니다.",
        "sim.threshold": "기준값 **{threshold}**: {reason}.",
        "sim.floor": "제출물 {count}개인 반은 너무 작아 자체 이상치 경계를 추정할 수 없으므로 하한값(이상치 경계는 제출물 "
                     "{least}개부터 사용)",
        "sim.fence": "쌍 점수 {count}개의 위쪽 이상치 경계, Q3 + 1.5 IQR = {q3} + 1.5 x {iqr} = {fence}, "
                     "[{floor}, {ceiling}] 안으로 제한",
        "sim.identical": "- [똑같은 파일]({link}): {labels}.",
        "sim.matches_solution": "- **참조 답안과 일치** ({score}): {label}.",
        "sim.matches_torch": "- **torch의 GradScaler 원본과 일치** ({score}): {label}.",
        "sim.markers": "- [답안 표시]({link})(`# BEGIN SOLUTION`, `# END SOLUTION`, `# SOLUTION`)가 남은 제출물: "
                       "{found}.",
        "sim.no_pair": "기준값에 이르는 쌍이 없습니다.",
        "sim.flagged": "기준값 이상인 쌍 {count}개(똑같은 제출물은 한 번만 셈)",
        "sim.top": ". 상위 {count}개(모두 [{link}]({link})에 있음):",
        "sim.columns": "#|쌍|점수",
        "sim.tokens": "토큰",
        "sim.joiner": ", ",
        "sim.set": "--similarity-threshold로 정함",
        "sim.solution_has_none": "{solution}에 {files} 중 어느 것도 없음",
        "sim.reference_label": "참고용: {label}",
        "sim.solution_label": "참조 답안(solutions/)",
        "sim.torch_label": "torch의 GradScaler 원본(torch/amp/grad_scaler.py)",
        "sim.cluster_label": "똑같은 제출물 {count}개: {labels}",
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
    chosen = words.requested()
    if not chosen and LANGUAGE_FILE.is_file():
        chosen = str(json.loads(LANGUAGE_FILE.read_text(encoding="utf-8")).get("language", ""))
    return check_language(chosen or DEFAULT)


def text(key: str, **fields: Any) -> str:
    """The message ``key`` in the current language, with ``fields`` filled in."""
    return template(language(), key).format(**fields)


def template(code: str, key: str) -> str:
    """The message ``key`` in the language ``code``, its fields unfilled; the English one where that language has
    none yet, so that a new message may land in English only (tests list what is untranslated)."""
    return MESSAGES[check_language(code)].get(key) or MESSAGES[DEFAULT][key]


def fallback_text(key: str) -> str:
    """The message ``key`` in the current language, or in English if the language is unknown: for last-resort
    paths (the grader failed) that must write results.json whatever the configuration."""
    try:
        return text(key)
    except (UnknownLanguage, ValueError, OSError):
        return MESSAGES[DEFAULT][key]


def title(item: Any, code: str | None = None) -> str:
    """A rubric row's title in the language ``code`` (default: the current one); the row declares its titles
    (``autograder.engine.rubric``), English where it has none in that language."""
    return item.titles.get(code or language()) or item.title


def task(english: str) -> str:
    """A task's name ("Task 2", as the skeleton's stubs name it) in the current language."""
    head, _, number = english.partition(" ")
    return text("task", number=number) if head == "Task" and number.isdigit() else english


def optional_text(key: str, **fields: Any) -> str:
    """The message ``key`` in the current language, or "" where the table has no such message."""
    return text(key, **fields) if key in MESSAGES[DEFAULT] else ""


def problem(kind: str) -> str:
    """A kind of problem (summary.json names it in English) in the current language."""
    return optional_text(f"problem.{kind}") or kind


def columns(key: str) -> list[str]:
    """The column headings the message ``key`` lists ("a|b|c") in the current language."""
    return text(key).split("|")


def is_graded_note(output: str) -> bool:
    """Whether ``output`` is only the "Graded NAME." note (in any language) that results.json holds when there is
    nothing else to say about the submission."""
    for table in MESSAGES.values():
        head, _, tail = table["graded"].partition("{name}")
        if output.startswith(head.strip()) and output.endswith(tail.strip()) and "\n" not in output:
            return True
    return False


def row_name(item: Any) -> str:
    """The name of a results.json row: its number and title."""
    return f"{item.number} {title(item)}"


def phrases(key: str) -> tuple[str, ...]:
    """The message ``key``'s telling words (:func:`checks.words.telling_words`) in every language.

    For code that recognises a message in results written in any language (the batch summary).
    """
    return tuple(dict.fromkeys(words.telling_words(template(code, key)) for code in LANGUAGES))
