"""The TA's pages' words (report.html; similarity.html, its keys ``sim.*``), in every language the grader speaks: one
table.

English is the reference; the language is the feedback's (:func:`autograder.engine.strings.language`), so a
Korean batch gives a Korean page.  Templates use ``str.format`` fields; a ``|`` separates a table's column
headings.  Fields hold values only: the page escapes what it puts in (row titles, names, numbers).
"""

from __future__ import annotations

from typing import Any

from autograder.engine import strings

WORDS: dict[str, dict[str, str]] = {
    "en": {
        "lang": "en",
        "title": "Class report",
        "scores": "Scores",
        "no_summary": "{count} submissions, out of {top} points (no summary.json here).",
        "counts": "Submissions: <b>{submissions}</b>; graded: {graded} ({full} with full marks, {lost} lost points); "
                  "could not be graded: <b>{errored}</b>; hit a limit: <b>{limit}</b>.",
        "counts_scores": " Scores out of {top}: mean {mean}, median {median}, min {min}, max {max}.",
        "no_histogram": "No histogram: it is drawn for {count} submissions or more.",
        "not_png": "No histogram: score_histogram.png is not a PNG image.",
        "histogram": "score histogram",
        "histogram_axes": "Across: score (out of {top}); up: submissions ({count} in all).",
        "students": "Students",
        "students_text": "One line per submission, as in gradebook.csv; the submission links to the feedback.md its "
                         "student reads. Failed rows: how many, and the first of them; they link to everything about "
                         "the submission below (each failed row, problem, flag and mistake in full). Problems: limits "
                         "hit, faults, files that could not be graded, and the grader's notes on the submission. A "
                         "cell too long for its column ends in …",
        "students_head": "submission|student|SID|score|failed rows|problems|similarity|diagnosed mistakes",
        "sort_hint": "Click a column's heading to sort the table by it; click it again for the other way.",
        "details": "Each submission in full",
        "details_text": "What the students table shortens, one submission after the other, in the table's first order: "
                        "every failed row with its points, every problem and note, every similarity flag and every "
                        "diagnosed mistake.",
        "details_link": "everything about this submission",
        "back": "back to its line in the table",
        "nothing_more": "Nothing failed, nothing to report.",
        "not_graded": "not graded: {reason}",
        "not_graded_heading": "Could not be graded",
        "not_graded_text": "{count} submission(s) could not be graded: no score (not a zero; their cells in "
                           "gradebook.csv are empty and its status column says why), and in no mean, histogram or row "
                           "statistic of this page.",
        "not_graded_head": "submission|student|SID|why",
        "other_language": "This page is in {page}, its batch was graded in {batch}: the row titles, notes and feedback "
                          "it quotes are in {batch}. For one language, rebuild it with AMP_LANGUAGE={code} python -m "
                          "autograder report OUT.",
        "language.en": "English",
        "language.ko": "Korean",
        "gpu_heading": "GPU part",
        "gpu_text": "{count} submission(s) graded by grade-gpu (gpu_gradebook.csv; each links to its gpu_results.json).",
        "gpu_dry": " {count} of them are a dry run (on the CPU, no speed check): their scores are no grade.",
        "gpu_head": "submission|student|SID|GPU score|failed GPU tests|status",
        "withheld_heading": "Nothing to grade, and SIDs that submitted twice",
        "withheld_text": "{count} submission(s) were not graded, for want of anything to grade: no score (not a "
                         "zero; gradebook.csv's status says why), and in no statistic of this page.",
        "same_sid_line": "SID <b>{sid}</b> submitted more than once: {submissions}; graded: {graded}.",
        "identical": '<span class="flag">identical</span> to {others} other(s): {link}',
        "cluster": "cluster",
        "matches_solution": '<span class="flag">matches the reference solution</span>',
        "matches_torch": '<span class="flag">matches torch\'s own GradScaler</span>',
        "similar_to": "similar to {label}",
        "more_pairs": "and {count} more flagged pair(s) ({link})",
        "markers_flag": '<span class="flag">solution markers</span> in {files} ({link})',
        "markers": "markers",
        "review_flag": '<span class="flag">for review</span> (never a grade): {reasons}',
        "review_summary": "- Flagged for review (a look, never a grade: the source does what plain Python cannot, and "
                          "can reach torch's memory): {found}",
        "review.raw_memory": "builds arrays over raw addresses (__array_interface__, __array_struct__, from_blob, "
                             "ctypes)",
        "review.code_objects": "constructs code objects (types.CodeType, co_code, __code__ assignment, marshal.loads)",
        "review.process_memory": "reads the process's memory map or memory (/proc/self/maps, /proc/self/mem)",
        "rows": "Rows",
        "rows_text": "Passed: full points on the row (the same count as summary.md's). Discrimination: pass rate in "
                     "the top 27% of submissions by total score minus that in the bottom 27% (upper-lower index; "
                     "shaded below {low} where some pass and some fail).",
        "rows_head": "row|title|points|passed|failed|pass rate|discrimination",
        "small_class": "With {count} submissions the discrimination is not meaningful (it needs {needed} or more): "
                       "each group holds {group} submission(s), so one submission passing instead of failing moves "
                       "a row's index by {step}, more than the {low} that would mark a row as not separating strong "
                       "from weak submissions. No row is shaded.",
        "mistakes": "Most common mistakes",
        "mistakes_head": "row|what happens when|catalogued bug|submissions|examples",
        "more_examples": " … and {count} more (all in {file})",
        "diagnosis_off": "Diagnosis is off ({why}): no failing row was compared with the catalogued mistakes.",
        "no_mistakes": "No failing row matched a catalogued mistake.",
        "similarity": "Similarity",
        "no_similarity": "No similarity report in this folder (--no-similarity).",
        "compared": "{count} submission(s) compared",
        "with_solution": ", each also with the reference solution (solutions/)",
        "threshold": "; threshold {threshold} ({reason}). Side by side: {link}.",
        "identical_files": '<span class="flag">Identical files</span>, {count} submissions ({link}): {labels}.',
        "see": "see",
        "markers_left": '<span class="flag">Solution markers left in</span> ({link}): {found}.',
        "no_pair": "No pair reaches the threshold.",
        "pairs_where_some": "the first {count} in {page}, all in similarity.csv",
        "pairs_where_all": "all in {page}",
        "pairs_shown": "{shown} of {flagged} flagged pair(s) shown ({where}); identical submissions count once.",
        "pairs_head": "pair|first|second|score",
        "sources": "Copies of a source no submission may copy (every match, however many pairs are flagged)",
        "sources_head": "pair|submission|matches|score",
        "tokens": "{count} tokens",
        "score_text": "A pair's score is the share of one side's own code that the other side also holds: code that "
                      "half the class writes alike (such as the ten lines of every correct amp_step.py) does not "
                      "count, files weigh by their size, and a side with little code of its own cannot reach 1. Per "
                      "file: its similarity (copydetect's) and the tokens the two share.",
        "changes": "Regrade changes",
        "changes_some": "{shown} of {total} changed rows shown; all in {file}.",
        "changes_all": "Every changed row ({total}); also in {file}.",
        "changes_head": "submission|old score|new score|change|row|old points|new points|cause",
        "changes_max": "The maximum moved: {old} → {new} (the rubric changed): every new score is out of {new}.",
        # similarity.html (autograder.batch.similarity_html)
        "sim.title": "Code similarity",
        "sim.submissions": "{count} submission(s)",
        "sim.references": " and {count} reference submission(s)",
        "sim.with_solution": ", each also compared with the reference solution (solutions/)",
        "sim.threshold": "; threshold <b>{threshold}</b> ({reason}). ",
        "sim.flagged": "{count} pair(s) at or above it (identical submissions counted once).",
        "sim.cut": " The first {shown} are shown here; all {flagged} are in similarity.csv.",
        "sim.none": " None reaches it: the {count} closest pair(s) are shown for comparison.",
        "sim.highlighted": " Highlighted: code whose fingerprints both files share, after identifiers, strings, comments "
                           "and layout were normalised and the skeleton's code was removed.",
        "sim.cluster": "Identical files: {count} submissions",
        "sim.cluster_text": "Their compared files are the same, byte for byte (line endings and trailing spaces aside); "
                            "each pair below stands for all of them.",
        "sim.solution": "Matches the reference solution",
        "sim.matches_solution": "<span class='flag'>matches the reference solution</span> ({score}): {label}",
        "sim.torch": "Matches torch's own GradScaler (torch/amp/grad_scaler.py)",
        "sim.matches_torch": "<span class='flag'>matches torch's own GradScaler</span> ({score}): {label}",
        "sim.markers": "Solution markers left in",
        "sim.markers_text": "These files still hold the reference solution's markers (<code># BEGIN SOLUTION</code>, "
                            "<code># END SOLUTION</code>, <code># SOLUTION</code>), which the released skeleton never "
                            "has.",
        "sim.pairs_head": "#|First|Second|Score",
        "sim.file": "{file}: {score} ({overlap} overlapping tokens)",
    },
    "ko": {
        "lang": "ko",
        "title": "반 전체 보고서",
        "scores": "점수",
        "no_summary": "제출물 {count}개, {top}점 만점(이 폴더에 summary.json 없음).",
        "counts": "제출물: <b>{submissions}</b>개. 채점: {graded}개(만점 {full}개, 감점 {lost}개). "
                  "채점할 수 없음: <b>{errored}</b>개. 한도에 걸림: <b>{limit}</b>개.",
        "counts_scores": " 점수({top}점 만점): 평균 {mean}, 중앙값 {median}, 최저 {min}, 최고 {max}.",
        "no_histogram": "히스토그램 없음: 제출물이 {count}개 이상일 때 그립니다.",
        "not_png": "히스토그램 없음: score_histogram.png가 PNG 이미지가 아닙니다.",
        "histogram": "점수 히스토그램",
        "histogram_axes": "가로축은 점수({top}점 만점), 세로축은 제출물 수(모두 {count}개)입니다.",
        "students": "학생",
        "students_text": "gradebook.csv처럼 제출물마다 한 줄입니다. 제출물 이름은 그 학생이 읽는 feedback.md로 "
                         "연결됩니다. 실패한 항목: 개수와 처음 몇 개이며, 아래에 있는 그 제출물의 모든 내용(실패한 "
                         "항목, 문제, 표시, 실수 전부)으로 연결됩니다. 문제: 걸린 한도, 오류, 채점할 수 없었던 파일, "
                         "제출물에 대한 채점기의 안내. 칸보다 긴 내용은 …으로 끝납니다.",
        "students_head": "제출물|학생|학번|점수|실패한 항목|문제|유사도|진단된 실수",
        "sort_hint": "열 제목을 누르면 그 열로 표를 정렬합니다. 한 번 더 누르면 반대 순서입니다.",
        "details": "제출물별 전체 내용",
        "details_text": "학생 표가 줄여 보인 내용을 제출물마다 표의 처음 순서대로 모두 보입니다: 실패한 항목과 그 점수, "
                        "문제와 안내, 유사도 표시, 진단된 실수 전부.",
        "details_link": "이 제출물의 모든 내용",
        "back": "표의 그 줄로 돌아가기",
        "nothing_more": "실패한 항목도, 알릴 것도 없습니다.",
        "not_graded": "채점 안 됨: {reason}",
        "not_graded_heading": "채점할 수 없었던 제출물",
        "not_graded_text": "제출물 {count}개를 채점할 수 없었습니다. 점수가 없으며(0점이 아님. gradebook.csv의 칸은 비어 "
                           "있고 status 열에 이유가 있음), 이 페이지의 평균, 히스토그램, 항목 통계 어디에도 들어가지 "
                           "않습니다.",
        "not_graded_head": "제출물|학생|학번|이유",
        "other_language": "이 페이지는 {page}로 썼지만 일괄 채점은 {batch}로 했습니다. 페이지가 옮겨 온 항목 제목, "
                          "안내와 피드백은 {batch}입니다. 한 언어로 보려면 AMP_LANGUAGE={code} python -m autograder "
                          "report OUT으로 다시 만드세요.",
        "language.en": "영어",
        "language.ko": "한국어",
        "gpu_heading": "GPU 파트",
        "gpu_text": "grade-gpu가 채점한 제출물 {count}개(gpu_gradebook.csv. 각각 gpu_results.json으로 연결됩니다).",
        "gpu_dry": " 그중 {count}개는 시험 실행(dry run: CPU에서, 속도 확인 없음)이므로 점수가 성적이 아닙니다.",
        "gpu_head": "제출물|학생|학번|GPU 점수|실패한 GPU 테스트|상태",
        "withheld_heading": "채점할 것이 없는 제출물과 두 번 이상 제출한 학번",
        "withheld_text": "제출물 {count}개는 채점할 것이 없어 채점하지 않았습니다. 점수가 없으며(0점이 아님. gradebook.csv의 "
                         "status 열에 이유가 있습니다) 이 페이지의 어떤 통계에도 들어가지 않습니다.",
        "same_sid_line": "학번 <b>{sid}</b>의 제출물이 여러 개입니다: {submissions}. 채점한 것: {graded}.",
        "identical": '다른 {others}개와 <span class="flag">똑같음</span>: {link}',
        "cluster": "묶음",
        "matches_solution": '<span class="flag">참조 답안과 일치</span>',
        "matches_torch": '<span class="flag">torch의 GradScaler 원본과 일치</span>',
        "similar_to": "{label}와 비슷함",
        "more_pairs": "표시된 쌍 {count}개 더({link})",
        "markers_flag": '{files}에 <span class="flag">답안 표시</span>가 남아 있음({link})',
        "markers": "표시",
        "review_flag": '<span class="flag">검토 대상</span>(점수와 무관): {reasons}',
        "review_summary": "- 검토 대상(점수와 무관, 살펴볼 것: 소스가 평범한 Python으로는 못 하는 일을 하며 torch의 메모리에 "
                          "닿을 수 있음): {found}",
        "review.raw_memory": "원시 주소 위에 배열을 만듦(__array_interface__, __array_struct__, from_blob, ctypes)",
        "review.code_objects": "코드 객체를 만듦(types.CodeType, co_code, __code__ 대입, marshal.loads)",
        "review.process_memory": "프로세스의 메모리 맵이나 메모리를 읽음(/proc/self/maps, /proc/self/mem)",
        "rows": "항목",
        "rows_text": "통과: 그 항목에서 만점(summary.md와 같은 기준). 변별도: 총점 상위 27% 제출물의 통과율에서 "
                     "하위 27%의 통과율을 뺀 값(상하위 지수. 통과와 실패가 섞인 항목 중 {low} 미만은 음영 표시).",
        "rows_head": "항목|제목|배점|통과|실패|통과율|변별도",
        "small_class": "제출물이 {count}개뿐이라 변별도는 의미가 없습니다({needed}개 이상 필요). 각 집단에 제출물이 "
                       "{group}개뿐이라 제출물 하나가 실패 대신 통과하면 항목의 지수가 {step}만큼 움직이는데, 이는 "
                       "잘한 제출물과 못한 제출물을 가르지 못하는 항목을 표시하는 기준 {low}보다 큽니다. 음영 표시한 "
                       "항목은 없습니다.",
        "mistakes": "가장 흔한 실수",
        "mistakes_head": "항목|이런 결과가 나오는 경우|카탈로그의 버그|제출물 수|예시",
        "more_examples": " … 외 {count}개(모두 {file}에 있음)",
        "diagnosis_off": "진단이 꺼져 있습니다({why}). 실패한 항목을 카탈로그의 실수와 비교하지 않았습니다.",
        "no_mistakes": "카탈로그의 실수와 일치하는 실패 항목이 없습니다.",
        "similarity": "유사도",
        "no_similarity": "이 폴더에 유사도 보고서가 없습니다(--no-similarity).",
        "compared": "제출물 {count}개를 비교했습니다",
        "with_solution": ". 각각 참조 답안(solutions/)과도 비교했습니다",
        "threshold": ". 기준값 {threshold}({reason}). 나란히 보기: {link}.",
        "identical_files": '<span class="flag">똑같은 파일</span>, 제출물 {count}개({link}): {labels}.',
        "see": "보기",
        "markers_left": '<span class="flag">답안 표시가 남은 제출물</span>({link}): {found}.',
        "no_pair": "기준값에 이르는 쌍이 없습니다.",
        "pairs_where_some": "{page}에는 처음 {count}개, similarity.csv에는 모두",
        "pairs_where_all": "모두 {page}에 있음",
        "pairs_shown": "표시된 쌍 {flagged}개 중 {shown}개를 보입니다({where}). 똑같은 제출물은 한 번만 셉니다.",
        "pairs_head": "쌍|첫째|둘째|점수",
        "sources": "베껴서는 안 되는 원본과 일치하는 제출물(표시된 쌍이 아무리 많아도 모두)",
        "sources_head": "쌍|제출물|일치|점수",
        "tokens": "토큰 {count}개",
        "score_text": "쌍의 점수는 한쪽이 직접 쓴 코드 가운데 다른 쪽도 가진 코드의 비율입니다. 반 학생 절반이 똑같이 "
                      "쓰는 코드(올바른 amp_step.py라면 누구나 같은 열 줄 등)는 세지 않고, 파일은 크기만큼 무게를 "
                      "두며, 직접 쓴 코드가 적은 쪽은 1에 이를 수 없습니다. 파일별 값: 그 파일의 유사도(copydetect)와 "
                      "두 파일이 함께 가진 토큰 수.",
        "changes": "재채점으로 바뀐 점수",
        "changes_some": "바뀐 항목 {total}개 중 {shown}개를 보입니다. 모두 {file}에 있습니다.",
        "changes_all": "바뀐 항목 전부({total}개). {file}에도 있습니다.",
        "changes_head": "제출물|이전 점수|새 점수|변화|항목|이전 배점 점수|새 배점 점수|원인",
        "changes_max": "만점이 바뀌었습니다: {old} → {new}(루브릭이 바뀜). 새 점수는 모두 {new}점 만점입니다.",
        "sim.title": "코드 유사도",
        "sim.submissions": "제출물 {count}개",
        "sim.references": "와 참고용 제출물 {count}개",
        "sim.with_solution": "를 비교했고, 각각 참조 답안(solutions/)과도 비교했습니다",
        "sim.threshold": ". 기준값 <b>{threshold}</b>({reason}). ",
        "sim.flagged": "기준값 이상인 쌍 {count}개(똑같은 제출물은 한 번만 셈).",
        "sim.cut": " 여기에는 처음 {shown}개를 보입니다. {flagged}개 모두 similarity.csv에 있습니다.",
        "sim.none": " 기준값에 이르는 쌍이 없어 가장 가까운 쌍 {count}개를 비교용으로 보입니다.",
        "sim.highlighted": " 강조 표시: 식별자, 문자열, 주석, 배치를 정규화하고 뼈대 코드를 뺀 뒤 두 파일이 함께 가진 "
                           "지문(fingerprint)의 코드.",
        "sim.cluster": "똑같은 파일: 제출물 {count}개",
        "sim.cluster_text": "비교한 파일이 바이트 단위로 똑같습니다(줄 끝과 줄 끝 공백은 빼고). 아래의 쌍 하나가 이들 모두를 "
                            "대표합니다.",
        "sim.solution": "참조 답안과 일치",
        "sim.matches_solution": "<span class='flag'>참조 답안과 일치</span> ({score}): {label}",
        "sim.torch": "torch의 GradScaler 원본과 일치(torch/amp/grad_scaler.py)",
        "sim.matches_torch": "<span class='flag'>torch의 GradScaler 원본과 일치</span> ({score}): {label}",
        "sim.markers": "답안 표시가 남은 제출물",
        "sim.markers_text": "이 파일들에는 참조 답안의 표시(<code># BEGIN SOLUTION</code>, <code># END SOLUTION</code>, "
                            "<code># SOLUTION</code>)가 아직 있습니다. 배포한 뼈대 코드에는 없는 표시입니다.",
        "sim.pairs_head": "#|첫째|둘째|점수",
        "sim.file": "{file}: {score} (겹치는 토큰 {overlap}개)",
    },
}


def word(key: str, **fields: Any) -> str:
    """The page's text ``key`` in the feedback's language (the English one where that language has none yet), with
    ``fields`` filled in."""
    return (WORDS[strings.language()].get(key) or WORDS[strings.DEFAULT][key]).format(**fields)


def heads(key: str) -> list[str]:
    """The column headings ``key`` lists ("a|b|c")."""
    return word(key).split("|")
