"""The cost tables (report and docs/speed-and-cost.md) from `put cost`'s cost.json (put/bench/cost.py computes it):
GPU-hours and wall time per stage and for the ablation DAG at the GPU counts of workflow/resources.yaml, and
every measured GPU layout of the training stages (what the counts were chosen from)."""

from __future__ import annotations

import pandas as pd

from put.errors import FileMismatchError
from put.report.latex import Table, latex_escape, long_table
from put.report.tables import NA

STAGE_NAMES = {"train_pvqvae": "P-VQVAE", "train_transformer": "UQ-Transformer", "sample": "sampling",
               "ablation DAG": "ablation DAG"}
MEASURED_ON = "Measured on"  # the column whose shared texts the LaTeX tables say once (`shared_notes`)


def _hours(value: float | None) -> str:
    """Three significant figures, thousands written out (4,780, not 4.78e+03: narrower in a table's column)."""
    if value is None or pd.isna(value):
        return NA
    return f"{float(f'{value:.3g}'):,.0f}" if abs(value) >= 1000 else f"{value:.3g}"


def _measured_on(s: dict) -> str:
    if "missing" in s:
        return s["missing"]
    return f"{s['device_name']}, {s['precision']} ({s['source']})"


def _batch(s: dict) -> str:
    modelled = s.get("modelled_batch")
    return f"{s['batch_per_gpu']:g}" + (f" (as {modelled})" if modelled not in (None, s["batch_per_gpu"]) else "")


def _gpus(s: dict) -> str:
    """Jobs x nodes x GPUs per node (the layout of workflow/resources.yaml)."""
    nodes = s.get("nodes", 1)
    return f"{s['jobs']} x {nodes} x {s['gpus'] // nodes or 'CPU'}"


def cost_frame(cost: dict) -> pd.DataFrame:
    """One row per preset and stage, then the preset's ablation DAG."""
    rows = []
    for s in cost["stages"]:
        rows.append({"Preset": s["preset"], "Stage": STAGE_NAMES[s["stage"]], "Jobs x nodes x GPUs": _gpus(s),
                     "Batch/GPU": _batch(s), "s/step": s.get("seconds_per_step"),
                     "Steps": s.get("steps"), "Peak GiB": s.get("peak_gib"), "Wall h (job)": s.get("wall_hours"),
                     "GPU-h (all jobs)": s["jobs"] * s["device_hours"] if "device_hours" in s else None,
                     MEASURED_ON: _measured_on(s)})
    for t in cost["totals"]:
        wall = t["missing"] if "missing" in t else (f"{_hours(t['wall_hours'])} (every job of a stage at once); "
                                                   f"{_hours(t['wall_hours_one_job_at_a_time'])} one job at a time")
        rows.append({"Preset": t["preset"], "Stage": STAGE_NAMES[t["stage"]],
                     "Jobs x nodes x GPUs": str(t.get("jobs", NA)),
                     "Batch/GPU": "", "s/step": None, "Steps": None, "Peak GiB": None,
                     "Wall h (job)": t.get("wall_hours"), "GPU-h (all jobs)": t.get("device_hours"),
                     MEASURED_ON: wall})
    order = {name: i for i, name in enumerate(dict.fromkeys(s["preset"] for s in cost["stages"]))}
    frame = pd.DataFrame(rows)
    return frame.sort_values("Preset", kind="stable", key=lambda p: p.map(order)).reset_index(drop=True)


def layouts_frame(cost: dict) -> pd.DataFrame:
    return pd.DataFrame([{"Preset": s["preset"], "Stage": STAGE_NAMES[s["stage"]], "GPUs": s["gpus"],
                          "Batch/GPU": f"{s['batch_per_gpu']:g}", "s/step": s["seconds_per_step"],
                          "Peak GiB": s.get("peak_gib"), "Wall h": s["wall_hours"], "GPU-h": s["device_hours"],
                          MEASURED_ON: _measured_on(s)} for s in cost["layouts"]])


