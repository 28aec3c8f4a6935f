"""The Korean handout (``assignment/README.ko.md``) is kept in step with the English one.

Section by section (every ``#`` heading, in order), the two editions must have:

* headings of the same level, with the same numbers and inline code (``### 7. ...``,
  ``### Task 1: `loss_scaler.py` ...`` / ``### 과제 1: `loss_scaler.py` ...``);
* identical fenced blocks (code, examples, outputs), in the same order;
* the same numbers in the prose (as a multiset: Korean word order differs), tables included; the Korean
  prose may write "0" where the English says "zero";
* the same inline code spans (file names, signatures, API names).

A change to the English handout that is not carried into the Korean one fails here with a
message naming the section.  ``tests/test_handout.py`` executes the Korean examples and tables
exactly as the English ones; the Korean notebook is checked here against the English one.
"""

from __future__ import annotations

import collections
import re
from typing import Any

import pytest

import handout_examples as hx

ENGLISH = hx.HANDOUT.read_text(encoding="utf-8")
KOREAN = hx.KOREAN_HANDOUT.read_text(encoding="utf-8")
_INLINE_CODE = re.compile(r"`([^`]+)`")
_ZERO = re.compile(r"\bzero\b", re.IGNORECASE)


def split_sections(text: str) -> list[tuple[str, str]]:
    """(heading, body) of every section, in order; body excludes the heading line."""
    lines = text.splitlines()
    marks = hx.headings(text)
    return [(heading, "\n".join(lines[index + 1:(marks[i + 1][0] if i + 1 < len(marks) else len(lines))]))
            for i, (index, heading) in enumerate(marks)]


def _prose(body: str) -> str:
    """``body`` without its fenced blocks."""
    return re.sub(r"^```.*?^```[ \t]*$", "", body, flags=re.MULTILINE | re.DOTALL)


def _inline_code(text: str) -> set[str]:
    """The inline code spans of ``text`` (a span may break across lines: whitespace is normalised)."""
    return {" ".join(span.split()) for span in _INLINE_CODE.findall(text)}


def _heading_key(heading: str) -> tuple[int, list[str], list[str]]:
    level = len(heading) - len(heading.lstrip("#"))
    return level, hx.numbers(_INLINE_CODE.sub("", heading)), _INLINE_CODE.findall(heading)


def sync_problems(english: str, korean: str) -> list[str]:
    """Every way ``korean`` is out of step with ``english``; each message names the section."""
    ours, theirs = split_sections(english), split_sections(korean)
    if len(ours) != len(theirs):
        names = "\n".join(f"  {h}" for h, _ in ours)
        return [f"the English handout has {len(ours)} sections, the Korean one {len(theirs)}; English sections:\n{names}"]
    problems = []
    for number, ((en_heading, en_body), (ko_heading, ko_body)) in enumerate(zip(ours, theirs), 1):
        where = f"section {number} ({en_heading!r} / {ko_heading!r})"
        if _heading_key(en_heading) != _heading_key(ko_heading):
            problems.append(f"{where}: the headings differ in level, numbers or code")
        en_blocks, ko_blocks = hx.blocks(en_body), hx.blocks(ko_body)
        if len(en_blocks) != len(ko_blocks):
            problems.append(f"{where}: {len(en_blocks)} code blocks in English, {len(ko_blocks)} in Korean")
        for index, (en_block, ko_block) in enumerate(zip(en_blocks, ko_blocks), 1):
            if (en_block.info, en_block.text) != (ko_block.info, ko_block.text):
                problems.append(f"{where}: code block {index} differs (it must be identical):\n"
                                f"--- English\n{en_block.text}--- Korean\n{ko_block.text}")
        en_numbers = collections.Counter(hx.numbers(_prose(en_body)))
        ko_numbers = collections.Counter(hx.numbers(_prose(ko_body)))
        zeros = min(len(_ZERO.findall(_prose(en_body))), (ko_numbers - en_numbers)["0"])
        en_numbers["0"] += zeros  # "zero" written as a digit
        if en_numbers != ko_numbers:
            problems.append(f"{where}: the numbers differ: only in English {sorted((en_numbers - ko_numbers).elements())}, "
                            f"only in Korean {sorted((ko_numbers - en_numbers).elements())}")
        en_code, ko_code = _inline_code(_prose(en_body)), _inline_code(_prose(ko_body))
        if en_code != ko_code:
            problems.append(f"{where}: the inline code differs: only in English {sorted(en_code - ko_code)}, "
                            f"only in Korean {sorted(ko_code - en_code)}")
    return problems


