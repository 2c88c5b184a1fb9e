"""Table 1 and Table 3 of a preset run on the user's own images (a folder dataset): measured rows under the
dataset's own name, and none of the paper's reported rows."""

from __future__ import annotations

import pandas as pd

from put.report.latex import render_latex
from put.report.reported import table1_reported, table3_reported
from put.report.table1 import table1
from put.report.tables import table3
from tests.report_data import body_rows, synthetic_metrics


def test_tables_on_a_folder_name_it_and_carry_no_paper_rows():
    metrics = synthetic_metrics()
    # PUT's rows under a second rule too, as the DAG's evaluation gives them: Table 1's block of PUT's own rule
    pasted = metrics[metrics["variant"] == "put"].assign(rule="pasted")
    metrics = pd.concat([metrics.assign(rule="raw"), pasted], ignore_index=True)
    printed = {f"{v:.3f}" for v in table1_reported()["value"]} | {f"{v:.3f}" for v in table3_reported()["value"]}
    for styler, measured_rows in ((table1(metrics, "ffhq", context=True, data_name="Shop_photos #2"), 4 * 4),
                                  (table3(metrics[metrics["rule"] == "raw"], "ffhq", data_name="Shop_photos #2"),
                                   4 * 6)):
        latex = render_latex(styler)
        assert r"on Shop\_photos \#2 (a folder of the user's images" in latex
        assert "reported" not in latex.replace("so no reported rows", "")  # nor does the caption speak of them
        assert "reported" not in latex.split(r"\endlastfoot", 1)[1] and r"\emph" not in latex
        assert "FFHQ" not in latex and "numbers printed in the paper" not in latex
        rows = body_rows(latex)
        assert len(rows) == measured_rows
        assert not {cell for _, cells in rows for cell in cells} & printed
    # Without a folder name the same preset still shows the paper's FFHQ rows.
    assert "reported, FFHQ" in render_latex(table1(metrics, "ffhq"))