def table_topk_frame(cost: dict) -> pd.DataFrame:
    """A row per code and precision: the precision is on the row, so a bf16 row of ours is never read as
    comparable with the authors' fp32 loop."""
    return pd.DataFrame([{"Preset": t["preset"], "Code": ("ours, " + t["engine"] if t["code"] == "ours" else
                          "authors' released loop") + f", {t['precision']}", "Images x groups": f"{t['images']} x 3",
                          "Batch": t["batch"],
                          "Steps": t["steps"], "s/step": t["seconds_per_step"], "Wall h": t["hours"],
                          MEASURED_ON: _measured_on(t)} for t in cost.get("table_topk", [])])


def evaluation_frame(cost: dict) -> pd.DataFrame:
    return pd.DataFrame([{"Preset": e["preset"], "Jobs x GPUs": _gpus(e), "Images": e["images"],
                          "Results": e["results"],
                          "Intervals CPU h": e.get("interval_hours"), "PSNR, SSIM, MAE CPU h": e.get("metrics_hours"),
                          "Inception, LPIPS h": e.get("network_hours"), "Wall h (job)": e.get("wall_hours"),
                          MEASURED_ON: _evaluation_measured_on(e)}
                         for e in cost.get("evaluation", [])])


def _evaluation_measured_on(e: dict) -> str:
    """The CPU row's machine, then what is missing or where the networks were timed."""
    parts = [f"{e['cpu_name']} ({e['cpu_source']})"] if "cpu_source" in e else []
    if "missing" in e:
        parts.append(e["missing"])
    elif e["gpus"]:
        parts.append(f"networks: {_measured_on(e)}")
    return "; ".join(parts)


def _format(frame: pd.DataFrame) -> pd.DataFrame:
    """Numbers as text, n/a where absent: one rendering for LaTeX and Markdown."""
    out = frame.copy()
    for column in out.columns:
        if column in ("s/step",):
            out[column] = [NA if v is None or pd.isna(v) else f"{v:.4g}" for v in out[column]]
        elif column in ("Steps", "Batch", "Images", "Results"):
            out[column] = [NA if v is None or pd.isna(v) else f"{int(v):,}" for v in out[column]]
        elif column in ("Peak GiB", "Wall h (job)", "GPU-h (all jobs)", "Wall h", "GPU-h", "Intervals CPU h",
                        "PSNR, SSIM, MAE CPU h", "Inception, LPIPS h"):
            out[column] = [_hours(v) for v in out[column]]
    return out


def cost_markdown(cost: dict) -> str:
    """The tables of docs/speed-and-cost.md (GitHub Markdown)."""
    def table(frame: pd.DataFrame) -> str:
        frame = _format(frame).astype(str)
        lines = ["| " + " | ".join(frame.columns) + " |", "|" + "---|" * len(frame.columns)]
        lines += ["| " + " | ".join(v.replace("|", "/") for v in row) + " |" for row in frame.itertuples(index=False)]
        return "\n".join(lines)

    text = table(cost_frame(cost))
    if cost["layouts"]:
        text += "\n\nMeasured GPU layouts of the training stages (one job):\n\n" + table(layouts_frame(cost))
    if cost.get("table_topk"):
        text += ("\n\nTop-K sampling of the evaluation set's three Table 1 groups, per variant, one device (ours and "
                 "the authors' released loop in each precision measured, each at its largest measured batch up to the "
                 "sample stage's; compare rows of one precision):\n\n"
                 + table(table_topk_frame(cost)))
    if cost.get("evaluation"):
        text += "\n\n" + EVALUATION_TEXT + ":\n\n" + table(evaluation_frame(cost))
    return text + "\n"


EVALUATION_TEXT = (
    "The evaluate stage of one variant (6 per ablation DAG): PSNR/SSIM/MAE of every result and the bootstrap "
    "intervals of every cell, intervals included (CPU, the cores named; intervals timed at the largest cell, so "
    "an upper bound), and the Inception features and LPIPS pairs on the stage's device, counted from the preset "
    "and timed by put bench evaluate")