def test_korean_handout_is_in_step_with_the_english_one() -> None:
    problems = sync_problems(ENGLISH, KOREAN)
    assert not problems, "assignment/README.ko.md is out of step with README.md:\n\n" + "\n\n".join(problems)


def test_korean_handout_is_korean() -> None:
    hangul = sum("\uac00" <= ch <= "\ud7a3" for ch in _prose(KOREAN))
    assert hangul > 5000, f"only {hangul} Hangul syllables outside code blocks: is the prose translated?"


# --------------------------------------------------------------------------- the sync check can fail


def _mutated(text: str, old: str, new: str) -> str:
    assert text.count(old) >= 1, old
    return text.replace(old, new, 1)


def test_a_changed_code_block_is_reported_with_its_section() -> None:
    english = _mutated(ENGLISH, "scaler = torch.amp.GradScaler(\"cuda\")                  # init_scale=2**16 by default",
                       "scaler = torch.amp.GradScaler(\"cuda\", init_scale=1024)  # init_scale=2**16 by default")
    [problem] = sync_problems(english, KOREAN)
    assert "5. Loss scaling and `torch.amp.GradScaler`" in problem and "code block 2 differs" in problem


def test_a_changed_example_result_is_reported_with_its_section() -> None:
    korean = _mutated(KOREAN, "tensor([inf, inf], dtype=torch.float16)", "tensor([inf, 65536.], dtype=torch.float16)")
    problems = sync_problems(ENGLISH, korean)
    assert len(problems) == 1 and "Task 1: `loss_scaler.py`" in problems[0] and "differs" in problems[0]


def test_a_changed_number_is_reported_with_its_section() -> None:
    english = _mutated(ENGLISH, "`growth_interval` (2000)", "`growth_interval` (1000)")
    [problem] = sync_problems(english, KOREAN)
    assert "7. How the scale moves" in problem and "only in English ['1000']" in problem


def test_zero_may_be_written_as_a_digit_but_no_other_number_may_appear() -> None:
    english = "# T\n\nThe gradient rounds to zero.\n"
    assert sync_problems(english, "# T\n\n기울기가 0으로 반올림됩니다.\n") == []
    assert sync_problems(english, "# T\n\n기울기가 영으로 반올림됩니다.\n") == []
    [problem] = sync_problems(english, "# T\n\n기울기가 0으로, 또 0으로 반올림됩니다.\n")
    assert "only in Korean ['0']" in problem
    [problem] = sync_problems(english, "# T\n\n기울기가 1로 반올림됩니다.\n")
    assert "only in Korean ['1']" in problem


def test_a_missing_section_is_reported() -> None:
    english = ENGLISH.replace("### 9. Old API, new API", "### 9. Old API, new API\n\n### 9b. A new section", 1)
    [problem] = sync_problems(english, KOREAN)
    assert "sections" in problem and "9b. A new section" in problem


