"""`dvc plots`: one Vega-Lite template per declared plot (`.dvc/plots/put_<name>.json`, written by `put dag`
beside dvc.yaml, checked current by a test) and the offline page they are shown in. What ours change from DVC's
own templates (docs/dvc-snakemake.md, "dvc plots")."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from put.config import PALETTE, PVQVAE_VARIANTS, VARIANT_COLOURS, VARIANTS
from put.dag.declaration import PLOTS, Plot
from put.io.code import ROOT

TEMPLATE_DIR = ROOT / ".dvc" / "plots"  # DVC's folder of custom templates
ANCHOR = "<DVC_METRIC_{}>"


def template_name(plot: Plot) -> str:
    return f"put_{plot.name}"


def series_expression(plot: Plot) -> str:
    """The variant of a row's file: the path component at the pattern's `{variant}` / `{pvqvae}` place, read
    from the end of the path (DVC may show the files' paths shortened to where they differ)."""
    if plot.series is not None:
        return plot.series
    tail = re.split(r"\{(?:variant|pvqvae)\}", plot.pattern)[-1]
    return f"replace(datum.filename, regexp('^(?:.*/)?([^/]+){re.escape(tail)}$'), '$1')"


def colour_scale(plot: Plot) -> dict[str, Any]:
    """Variants in their colours (the same in the report's figures and on the serve page); other series (the
    frontier's sampling families) in Vega's category10."""
    if plot.series_title == "variant":
        shown = PVQVAE_VARIANTS if plot.over == "pvqvae_variants" else VARIANTS
        return {"domain": list(shown), "range": [VARIANT_COLOURS[v] for v in shown] + list(PALETTE[len(VARIANTS):])}
    return {"scheme": "category10"}


def start_layers(plot: Plot) -> list[dict[str, Any]]:
    """Per `Plot.starts`: a dashed rule, in the series' colour, at the first x where the column has a value, and its
    label."""
    layers = []
    for column, label in plot.starts:
        first = [{"filter": f"datum['{column}'] != null && datum['{column}'] !== ''"},
                 {"aggregate": [{"op": "min", "field": ANCHOR.format("X"), "as": "start"}],
                  "groupby": ["series", "rev"]}]
        x = {"field": "start", "type": "quantitative"}
        layers += [{"transform": first, "mark": {"type": "rule", "strokeDash": [6, 4], "strokeWidth": 1.5},
                    "encoding": {"x": x, "color": {"field": "series", "type": "nominal",
                                                   "scale": colour_scale(plot)}}},
                   {"transform": [*first, {"aggregate": [{"op": "min", "field": "start", "as": "start"}]}],
                    "mark": {"type": "text", "align": "right", "baseline": "top", "dx": -4, "dy": 4, "fontSize": 10},
                    "encoding": {"x": x, "y": {"value": 0}, "text": {"value": label}}}]
    return layers


def template(plot: Plot) -> dict[str, Any]:
    x_scale: dict[str, Any] = {"type": "log"} if plot.log_x else {"zero": False}
    mark: dict[str, Any] = {"type": plot.mark, "tooltip": {"content": "data"}}
    if plot.mark == "line":
        mark["point"] = True
    else:
        mark.update(filled=True, size=60)
    curves = {
        "mark": mark,
        "encoding": {
            "x": {"field": ANCHOR.format("X"), "type": "quantitative", "title": ANCHOR.format("X_LABEL"),
                  "scale": x_scale},
            "y": {"field": ANCHOR.format("Y"), "type": "quantitative", "title": ANCHOR.format("Y_LABEL"),
                  "scale": {"zero": False}},
            "color": {"field": "series", "type": "nominal", "title": plot.series_title, "scale": colour_scale(plot)},
            # the revision (workspace, a commit, an experiment): a line's dash, a point's shape
            "strokeDash" if plot.mark == "line" else "shape": {"field": "rev", "type": "nominal", "title": "revision"},
        },
    }
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "data": {"values": ANCHOR.format("DATA")},
        "title": ANCHOR.format("TITLE"),
        "width": 420, "height": 280,
        "transform": [{"calculate": series_expression(plot), "as": "series"}],
        **({"layer": [curves, *start_layers(plot)]} if plot.starts else curves),
    }


def rendered() -> dict[Path, str]:
    return {TEMPLATE_DIR / f"{template_name(p)}.json": json.dumps(template(p), indent=2) + "\n" for p in PLOTS}


def stale() -> list[Path]:
    return [path for path, text in rendered().items() if not path.is_file() or path.read_text() != text]


def write() -> list[Path]:
    """Writes the templates that changed; returns them."""
    changed = stale()
    TEMPLATE_DIR.mkdir(parents=True, exist_ok=True)
    texts = rendered()
    for path in changed:
        path.write_text(texts[path])
    return changed