def shared_notes(frame: pd.DataFrame, column: str = MEASURED_ON) -> tuple[pd.DataFrame, str]:
    """`frame` with each text of `column` that several rows share replaced by a short label ([a], [b], ...), and the
    legend that says each once (plain text; "" when none repeats); a short text costs no more than its label."""
    if column not in frame.columns:
        return frame, ""
    counts = frame[column].value_counts()
    shared = [text for text in dict.fromkeys(frame[column]) if counts.get(text, 0) > 1 and len(str(text)) > 20]
    labels = {text: f"[{chr(ord('a') + i)}]" for i, text in enumerate(shared)}
    legend = "; ".join(f"{label} {text}" for text, label in labels.items())
    return frame.assign(**{column: frame[column].map(lambda t: labels.get(t, t))}), legend


def _table(frame: pd.DataFrame, widths: tuple[float, ...], caption: str) -> Table:
    """The LaTeX table (docs/speed-and-cost.md's Markdown keeps every cell whole)."""
    frame, legend = shared_notes(_format(frame))
    table = long_table(frame.style.format(escape="latex", na_rep=NA).hide(axis="index"), widths)
    table.styler.set_caption(caption + (f" {MEASURED_ON}: {latex_escape(legend)}." if legend else ""))
    return table


def cost_table(cost: dict) -> Table:
    return _table(cost_frame(cost), (2.5, 1.6, 1.2, 1.6, 1.0, 1.4, 0.9, 1.0, 1.1, 3.2), (
        "What each preset costs at the GPU counts of workflow/resources.yaml: per stage (jobs x nodes x GPUs per "
        "node, per-GPU batch, measured seconds per step, steps, peak memory per GPU at that batch (CPU jobs: the "
        "benchmark process's "
        "peak resident size), wall time of one job, "
        "GPU-hours of all its jobs; CPU-hours for CPU jobs) and for the ablation DAG (4 P-VQVAEs, 6 transformers, "
        "6 samplings of the evaluation set). Computed by put cost from the benchmark rows named; training "
        "excludes data loading, evaluation and DDP's all-reduce; sampling is modelled at the stage's batch (a "
        "group's test images at most) on generated masks of each hole-ratio group; a stage not measured at its "
        "batch is n/a, with the batches measured and the command that would measure it."))


def table_topk_table(cost: dict) -> Table:
    return _table(table_topk_frame(cost), (2.5, 2.6, 1.5, 0.9, 1.2, 1.1, 1.2, 3.7), (
        "Top-K sampling of the evaluation set's three Table 1 groups (one result per image and group), per variant "
        "on one device: our sampler and the authors' released loop in each precision measured (compare rows of one "
        "precision), each at its largest measured batch up to the sample stage's, as many steps per batch as its "
        "most masked image needs (generated masks)."))


def evaluation_table(cost: dict) -> Table:
    return _table(evaluation_frame(cost), (2.5, 1.2, 1.1, 1.2, 1.3, 1.5, 1.5, 1.2, 3.7), EVALUATION_TEXT + ".")


def layouts_table(cost: dict) -> Table:
    return _table(layouts_frame(cost), (2.5, 1.8, 0.8, 1.6, 1.1, 1.1, 1.1, 1.1, 3.6), (
        "Every measured GPU layout of a training stage (one job): what the GPU counts of workflow/resources.yaml "
        "were chosen from. A layout of N GPUs is timed as one GPU at the per-GPU batch (the preset's batch / N)."))


TABLE_MARKERS = ("<!-- cost tables: generated by `make cost`, do not edit -->", "<!-- end of cost tables -->")


def with_cost_tables(text: str, cost: dict, name: str = "docs/speed-and-cost.md") -> str:
    """`text` (a Markdown page) with the Markdown between its cost-table markers replaced by the tables of `cost`."""
    start, end = (text.find(marker) for marker in TABLE_MARKERS)
    if start < 0 or end < start:
        raise FileMismatchError(f"{name}: no cost-table markers; expected the lines {TABLE_MARKERS[0]!r} and "
                         f"{TABLE_MARKERS[1]!r}")
    return text[:start + len(TABLE_MARKERS[0])] + "\n\n" + cost_markdown(cost) + "\n" + text[end:]
