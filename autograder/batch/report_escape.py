"""Escaping for text that comes from submissions (names, file content) in reports.

Local to the similarity and regrade reports for now (issue 14); the lead folds these into
the shared helpers of issue 11.
"""

from __future__ import annotations

import html
import re

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+\-.!|~])")


def html_text(text: object) -> str:
    """``text`` safe inside HTML element content and quoted attribute values."""
    return html.escape(str(text), quote=True)


def csv_cell(value: object) -> object:
    """A CSV cell a spreadsheet will not run as a formula (``=``, ``+``, ``-``, ``@``, tab, CR first).

    Numbers pass through unchanged (a negative score is a number, not a formula).
    """
    if isinstance(value, (int, float)):
        return value
    text = str(value)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def markdown_text(text: object) -> str:
    """``text`` shown literally in Markdown (inline, also inside a table cell)."""
    one_line = " ".join(str(text).split())
    return _MARKDOWN_SPECIAL.sub(r"\\\1", one_line)
