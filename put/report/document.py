"""The report document: one `report.tex` gathering the generated tables and figures, compiled to PDF."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from put.io.files import atomic_write_text
from put.report.latex import latex_escape, provenance_header

LATEX_PACKAGES = "texlive-latex-base texlive-latex-recommended"
# Characters that break \input / \includegraphics file names (spaces, TeX specials).
_UNSAFE_PATH = re.compile(r"[\s%#&{}$\\^~]")


OVERFULL_TOLERANCE_PT = 1.0  # an overfull box up to this much is invisible on paper


class LatexError(RuntimeError):
    """pdflatex is missing, failed or timed out; the message carries the tail of its log."""


def layout_problems(log: str, tolerance_pt: float = OVERFULL_TOLERANCE_PT) -> list[str]:
    """What in a pdflatex log runs off the text area: a float taller than the page (it runs into the footer) and a
    box overfull by more than `tolerance_pt` (a table wider than the text, a cell's word wider than its column, a
    line that does not break), each with the file it is in."""
    found = []
    pattern = r"Float too large for page by [\d.]+pt on input line \d+|Overfull \\[hv]box \(([\d.]+)pt too \w+\)[^\n]*"
    for match in re.finditer(pattern, log):
        if match.group(1) is None or float(match.group(1)) > tolerance_pt:
            files = re.findall(r"\(\./([^\s()]+\.tex)", log[:match.start()])
            found.append(f"{files[-1] if files else '?'}: {match.group(0)}")
    return found


def _relative(path: str | os.PathLike, out_dir: Path) -> str:
    rel = Path(os.path.relpath(Path(path).resolve(), out_dir.resolve())).as_posix()
    if _UNSAFE_PATH.search(rel):
        raise ValueError(f"{rel!r}: LaTeX cannot include a file whose path has spaces or TeX special characters")
    return rel


def _figures(figure_files: Sequence[str | os.PathLike] | Mapping[str | os.PathLike, str]) -> list[tuple[Path, str]]:
    if isinstance(figure_files, Mapping):
        return [(Path(p), caption) for p, caption in figure_files.items()]
    return [(Path(p), latex_escape(Path(p).stem.replace("_", " "))) for p in figure_files]


APPENDIX_LABEL = "sec:appendix"  # where the main part ends: `main_pages` reads its page from the .aux
MAIN_FIGURE_HEIGHT = r"0.42\textheight"  # two figures to a page in the main part
APPENDIX_FIGURE_HEIGHT = r"0.8\textheight"


def software_section(software: Mapping[str, str]) -> str:
    """A section (of the appendix) listing the software a run used (name -> version, plain text)."""
    rows = "\n".join(f"{latex_escape(name)} & {latex_escape(version)} \\\\" for name, version in software.items())
    return ("\\section{Software}\nThe versions this report was made with "
            "(\\texttt{put.io.versions}; MLflow records the same with every run as tags \\texttt{put.version.*}). "
            "\\texttt{make install} installs exactly \\texttt{requirements.lock}; "
            "\\texttt{make lock} regenerates it.\n\n"
            "\\begin{center}\\small\n\\begin{tabular}{>{\\raggedright\\arraybackslash}p{3.5cm}"
            ">{\\raggedright\\arraybackslash}p{12cm}}\n\\toprule\n"
            f"{rows}\n\\bottomrule\n\\end{{tabular}}\n\\end{{center}}\n")


def _inputs(table_files: Sequence[str | os.PathLike], out_dir: Path) -> str:
    return "\n".join(rf"\input{{{_relative(p, out_dir)}}}" for p in table_files)


def _figure_blocks(figure_files: Sequence[str | os.PathLike] | Mapping[str | os.PathLike, str], out_dir: Path,
                   height: str) -> str:
    return "\n".join(
        "\\begin{figure}[htbp]\n\\centering\n"
        rf"\includegraphics[width=0.9\linewidth,height={height},keepaspectratio]{{{_relative(p, out_dir)}}}"
        f"\n\\caption{{{caption}}}\n\\end{{figure}}" for p, caption in _figures(figure_files))


def main_pages(aux: str) -> int:
    """The pages of the main part of a compiled report, from its .aux: those before the appendix's first page."""
    found = re.search(r"\\newlabel\{" + re.escape(APPENDIX_LABEL) + r"\}\{\{[^{}]*\}\{(\d+)\}", aux)
    if found is None:
        raise ValueError(f"no \\label{{{APPENDIX_LABEL}}} in the .aux: not a report of write_document's, or not "
                         "compiled")
    return int(found.group(1)) - 1


