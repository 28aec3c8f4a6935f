"""The class report's page parts: its style sheet, its one script and the policy that lets nothing else run, and the
helpers each section draws its HTML with (each caller escapes what it puts in a cell; these escape the rest).

:mod:`autograder.diagnosis.report_html` draws report.html with them, and
:mod:`autograder.diagnosis.report_similarity` its similarity and regrade sections.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Sequence

from autograder.engine.escape import html_text

#: Sorts the students table by the column whose heading is clicked (a button the script puts in each heading):
#: ascending, then descending; a column whose every cell starts with a number ("77 / 90", "3: 1.5, …", a SID) by
#: that number, any other as text (numbers inside it in order), "-" (nothing) last either way, ties in the
#: gradebook's order; the sorted heading says so (aria-sort, and an arrow).  A truncated cell shows its whole text
#: on hover.  Plain DOM calls, no request: the page stays one file that works from file://.
SCRIPT = """(function () {
  var table = document.getElementById('student-table');
  if (!table || !table.tHead || !table.tBodies.length) return;
  var body = table.tBodies[0], heads = table.tHead.rows[0].cells, rows = Array.prototype.slice.call(body.rows);
  var number = /^\\s*(-?\\d+(?:\\.\\d+)?)/;
  var collator = new Intl.Collator(document.documentElement.lang || undefined, {numeric: true});
  function sort(column, direction) {
    var keys = rows.map(function (row) {
      var text = row.cells[column] ? row.cells[column].textContent.trim() : '';
      return text === '-' ? '' : text;
    });
    var numeric = keys.every(function (key) { return key === '' || number.test(key); });
    var sign = direction === 'ascending' ? 1 : -1;
    var order = rows.map(function (row, index) { return index; });
    order.sort(function (a, b) {
      var x = keys[a], y = keys[b];
      if (x === '' || y === '') return (x === '') - (y === '') || a - b;
      var by = numeric ? parseFloat(number.exec(x)[1]) - parseFloat(number.exec(y)[1]) : collator.compare(x, y);
      return sign * by || a - b;
    });
    order.forEach(function (index) { body.appendChild(rows[index]); });
    Array.prototype.forEach.call(heads, function (head, at) {
      if (at === column) head.setAttribute('aria-sort', direction); else head.removeAttribute('aria-sort');
    });
  }
  Array.prototype.forEach.call(heads, function (head, column) {
    var button = document.createElement('button');
    button.type = 'button';
    while (head.firstChild) button.appendChild(head.firstChild);
    head.appendChild(button);
    button.addEventListener('click', function () {
      sort(column, head.getAttribute('aria-sort') === 'ascending' ? 'descending' : 'ascending');
    });
  });
  table.addEventListener('mouseover', function (event) {
    var cell = event.target.closest && event.target.closest('td, th');
    var box = cell && (cell.querySelector('button') || cell);
    if (box && !cell.title && box.scrollWidth > box.clientWidth) cell.title = cell.textContent.trim();
  });
  var hint = document.getElementById('sort-hint');
  if (hint) hint.hidden = false;
})();"""


#: What the policy lets run: :data:`SCRIPT`, by its digest (an inline script the page did not write never runs).
SCRIPT_SOURCE = "'sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode("utf-8")).digest()).decode("ascii") + "'"


#: No other script, no request: whatever a submission's name smuggled in could neither run nor reach the network.
POLICY = f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {SCRIPT_SOURCE}"


#: Hangul breaks between words, never inside one (word-break:keep-all: 학생 and 점수 stay whole in a narrow column, as
#: English words do); a file's similarity never wraps; a long token with no space still wraps rather than widening a
#: table (overflow-wrap:break-word does not shrink a column below its longest word, as anywhere would).
#: The students table is as wide as the page and lays its columns out from the headings' widths (table-layout:fixed:
#: no cell's text widens it): the narrow columns in em (their numbers, SIDs and Hangul headings whole), the others
#: share the rest; each cell holds one line (a fixed line height, whatever font a Hangul name falls back on) and
#: ends in "…" where it overflows.
STYLE = """body{font-family:sans-serif;margin:2em;max-width:90em;word-break:keep-all;overflow-wrap:break-word}
table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #bbb;padding:.25em .6em;text-align:left;vertical-align:top}th{background:#eee}
.nowrap{white-space:nowrap}
.low{background:#fde2e2}.flag{color:#a00000;font-weight:bold}.note{color:#555}
section{margin-bottom:2em}img{max-width:100%;height:auto}
#student-table{table-layout:fixed;width:100%;font-size:.875em}
#student-table td,#student-table th{white-space:nowrap;overflow:hidden;text-overflow:ellipsis;line-height:1.5}
#student-table th:nth-child(1){width:13%}#student-table th:nth-child(2){width:11%}
#student-table th:nth-child(3){width:6em}#student-table th:nth-child(4){width:7em}
#student-table th:nth-child(5){width:11em}
#student-table th button{font:inherit;color:inherit;background:none;border:0;padding:0;margin:0;text-align:inherit;
display:block;width:100%;overflow:hidden;text-overflow:ellipsis;cursor:pointer}
#student-table th button:focus-visible{outline:2px solid #06c}
#student-table th button::after{content:" \\2195";color:#888;font-weight:normal}
#student-table th[aria-sort=ascending] button::after{content:" \\25B2";color:inherit}
#student-table th[aria-sort=descending] button::after{content:" \\25BC";color:inherit}
#student-table tbody tr:hover{background:#f4f8ff}
.entry{margin:.4em 0;padding:.3em .6em;border-left:3px solid #bbb}.entry:target{border-color:#06c;background:#f4f8ff}
.entry h3{font-size:1em;margin:.2em 0}.entry dl{margin:.2em 0}.entry dt{font-weight:bold;margin-top:.3em}
.entry dd{margin-left:1.5em}.entry dd.rows{columns:24em}.entry .whole{white-space:pre-wrap}"""


def html_table(header: Sequence[str], rows: Sequence[Sequence[str]], table_id: str = "") -> str:
    """A table of cells that are already HTML (each caller escapes what it puts in)."""
    head = "".join(f"<th>{html_text(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    ident = f' id="{table_id}"' if table_id else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def html_link(href: str, text: str) -> str:
    return f'<a href="{html_text(href)}">{html_text(text)}</a>'


def html_lines(items: Sequence[str]) -> str:
    return "<br>".join(items) or "-"
