"""HTML renderings of the LaTeX tables, for viewers that show HTML but not LaTeX (`snakemake --report`, a
browser): the same pandas Styler written with `to_html`, its LaTeX markup turned into HTML (math as MathML,
which browsers draw natively, via latex2mathml)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from put.io.files import atomic_write_text
from put.report.latex import Table

_MATH = re.compile(r"\$([^$]+)\$")
_TEXT_MACROS = [(re.compile(r"\\texttt\{([^{}]*)\}"), r"<code>\1</code>"),
                (re.compile(r"\\textbf\{([^{}]*)\}"), r"<b>\1</b>"),
                (re.compile(r"\\emph\{([^{}]*)\}"), r"<em>\1</em>"),
                (re.compile(r"\\([%&_#])"), r"\1"), (re.compile(r"~"), "&nbsp;")]


def _math(latex: str) -> str:
    from latex2mathml.converter import convert

    return convert(latex.replace(r"\rm ", r"\mathrm "))


def _other_macro(match: re.Match) -> str:
    """A text-mode macro not in _TEXT_MACROS (\\pm, \\times ...): as math, or left as it is (tests/test_report_html.py
    checks that the report's tables leave none)."""
    try:
        return _math(match.group(0))
    except Exception:
        return match.group(0)


def latex_to_html(text: str) -> str:
    """Text with inline LaTeX (`$...$` math, \\texttt, \\textbf, \\%, ~) as HTML."""
    parts = []
    for i, part in enumerate(_MATH.split(text)):
        if i % 2:
            parts.append(_math(part))
            continue
        for pattern, replacement in _TEXT_MACROS:
            part = pattern.sub(replacement, part)
        parts.append(re.sub(r"\\[A-Za-z]+(\{[^{}]*\})?", _other_macro, part))
    return "".join(parts)


def render_html(table: Table) -> str:
    html = table.styler.to_html(doctype_html=False)
    style_end = html.index("</style>") + len("</style>") if "</style>" in html else 0
    css = html[:style_end]  # bold comes inline (\textbf from tables.cell_text), turned into <b> by latex_to_html
    return ("<style>table { border-collapse: collapse; font-family: sans-serif; font-size: 14px; } "
            "th, td { padding: 2px 8px; } caption { caption-side: bottom; text-align: left; }</style>\n"
            + css + latex_to_html(html[style_end:]))


def write_html(table: Table, path: str | os.PathLike) -> Path:
    """The table as an HTML file (what `write_latex` writes as LaTeX), for viewing."""
    return atomic_write_text(path, render_html(table))