def write_document(out_dir: str | os.PathLike, table_files: Sequence[str | os.PathLike],
                   figure_files: Sequence[str | os.PathLike] | Mapping[str | os.PathLike, str], title: str,
                   command: str, commit: str, notes: Sequence[str] = (),
                   software: Mapping[str, str] | None = None, appendix_tables: Sequence[str | os.PathLike] = (),
                   appendix_figures: Sequence[str | os.PathLike] | Mapping[str | os.PathLike, str] = ()) -> Path:
    """Write `out_dir/report.tex`: tables and figures by paths relative to `out_dir` (so the folder compiles
    anywhere), then an appendix (its tables, figures and `software`). A figure mapping gives captions (else the
    file name); `title` is plain text; `notes` are LaTeX sentences, listed before the appendix's figures."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = _figure_blocks(appendix_figures, out_dir, APPENDIX_FIGURE_HEIGHT)
    if notes:
        figures = "\\paragraph{Not shown.}\n\\begin{itemize}\n" + "".join(f"\\item {n}\n" for n in notes) + \
            "\\end{itemize}\n" + figures
    further = ("\\section{Further tables and figures}\nEvery other measured speed and cost row, the frontier "
               "tables and the remaining figures.\n" + _inputs(appendix_tables, out_dir) + "\n\\clearpage\n" + figures
               if appendix_tables or figures else "")
    generated = f"\\texttt{{{latex_escape(' '.join(command.split()))}}}"  # in a box as wide as the title block's
    body = f"""\\documentclass[10pt]{{article}}
\\usepackage[margin=2cm]{{geometry}}
\\usepackage{{booktabs}}
\\usepackage{{longtable}}
\\usepackage{{array}}
\\usepackage{{graphicx}}
\\usepackage{{caption}}
\\sloppy
\\title{{{latex_escape(title)}}}
\\author{{\\parbox{{\\dimexpr\\textwidth-2\\tabcolsep\\relax}}{{\\centering\\small Generated by {generated}}}}}
\\date{{Commit \\texttt{{{latex_escape(commit or 'unknown')}}}}}
\\begin{{document}}
\\maketitle
{_inputs(table_files, out_dir)}
{_figure_blocks(figure_files, out_dir, MAIN_FIGURE_HEIGHT)}
\\clearpage
\\appendix
\\label{{{APPENDIX_LABEL}}}
{further}
{software_section(software) if software else ""}
\\end{{document}}
"""
    return atomic_write_text(out_dir / "report.tex", provenance_header(command, commit) + body)


def _log_tail(tex_path: Path, fallback: str, lines: int = 40) -> str:
    log = tex_path.with_suffix(".log")
    text = log.read_text(errors="replace") if log.exists() else fallback
    return "\n".join(text.splitlines()[-lines:])


def compile_pdf(tex_path: str | os.PathLike, timeout: float = 120) -> Path:
    """Run pdflatex twice (the second pass settles references) in the file's folder; returns the PDF, after a
    warning line for each part that runs off the page (`layout_problems`).
    Raises LatexError with the tail of the log on failure or timeout, or naming the Debian packages to
    install if pdflatex is missing."""
    tex_path = Path(tex_path).resolve()
    exe = shutil.which("pdflatex")
    if exe is None:
        raise LatexError(f"pdflatex not found on PATH; on Debian/Ubuntu install it with "
                         f"`apt-get install {LATEX_PACKAGES}`")
    if not tex_path.is_file():
        raise FileNotFoundError(tex_path)
    pdf = tex_path.with_suffix(".pdf")
    pdf.unlink(missing_ok=True)  # a stale PDF must not pass for this run's
    cmd = [exe, "-interaction=nonstopmode", "-halt-on-error", "-file-line-error", tex_path.name]
    for _ in range(2):
        try:
            done = subprocess.run(cmd, cwd=tex_path.parent, stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, errors="replace", timeout=timeout)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            raise LatexError(f"pdflatex timed out after {timeout} s on {tex_path}; log tail:\n"
                             f"{_log_tail(tex_path, out)}") from None
        if done.returncode != 0:
            raise LatexError(f"pdflatex failed (exit {done.returncode}) on {tex_path}; log tail:\n"
                             f"{_log_tail(tex_path, done.stdout)}")
    if not pdf.is_file():
        raise LatexError(f"pdflatex reported success but wrote no {pdf.name}; log tail:\n"
                         f"{_log_tail(tex_path, '')}")
    for problem in layout_problems(tex_path.with_suffix(".log").read_text(errors="replace")):
        print(f"warning: {pdf.name}: runs off the page: {problem}", file=sys.stderr)
    return pdf
