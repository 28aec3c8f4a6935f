"""The Korean notebook edition's own texts (``make notebook AMP_LANGUAGE=ko``).

:mod:`autograder.packaging.notebook_build` takes the lesson and the task statements from
``assignment/README.ko.md``; these are the notebook's few texts that are not in the handout,
one per constant of :mod:`autograder.packaging.notebook_en` (same names): the code cells' texts by key
(:data:`CODE_TEXTS`), the skeleton's stubs (:data:`PROMPT`), and otter's own words in Korean (:data:`OTTER_WORDS`).
"""

from __future__ import annotations

HANDOUT_NAME = "README.ko.md"
NOTEBOOK = "amp_homework.ko.ipynb"
TASK_HEADINGS = {"scaler": "과제 1", "amp_step": "과제 2", "quick_check": "과제 3"}
GPU_HEADING = "GPU 파트"

EXPORT_INSTRUCTIONS = (
    "이 셀이 만드는 zip 파일을 제출하세요(loss_scaler.py, amp_step.py, answers.py가 여러분의 %%writefile 셀이 마지막으로 "
    "쓴 그대로 들어 있습니다: 먼저 모든 과제 셀을 실행하세요). 또는 그 세 .py 파일을 올리세요.")

INTRO = """\
**노트북판.** 여기 있는 모든 내용은 `README.ko.md`에도 있으며, 이 노트북은 실행할 수 있는 셀을
더했습니다. 이 노트북은 `checks/`, `underflow_demo.py`, `README.ko.md` 옆, *과제 폴더 안에서* 여세요
(호스팅된 노트북에서는 먼저 폴더 전체를 올리고 압축을 푸세요). 다음이 필요합니다:
`pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu`, 그다음
`pip install pytest==9.2.0 hypothesis==6.168.5 matplotlib otter-grader==7.0.0`.

동작 방식:

* 각 과제 셀은 `%%writefile loss_scaler.py`(또는 `amp_step.py`, `answers.py`)로 시작합니다.
  셀을 실행하면 **여러분의 코드가 그 파일에 저장됩니다**. 채점되는 것은 그 파일들이며, `.py` 파일을
  직접 고치는 학생과 같은 자동 채점기가 채점합니다. 코드를 바꿀 때마다 과제 셀을 다시 실행하세요.
* `grader.check("q_scaler")` 등은 `checks/`의 **공개 테스트**를 그 파일들에 대해 실행합니다. 이 폴더에서
  `python -m pytest`를 실행하는 것과 같습니다. 자동 채점기는 **숨은 테스트**도 실행합니다.
* 제출하려면 마지막 셀을 실행하고 그 셀이 만든 zip(또는 세 `.py` 파일)을 올리세요.
"""

LESSON_CELL = ("## 파트 I: 강의\n\n(16비트가 왜 빠른지, 예전과 새 API 이름까지 포함한 강의 전체는 "
               "`README.ko.md`에 있습니다.)")
TASKS_CELL = "## 파트 II: 과제\n\n`NotImplementedError`를 발생시키는 본문을 채우세요. 시그니처는 그대로 두세요."
WRITE_HERE = "아래 셀에 코드를 쓰고 실행하세요. 셀이 `{file}`를 씁니다."
QUICK_CHECK_NOTE = "확인 문제에는 공개 테스트가 없습니다. 자동 채점기의 숨은 테스트가 `answers.py`를 채점합니다."

DTYPES_MD = """\
### 해 보기: autocast는 어떤 dtype을 고를까?

아래 셀은 `torch.autocast` 안에서 몇 가지 연산을 실행하고 각 결과의 dtype을 출력합니다.
CPU(`bfloat16` 또는 `float16`)에서는 행렬 곱만 16비트로 가고 손실은 `float32`로 남습니다.
다른 연산은 입력의 dtype을 유지합니다. CUDA에서는 `softmax`, `sum`, `layer_norm`도 `float32`로 실행됩니다.
백엔드마다 자체 목록이 있습니다. 파라미터와 입력은 내내 `float32`로 남습니다.
"""

DEMO_MD = """\
### 해 보기: 조용한 기울기 언더플로

`underflow_demo.py`는 목표값이 아주 작은 선형 회귀를 float16 autocast로 학습합니다. 한 번은 손실
스케일링 없이, 한 번은 손실 스케일링(`torch.amp.GradScaler`)과 함께. 스케일링이 없으면 기울기가
정확히 0으로 언더플로하여 손실이 멈추고, 스케일링이 있으면 손실이 계속 줄어듭니다.
"""

MINE_MD = """\
### 해 보기: 언더플로 문제에 여러분의 스케일러와 `amp_step`을

과제 1과 2가 체크를 통과하면, *여러분의* `ToyLossScaler`와 `amp_step`으로 돌린 같은 데모도
torch의 `GradScaler`처럼 회복해야 합니다.
"""

