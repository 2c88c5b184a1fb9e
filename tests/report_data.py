"""Inputs for the report's tables and plots that the report tests share (tests/test_report.py, test_report_folder.py,
test_tpami.py): synthetic metrics and curves of the six variants, a benchmark row, and the data rows of a LaTeX
table."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from put.report.reported import GROUPS, table1_reported, table3_reported

VARIANTS = ("put", "conv", "one", "no_ref", "tok", "qua0")
FINE = ("10-20", "20-30", "30-40", "40-50", "50-60")
REASON = "Inception weights missing: put pt_inception.pth in $TORCH_HOME/hub"

RANGES = {"psnr": (18, 32, 3), "ssim": (0.7, 0.99, 3), "mae": (0.005, 0.06, 4), "fid": (5, 60, 3)}


def _distinct_values(rng: np.random.Generator, metric: str, size: int) -> np.ndarray:
    """Values on the printed grid, pairwise distinct and distinct from every reported number, so that
    each column's best is unique as printed (ties would rightly be bold twice)."""
    lo, hi, decimals = RANGES[metric]
    grid = np.round(np.arange(lo, hi, 10.0 ** -decimals), decimals)
    reported = set(pd.concat([table1_reported(), table3_reported()]).query("metric == @metric")["value"])
    grid = np.array([v for v in grid if v not in reported])
    return rng.choice(grid, size=size, replace=False)


def synthetic_metrics(fid_unavailable: bool = False, seed: int = 0) -> pd.DataFrame:
    """All six variants x three groups x two modes; no two values print alike."""
    rng = np.random.default_rng(seed)
    keys = [(v, g, m) for v in VARIANTS for g in GROUPS for m in ("all", "k50")]
    frame = pd.DataFrame(keys, columns=["variant", "group", "mode"])
    for metric in RANGES:
        frame[metric] = _distinct_values(rng, metric, len(frame))
    if fid_unavailable:
        frame["fid"] = float("nan")
    frame["fid_unavailable"] = REASON if fid_unavailable else ""
    frame["n"] = 24
    return frame


def synthetic_curves(lpips_unavailable: bool = True, fid_unavailable: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame([{"variant": v, "bin": b, "psnr": rng.uniform(15, 30), "ssim": rng.uniform(0.5, 0.9),
                          "mae": rng.uniform(0.01, 0.2),
                          "fid": float("nan") if fid_unavailable else rng.uniform(5, 50),
                          "lpips": float("nan") if lpips_unavailable else rng.uniform(0, 0.3),
                          "fid_unavailable": "Inception weights (x.pth) missing; `put weights --download` fetches them"
                          if fid_unavailable else "",
                          "lpips_unavailable": "LPIPS vgg weights missing" if lpips_unavailable else ""}
                         for v in VARIANTS for b in FINE])


def body_rows(latex: str) -> list[tuple[str, list[str]]]:
    """(metric label, cells of the data columns) for each data row of a table; rule lines skipped."""
    body = latex.split(r"\endlastfoot", 1)[1]  # a longtable: caption and header come first (twice)
    rows, metric = [], ""
    for line in body.splitlines():
        line = line.strip()
        if not line.endswith(r"\\"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)&", line[:-2])]
        metric = cells[0] or metric
        rows.append((metric, cells[3:]))
    return rows


def bench_result(preset: str, benchmark: str = "sampling", **changes) -> dict:
    """A benchmark row as put/bench/sampling.py writes it (sizes of the preset's model)."""
    from put.config import model_config

    config = model_config(preset)
    result = {"benchmark": benchmark, "code": "ours", "engine": "eager", "preset": preset,
              "n_layer": config.transformer.n_layer, "n_embd": config.transformer.n_embd,
              "image_size": config.image_size, "device": "cpu", "device_name": "x86_64 (8 threads)",
              "precision": "fp32", "batch": 1, "tokens_per_step": 1, "tokens_per_second": 1.5,
              "fraction_of_matmul": 0.25, "images_per_second": 99.5, "source": "this run"}
    return {**result, **changes}