# --------------------------------------------------------------------------- the Korean notebook


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The shipped English notebook, the shipped Korean one, and a fresh Korean build."""
    pytest.importorskip("otter", reason='otter-grader is not installed: pip install -e ".[otter]"')
    nbformat = pytest.importorskip("nbformat")
    from autograder.packaging import notebook_build

    out = tmp_path_factory.mktemp("notebook-ko") / "amp_homework.ko.ipynb"
    notebook_build.build(out, language="ko")
    folder = hx.ROOT / "assignment"
    return {"en": nbformat.read(folder / "amp_homework.ipynb", as_version=4),
            "ko": nbformat.read(folder / "amp_homework.ko.ipynb", as_version=4),
            "built": nbformat.read(out, as_version=4)}


def code_only(source: str) -> str:
    """A code cell without its whole-line comments (the only text an edition translates in code cells)."""
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith("#"))


def values_of_test_file(source: str) -> dict[str, Any]:
    """The literal values an otter test file assigns (its rows, words and bridge digest)."""
    import ast

    return {node.targets[0].id: ast.literal_eval(node.value) for node in ast.parse(source).body
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id.startswith("AMP_")}


def test_shipped_korean_notebook_is_up_to_date(notebooks: dict[str, Any]) -> None:
    assert notebooks["ko"] == notebooks["built"], "stale Korean notebook: run make notebook AMP_LANGUAGE=ko"


def test_korean_notebook_has_the_english_cells_and_tests(notebooks: dict[str, Any]) -> None:
    english, korean = notebooks["en"], notebooks["ko"]
    assert [c.cell_type for c in english.cells] == [c.cell_type for c in korean.cells]
    from autograder.packaging import notebook_build, notebook_en, notebook_ko, release

    # Each code cell is one of the notebook's own, filled from each edition's texts; or a task cell, whose stubs
    # raise each edition's prompt; or otter's, in each edition's words (its init cell opens the edition's notebook).
    templates = [value for name, value in vars(notebook_en).items() if name.isupper() and isinstance(value, str)
                 and "«" in value]
    stubs = {}
    for name in notebook_build.TASK_FILES.values():
        source = (hx.ROOT / "solutions" / name).read_text(encoding="utf-8")
        stubs.update((en_line, ko_line) for en_line, ko_line in zip(
            release.strip_solution(source, name).splitlines(),
            release.strip_solution(source, name, notebook_ko.PROMPT).splitlines()) if en_line != ko_line)
    assert len(stubs) >= 3
    install = {notebook_build.install_source(texts["install.comment"]): language
               for language, texts in (("en", notebook_en.CODE_TEXTS), ("ko", notebook_ko.CODE_TEXTS))}
    for en_cell, ko_cell in zip(english.cells, korean.cells):
        if en_cell.cell_type != "code":
            continue
        ours = [t for t in templates if notebook_build.code_cell_source(t, notebook_en.CODE_TEXTS) == en_cell.source]
        if ours:
            assert notebook_build.code_cell_source(ours[0], notebook_ko.CODE_TEXTS) == ko_cell.source
        elif en_cell.source in install:
            assert install.get(ko_cell.source) == "ko"
        else:
            lines = [stubs.get(line, line) for line in en_cell.source.split("\n")]
            en_source = "\n".join(lines).replace("amp_homework.ipynb", "amp_homework.ko.ipynb")
            assert notebook_ko.otters_words(en_source) == ko_cell.source
    otter = {language: nb.metadata["otter"] for language, nb in (("en", english), ("ko", korean))}
    assert {k: v for k, v in otter["en"].items() if k != "tests"} == {k: v for k, v in otter["ko"].items() if k != "tests"}
    assert otter["en"]["tests"].keys() == otter["ko"]["tests"].keys()
    for question, english_test in otter["en"]["tests"].items():  # the same rows and bridge, in the edition's words
        en, ko = values_of_test_file(english_test), values_of_test_file(otter["ko"]["tests"][question])
        assert en["AMP_BRIDGE"] == ko["AMP_BRIDGE"]
        assert [row[:1] + row[2:] for row in en["AMP_ROWS"]] == [row[:1] + row[2:] for row in ko["AMP_ROWS"]]
        assert all(re.search("[\uac00-\ud7a3]", row[1]) for row in ko["AMP_ROWS"]), ko["AMP_ROWS"]  # Korean titles
        assert (en["AMP_WORDS"]["language"], ko["AMP_WORDS"]["language"]) == ("en", "ko")
    markdown = "\n".join(c.source for c in korean.cells if c.cell_type == "markdown")
    assert "과제 1" in markdown and "README.ko.md" in markdown and "Write your code" not in markdown
    assert "## Submission" not in markdown and "## 제출" in markdown  # otter's own cell, in Korean
    assert notebook_ko.CODE_TEXTS.keys() == notebook_en.CODE_TEXTS.keys()  # the same texts, keyed alike
    used = {key for key in notebook_en.CODE_TEXTS if any(f"«{key}»" in t for t in templates)} | {"install.comment"}
    assert used == notebook_en.CODE_TEXTS.keys(), f"texts no code cell shows: {notebook_en.CODE_TEXTS.keys() - used}"
    english_code = "\n".join(c.source for c in english.cells)
    assert all(words[0] in english_code for words in notebook_ko.OTTER_WORDS.values())  # otter still says them
    korean_code = "\n".join(c.source for c in korean.cells if c.cell_type == "code")
    assert "is not implemented yet" not in korean_code and "아직 구현되지 않았습니다" in korean_code
