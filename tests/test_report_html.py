"""The report's tables as HTML (for `snakemake --report` and browsers): the LaTeX markup of the committed demo
tables becomes HTML and MathML, none is left over, and the best values stay bold."""

from __future__ import annotations

import re

from put.metrics.files import read_metrics
from put.report.html import latex_to_html, render_html
from put.report.table1 import table1
from put.report.tables import table3
from tests.helpers import ROOT


def test_latex_markup_becomes_html():
    html = latex_to_html(r"FID $\downarrow$ (\%) \texttt{put weights} Table~1")
    assert html.startswith('FID <math xmlns="http://www.w3.org/1998/Math/MathML" display="inline">')
    assert "&#x02193;" in html and html.endswith("</math> (%) <code>put weights</code> Table&nbsp;1")
    assert "&#x000B1;" in latex_to_html(r"17.3 \pm 0.2")  # a macro outside $...$ is drawn as math


def test_the_demo_tables_leave_no_latex():
    files = [p for p in sorted((ROOT / "results/demo/metrics").glob("*.json")) if not p.name.endswith("_info.json")]
    metrics, _ = read_metrics(files, "demo")
    for styler in (table1(metrics, "demo"), table3(metrics, "demo")):
        html = render_html(styler)
        text = re.sub(r"<[^>]+>", " ", html[html.index("</style>", html.index("</style>") + 1):])
        assert "\\" not in text and "$" not in text, re.findall(r".{20}[\\$].{20}", text)[:3]
        assert "<math" in html and "<b>" in html  # the best values: \textbf in the cell text, <b> in HTML


def test_every_file_of_the_demo_report_has_a_snakemake_caption():
    """`snakemake --report` fails on a report file without a caption: every file the report stage wrote for the
    demo (tables of every kind, CSVs, figures) has one."""
    from put.dag.report_captions import caption, category

    # `.snakemake_timestamp`: Snakemake's own marker, which `make sync` (`snakemake --touch`) leaves in a folder output
    for path in sorted(p for p in (ROOT / "reports" / "demo").iterdir() if not p.name.startswith(".")):
        assert caption(path.name) and category(path.name), path.name
