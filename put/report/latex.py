"""A built table and its LaTeX: escaping, the booktabs longtable every table is rendered as, and the file written
under a provenance header."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pandas.io.formats.style import Styler

from put.io.files import atomic_write_text

_LATEX_SPECIALS = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                   "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def latex_escape(text: str) -> str:
    """Plain text (file names, reasons, device names) made safe for LaTeX."""
    return "".join(_LATEX_SPECIALS.get(c, c) for c in str(text))


def reason_latex(reason: str) -> str:
    """A plain-text reason made safe for LaTeX; `command` spans become \\texttt."""
    return re.sub(r"`([^`]*)`", r"\\texttt{\1}", latex_escape(reason))


@dataclass
class Table:
    """What a table builder returns: the styled cells (formats, caption, table styles), the notes on why values
    are n/a (already in the caption, and kept under a caller's own caption by `write_latex`) and whether it is a
    table of long texts (`long_table`)."""

    styler: Styler
    notes: str = ""
    long: bool = False


def provenance_header(command: str, commit: str) -> str:
    """LaTeX comment lines naming the generating command and commit (newlines would end the comment)."""
    flat = " ".join(str(command).split())
    return (f"% Generated file: do not edit by hand; regenerate it with the command below.\n"
            f"% Command: {flat}\n% Git commit: {' '.join(str(commit).split()) or 'unknown'}\n")


_CLINE_ROW = re.compile(r"^(\\cline\{\d+-\d+\}\s*)+$")


def _booktabs_rules(latex: str) -> str:
    r"""Styler marks block borders with \cline, whose spacing clashes with booktabs: a border of the outer
    level becomes \midrule, an inner one \cmidrule, and the border after the last row is dropped."""
    lines = latex.splitlines()
    out: list[str] = []
    for i, line in enumerate(lines):
        if not _CLINE_ROW.match(line.strip()):
            out.append(line)
            continue
        spans = re.findall(r"\\cline\{(\d+)-(\d+)\}", line)
        if i + 1 < len(lines) and lines[i + 1].strip() in (r"\bottomrule", r"\end{longtable}"):
            continue
        first, last = min(spans, key=lambda s: int(s[0]))
        out.append(r"\midrule" if first == "1" else rf"\cmidrule(l){{{first}-{last}}}")
    return "\n".join(out) + "\n"


SIZES = ("small", "footnotesize", "scriptsize")  # type sizes a builder may choose (a table style's selector)
_CONTINUED = re.compile(r"^\\caption\[\]\{.*\} \\\\$", re.M)


def render_latex(table: Table, caption: str | None = None, label: str | None = None) -> str:
    """A longtable (booktabs, no multirow: repeated labels are left blank instead): every table breaks across
    pages, so none runs into the page's footer however many rows it has; the caption is repeated as "continued"
    on later pages. The type size (and \\tabcolsep) a builder set as table styles apply around it (\\small by
    default; a `long_table`'s: footnotesize, 3pt)."""
    styler = table.styler
    styles = list(styler.table_styles or [])
    setup = "".join(f"\\{s['selector']}" + "".join(str(v) for _, v in s["props"])
                    for s in styles if s["selector"] in (*SIZES, "setlength"))
    if table.long:
        setup = "\\footnotesize\\setlength{\\tabcolsep}{3pt}"
    elif not any(s["selector"] in SIZES for s in styles):
        setup = "\\small" + setup
    styler.table_styles = [s for s in styles if s["selector"] not in (*SIZES, "setlength")]
    try:
        latex = styler.to_latex(environment="longtable", hrules=True, multirow_align="naive", multicol_align="c",
                                clines="skip-last;data", caption=caption if caption is not None else styler.caption,
                                label=label)
    finally:
        styler.table_styles = styles
    latex = _CONTINUED.sub(lambda _: "\\caption[]{(continued)} \\\\", _booktabs_rules(latex))
    return f"\\begingroup{setup}\n{latex}\\endgroup\n"


def long_table(styler: Styler, widths: Sequence[float], numeric: int = 0) -> Table:
    """A table of long texts: small type (footnotesize, 3pt between columns), ragged-right wrapping columns of
    these widths (cm) and `numeric` right-aligned columns after them."""
    styler.set_table_styles([{"selector": "column_format", "props": ":" + "".join(
        rf">{{\raggedright\arraybackslash}}p{{{w}cm}}" for w in widths) + "r" * numeric + ";"}], overwrite=False)
    return Table(styler, long=True)


def write_latex(table: Table, path: str | os.PathLike, caption: str | None, label: str | None,
                command: str, commit: str) -> Path:
    """Write `table` as a LaTeX table file under a provenance header. `caption=None` keeps the builder's
    caption; a given caption replaces its text but not the notes on why values are n/a."""
    if caption is not None:
        caption = f"{caption} {table.notes}".strip()
    return atomic_write_text(path, provenance_header(command, commit) + render_latex(table, caption, label))
