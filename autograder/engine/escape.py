"""Escaping for everything that comes from input (file names, metadata, student output, messages).

One function per destination, each total and linear-time:

* :func:`csv_cell`: spreadsheet formula injection (a cell starting with ``= + - @``, tab or CR
  is read as a formula by Excel/Sheets): such text gets a leading ``'``.
* :func:`markdown_inline`: Markdown and HTML in running text or a table cell (``feedback.md``,
  ``summary.md``): control characters and line breaks become spaces, ``& < >`` become
  entities and Markdown's formatting characters are backslash-escaped, so ``**Score: 90 / 90**`` or
  ``<img onerror=…>`` show as typed.
* :func:`html_text`: HTML element content and quoted attribute values (the similarity report).
* :func:`console`: ``rich`` markup (``[/b]`` made the final table raise) and terminal
  control sequences (escape codes reached the TA's terminal) for console output.
"""

from __future__ import annotations

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")
_MARKDOWN_SPECIAL = set("\\`*[]|~")
_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def is_control(char: str) -> bool:
    """C0/C1 control characters and DEL (tab and newline included), plus bidi overrides."""
    code = ord(char)
    return code < 0x20 or 0x7F <= code < 0xA0 or 0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069


def strip_controls(text: str, keep_newlines: bool = False, keep_tabs: bool = False) -> str:
    """``text`` with control characters replaced by spaces (newlines and tabs kept when asked)."""
    kept = ("\n" if keep_newlines else "") + ("\t" if keep_tabs else "")
    return "".join(c if c in kept or not is_control(c) else " " for c in text)


def csv_cell(value: object) -> object:
    """A CSV cell that no spreadsheet evaluates: text starting with a formula prefix gets a ``'``."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def markdown_inline(text: object) -> str:
    """``text`` shown literally in one line of Markdown (also safe inside a table cell).

    Escapes what can start formatting mid-line: backslash, backtick, ``*``, ``~``, brackets (links,
    images), ``|`` (table cells), ``_`` unless inside a word (where CommonMark never reads it as
    emphasis: ``submission_101`` stays readable), and ``& < >`` as HTML entities.  The callers never
    put input at the start of a line, where ``#``, ``-`` or ``+`` would matter.
    """
    chars = strip_controls(str(text))
    out = []
    for k, char in enumerate(chars):
        if char in _HTML:
            out.append(_HTML[char])
        elif char == "_":
            inside_word = 0 < k < len(chars) - 1 and chars[k - 1].isalnum() and chars[k + 1].isalnum()
            out.append("_" if inside_word else "\\_")
        elif char in _MARKDOWN_SPECIAL:
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def html_text(text: object) -> str:
    """``text`` safe inside HTML element content and quoted attribute values, with no control characters (a
    terminal escape in a name or an output would reach whoever copies the page into a terminal)."""
    import html

    return html.escape(strip_controls(str(text), keep_newlines=True, keep_tabs=True), quote=True)  # code keeps tabs


def console(text: object) -> str:
    """``text`` safe to hand to ``rich`` (markup escaped) and to a terminal (no control characters)."""
    from rich.markup import escape

    return escape(strip_controls(str(text)))
