"""The guide and the design notes keep their promises: README.md stays a short guide, every link, ``make``
target and command it names is real, and docs/security.md's guarantee table names modules and tests that exist.

Text only: nothing here grades or imports torch.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
SECURITY = ROOT / "docs" / "security.md"

#: The guide is for instructors and TAs; release history goes to CHANGELOG.md, dated measurements to docs/speed.md.
MAX_LINES = 300
HISTORY_WORDS = ("this round", "History:", "before this round", "earlier rounds", "last round", "previous round")

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
MAKE = re.compile(r"\bmake ([a-z][a-z0-9_-]*)")
TARGET = re.compile(r"^([a-zA-Z][a-zA-Z0-9_-]*):", re.MULTILINE)
FENCED = re.compile(r"^```.*?^```$", re.MULTILINE | re.DOTALL)


def relative_links(path: Path) -> list[str]:
    """The targets of the Markdown links in ``path`` that point into this repository (no scheme, no anchor).

    A link inside a fenced code block is text, not a link (docs/changing.md shows a README paragraph to paste)."""
    targets = []
    for target in LINK.findall(FENCED.sub("", path.read_text(encoding="utf-8"))):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        targets.append(target.split("#", 1)[0])
    return targets


def test_readme_is_a_short_guide() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines; move details to docs/"
    for heading in ("## Two commands", "## Who does what", "## Platforms", "## Points", "## Outputs",
                    "## What the grader guarantees"):
        assert heading in lines, heading


def test_readme_holds_no_release_history() -> None:
    text = README.read_text(encoding="utf-8")
    found = [word for word in HISTORY_WORDS if word.lower() in text.lower()]
    assert found == [], f"history belongs in CHANGELOG.md or docs/speed.md: {found}"


def test_readme_keeps_the_two_commands() -> None:
    """`make grade` and `make test` on a fresh machine are the contract with instructors."""
    text = README.read_text(encoding="utf-8")
    assert re.search(r"^make grade\s+#", text, re.MULTILINE)
    assert re.search(r"^make test\s+#", text, re.MULTILINE)


@pytest.mark.parametrize("doc", [README, *DOCS], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_points_to_a_file(doc: Path) -> None:
    links = relative_links(doc)
    missing = [target for target in links if not (doc.parent / target).exists()]
    assert missing == [], f"{doc.relative_to(ROOT)} links to files that do not exist: {missing}"


def test_the_readme_links_to_the_design_notes() -> None:
    links = {str((README.parent / target).resolve().relative_to(ROOT)) for target in relative_links(README)}
    for doc in ("docs/security.md", "docs/speed.md", "docs/layout.md", "docs/validation.md", "CHANGELOG.md"):
        assert doc in links, doc


def test_every_make_target_named_in_the_readme_exists() -> None:
    targets = set(TARGET.findall((ROOT / "Makefile").read_text(encoding="utf-8")))
    named = set(MAKE.findall(README.read_text(encoding="utf-8")))
    assert {"grade", "test", "test-all"} <= named
    assert sorted(named - targets) == []


def test_every_autograder_command_in_the_readme_parses() -> None:
    """Each ``python -m autograder SUB ...`` line names a real subcommand and only options it accepts."""
    from autograder import cli

    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.choices and isinstance(a.choices, dict))
    commands = re.findall(r"python -m autograder ([a-z-]+)([^\n`]*)", README.read_text(encoding="utf-8"))
    assert len(commands) >= 4
    for sub, rest in commands:
        assert sub in subparsers.choices, sub
        options = set(subparsers.choices[sub]._option_string_actions)
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", rest.split("#", 1)[0]):
            assert option in options, f"python -m autograder {sub}: no option {option}"


def guarantee_rows() -> list[tuple[str, str, str]]:
    text = SECURITY.read_text(encoding="utf-8")
    table = text.split("## Guarantee → where enforced → test", 1)[1]
    rows = []
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if line.startswith("|") and len(cells) == 3 and cells[0] not in ("Guarantee", "---"):
            rows.append((cells[0], cells[1], cells[2]))
    return rows


def test_every_guarantee_names_where_it_is_enforced_and_its_test() -> None:
    rows = guarantee_rows()
    assert len(rows) >= 20
    for guarantee, enforced, test in rows:
        assert re.search(r"`[\w./-]+\.py`", enforced), f"no module for: {guarantee}"
        assert re.search(r"test_\w+\.py|`[A-Z_]+`", test), f"no test for: {guarantee}"


def test_the_modules_and_tests_of_the_guarantee_table_exist() -> None:
    missing = []
    for guarantee, enforced, tests in guarantee_rows():
        for path in re.findall(r"`([\w./-]+\.py)`", enforced):
            if not (ROOT / path).is_file():
                missing.append(path)
        current = None
        for file, name in re.findall(r"(test_\w+\.py)?(?:::(\w+))?", tests):
            if file:
                current = ROOT / "tests" / file
                if not current.is_file():
                    missing.append(file)
            if name:
                assert current is not None, f"'::{name}' before any file in: {guarantee}"
                if not re.search(rf"^(?:async )?def {name}\(", current.read_text(encoding="utf-8"), re.MULTILINE):
                    missing.append(f"{current.name}::{name}")
    assert missing == []


def test_the_tests_index_lists_every_test_file_and_only_those() -> None:
    """tests/README.md, the index a newcomer reads by area: every test file is in it, and every file it names exists."""
    index = (ROOT / "tests" / "README.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(test_[a-z0-9_]+\.py)`", index))
    files = {path.name for path in (ROOT / "tests").glob("test_*.py")}
    assert not files - named, f"tests/README.md does not list {sorted(files - named)}"
    assert not named - files, f"tests/README.md names files that do not exist: {sorted(named - files)}"