GPU_MD = """\
### GPU에서: AMP가 더 빠를까?

CUDA가 있는 곳(예: 호스팅된 노트북의 GPU)에서는 이 셀이 큰 MLP의 학습 스텝 시간을 일반 float32와,
`torch.amp.GradScaler("cuda")` 및 float16 autocast를 쓰는 여러분의 `amp_step`으로 각각 잽니다.
텐서 코어가 있는 GPU라면 AMP가 분명히 더 빠를 것입니다. 조교는 같은 종류의 측정으로 GPU 파트를
채점합니다. CPU만 있는 컴퓨터에서는 셀이 그렇다고만 알려 줍니다.
"""

#: The skeleton's stubs in the Korean task cells (:data:`autograder.packaging.release.PROMPT`'s fields).
PROMPT = "{where}: 아직 구현되지 않았습니다(README.ko.md의 과제 {task} 참고)"

#: What the code cells print, plot and say in comments, in Korean: :data:`autograder.packaging.notebook_en.CODE_TEXTS`'
#: keys (``tests/test_handout_sync.py`` checks that both editions have the same).
CODE_TEXTS = {
    "install.comment": "# 이 셀을 먼저 실행하세요. 이 노트북에 필요한 패키지를 채점기와 같은 버전(torch는 CPU 빌드)으로\n# 설치합니다. 이미 설치되어 있으면 건너뜁니다.",
    "load.os": "import os\n",
    "load.language": '\nos.environ["AMP_LANGUAGE"] = "ko"  # 공개 테스트의 메시지를 한국어로\n',
    "load.doc": "여러분의 %%writefile 셀이 쓴 파일(name.py)을 새로 import합니다. 셀을 다시 실행하면 파일이 바뀝니다.",
    "dtypes.operation": "연산 (h = F.linear(x, w))",
    "demo.header": "{'스텝':>5} | {'손실, 스케일러 없음':>15} | {'손실, 스케일러':>13} | {'스케일':>9}",
    "demo.zero": "스케일링이 없으면 가중치 기울기는 스텝 {plain.first_zero_grad_step}부터 정확히 0입니다.",
    "demo.no_matplotlib": "(손실 곡선을 보려면 pip install matplotlib)",
    "demo.fonts":
        "    from matplotlib import font_manager\n"
        "\n"
        "    hangul = [font.name for font in font_manager.fontManager.ttflist\n"
        '              if any(name in font.name for name in ("Nanum", "Noto Sans CJK", "Noto Sans KR", "Malgun", "AppleGothic"))]\n'
        "    if hangul:  # 한글 글꼴이 있으면 그래프의 한글이 네모로 나오지 않습니다\n"
        '        plt.rcParams["font.family"] = hangul[0]\n',
    "demo.label_plain": "fp16 autocast, 손실 스케일링 없음",
    "demo.label_zero": "기울기가 0으로 언더플로",
    "demo.xlabel": "스텝",
    "demo.ylabel": "MSE 손실 (로그 눈금)",
    "demo.title": "float16 기울기 언더플로",
    "mine.not_yet": "아직: {exc}",
    "mine.final": "최종 손실: 스케일러 없음 {plain.final_loss:.2e}, torch의 GradScaler {scaled.final_loss:.2e}, ",
    "mine.final_mine": "여러분의 ToyLossScaler + amp_step {mine.final_loss:.2e}",
    "gpu.skipped": "여기에는 CUDA GPU가 없어 건너뜁니다. fp32와 AMP의 시간을 재려면 이 노트북을 GPU 컴퓨터에서 실행하세요.",
    "gpu.baseline": "기준선은 일반 float32 행렬 곱으로",
    "gpu.fp32": "{torch.cuda.get_device_name()}: fp32 스텝당 {fp32 * 1e3:.1f} ms, ",
    "gpu.amp": "여러분의 amp_step으로 AMP 스텝당 {amp * 1e3:.1f} ms: {fp32 / amp:.2f}배 빠름",
}

#: What otter itself writes in English in the notebook it generates (its init cell, its export cell and the
#: markdown above it), by key: (otter's words, the Korean edition's).  Otter owns these texts, so they are found by
#: its words; a newer otter that rewords one fails ``tests/test_handout_sync.py``.
OTTER_WORDS = {
    "init": ("# Initialize Otter", "# Otter 초기화"),
    "export": ("# Save your notebook first, then run this cell to export your submission.",
               "# 먼저 노트북을 저장한 뒤 이 셀을 실행해 제출물을 내보내세요."),
    "submission": (
        "## Submission\n\nMake sure you have run all cells in your notebook in order before running the cell below, so "
        "that all images/graphs appear in the output. The cell below will generate a zip file for you to submit. "
        "**Please save before exporting!**",
        "## 제출\n\n아래 셀을 실행하기 전에 노트북의 모든 셀을 순서대로 실행해서 모든 이미지와 그래프가 출력에 나오게 하세요. "
        "아래 셀이 제출할 zip 파일을 만듭니다. **내보내기 전에 저장하세요!**"),
}


def otters_words(source: str) -> str:
    """A cell otter generated, with otter's English words (:data:`OTTER_WORDS`) in Korean."""
    for english, korean in OTTER_WORDS.values():
        source = source.replace(english, korean)
    return source
