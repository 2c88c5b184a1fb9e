"""Inference speed tables: every measured sampling and P-VQVAE row beside the paper's figures (the appendix's),
and a one-table summary of the paper's three transformers, one setting per device (the main report's)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from put.config import GENERATION_NAMES
from put.report.latex import Table, latex_escape, long_table
from put.report.reported import DATASETS, PRESET_DATASET, SCALE_DATASET, SPEED_DEVICE, speed_reported
from put.report.tables import NA

TRANSFORMER = "UQ-Transformer (tokens/s)"
NETWORK = "Network (layers x width, image size)"
PVQVAE = "P-VQVAE (images/s)"


def _timed_network(b: dict) -> tuple[str, str]:
    """(dataset, network) of a benchmark row: a paper preset's model is the paper's size (a TPAMI preset's, the
    TPAMI release's); any other preset's model (the demo's) is named as what it is, so no one reads it as a
    paper row."""
    size = f"{b['image_size']} px" if b["benchmark"] == "pvqvae" else \
        f"{b['n_layer']} layers x {b['n_embd']}, {b['image_size']} px"
    dataset = PRESET_DATASET.get(b["preset"]) or SCALE_DATASET.get(b["preset"])
    if b["benchmark"] == "pvqvae" and dataset:
        dataset = "all"  # one P-VQVAE size for every dataset, as in the paper's table
    if dataset:
        release = "paper" if b.get("generation", "cvpr2022") == "cvpr2022" else GENERATION_NAMES[b["generation"]]
        return dataset, f"{release} size, {size}"
    return f"{latex_escape(b['preset'])} preset", size  # the caption says once that it is not a paper model


def _timed_code(b: dict) -> str:
    """Whose code and which engine."""
    return "authors' loop" if b.get("code") == "authors" else f"ours, {b['engine']}" if b.get("engine") else "ours"


def source_legend(rows: Sequence[dict]) -> dict[str, str]:
    """Each measured row's source (this run's bench stage, or a committed file) -> its short label [a], [b], ... in
    the order they first appear; the caption's legend says what each is."""
    sources = dict.fromkeys(b.get("source", "this run") for b in rows)
    return {source: f"[{chr(ord('a') + i)}]" for i, source in enumerate(sources)}


def _source_text(source: str, rows: Sequence[dict]) -> str:
    if source == "this run":
        return "this run's bench stage"
    elsewhere = next((b["measured_elsewhere"] for b in rows
                      if b.get("source") == source and b.get("measured_elsewhere")), "")
    return f"\\texttt{{{latex_escape(f'reports/benchmarks/{source}.json')}}}" + (
        f" ({latex_escape(elsewhere)})" if elsewhere else "")


def speed_table(rows: Sequence[dict]) -> Table:
    """Measured throughput (ours by engine, the authors' loop) beside the paper's RTX 3090 figures, per dataset.
    Each row names its device, precision, code and source; a smaller preset's network comes last. Nothing is
    bolded: devices differ."""
    labels = source_legend(rows)
    table = []
    for b in rows:
        model = TRANSFORMER if b["benchmark"] == "sampling" else PVQVAE
        dataset, net = _timed_network(b)
        setting = (f"batch {b['batch']}, {b['tokens_per_step']}/step" if model == TRANSFORMER
                   else f"batch {b['batch']}")
        rate = b["tokens_per_second"] if model == TRANSFORMER else b["images_per_second"]
        table.append((model, dataset, 0, f"{_timed_code(b)} {labels[b.get('source', 'this run')]}", net,
                      b["device_name"], b["precision"], setting, float(rate),
                      float(b.get("fraction_of_matmul", "nan"))))
    for r in speed_reported().itertuples():
        model = TRANSFORMER if r.unit == "tokens/s" else PVQVAE
        table.append((model, r.dataset, 1, "reported by the paper", "the paper's trained model", r.device,
                      "not stated", "not stated", float(r.value), float("nan")))
    frame = pd.DataFrame(table, columns=["Model", "Dataset", "reported", "Code [source]", NETWORK, "Device",
                                         "Precision", "Setting", "Throughput", "Matmul use"])
    # Like beside like: per model, the paper's datasets in its order (measured, then reported), others last.
    order = {name: i for i, name in enumerate((TRANSFORMER, PVQVAE, *DATASETS, "all"))}
    frame = frame.sort_values(["Model", "Dataset", "reported"], kind="stable",
                              key=lambda s: s.map(lambda v: order.get(v, len(order)) if isinstance(v, str) else v))
    frame = frame.drop(columns="reported").set_index(["Model", "Dataset"])
    styler = frame.style.format(escape="latex", na_rep=NA)
    styler = styler.format("{:.3f}", subset=["Throughput"], na_rep=NA)
    styler = styler.format(lambda v: f"{100 * v:.1f}\\%", subset=["Matmul use"], na_rep=NA)
    styler.hide(axis="index", names=True)
    # Wrapping columns, ragged right (package array): device names and settings are long, the page is not.
    table = long_table(styler, (1.6, 2.0, 1.8, 2.2, 1.8, 1.7, 1.5), numeric=2)
    legend = "; ".join(f"{label} {_source_text(source, rows)}" for source, label in labels.items())
    styler.set_caption(
        f"Inference speed: our measurements beside the paper's supplementary table (reported: {SPEED_DEVICE}, "
        "trained models; precision and batch not stated there). Measured rows time networks of the paper's size "
        "(a smaller preset's, the demo's, is named by its preset: not a paper model, not comparable with the paper's "
        "rows) with random weights (the speed does not depend on the "
        "weights) on the device named, in the precision named (compare rows of one precision), by the code named "
        "(setting: batch and tokens per forward): ours (eager: the eager sampler; graph: the sampling engine's "
        "whole step replayed as one CUDA graph; compile: the same with a compiled forward) or the authors' released "
        "sampling loop (fp32, as released). Matmul use: achieved FLOP rate of one sampling step or P-VQVAE pass "
        "over this device's dense matmul rate (bf16 on GPUs, fp32 on CPUs) measured right after it. "
        f"Sources: {legend}.")
    return table


SUMMARY_SETTING = {"batch": 1, "tokens_per_step": 1}  # Algorithm 1 on one image: the paper's own setting
SUMMARY_CODES = {"ours": "Ours", "authors": "Authors' loop"}
PAPER_COLUMN = f"Paper ({SPEED_DEVICE})"


def _summary_candidate(b: dict, dataset: str) -> bool:
    """A sampling row of the paper's CVPR model for `dataset` at the summary's setting."""
    return (b["benchmark"] == "sampling" and PRESET_DATASET.get(b["preset"]) == dataset
            and b.get("generation", "cvpr2022") == "cvpr2022"
            and all(b.get(k) == v for k, v in SUMMARY_SETTING.items()))


def _pick(rows: list[dict]) -> dict:
    """One row of a code on a device: fp32 first (the authors' loop and, presumably, the paper ran fp32), then
    this run's over a committed file's, then the fastest engine."""
    return min(rows, key=lambda b: (b["precision"] != "fp32", b.get("source", "this run") != "this run",
                                    -float(b["tokens_per_second"])))


def _summary_cell(b: dict | None) -> str:
    if b is None:
        return "--"
    how = f"{b['engine']}, {b['precision']}" if b.get("code") != "authors" else b["precision"]
    return f"{float(b['tokens_per_second']):.3f} {{\\scriptsize ({latex_escape(how)})}}"


def speed_summary(rows: Sequence[dict]) -> Table:
    """The paper's three UQ-Transformers (tokens/s), one setting (batch 1, one token per step): per dataset and
    device, our sampler and the authors' released loop (one row each, `_pick`), then the paper's figure."""
    table = []
    for dataset in DATASETS:
        candidates = [b for b in rows if _summary_candidate(b, dataset)]
        for device in dict.fromkeys(b["device_name"] for b in candidates):
            on_device = [b for b in candidates if b["device_name"] == device]
            cells = {}
            for code, column in SUMMARY_CODES.items():
                mine = [b for b in on_device if b.get("code", "ours") == code]
                cells[column] = _summary_cell(_pick(mine) if mine else None)
            table.append({"Dataset": dataset, "Device": latex_escape(device), **cells, PAPER_COLUMN: "--"})
        paper = speed_reported()
        value = paper[(paper["dataset"] == dataset) & (paper["unit"] == "tokens/s")]["value"]
        table.append({"Dataset": dataset, "Device": f"{SPEED_DEVICE} (reported)",
                      **dict.fromkeys(SUMMARY_CODES.values(), "--"),
                      PAPER_COLUMN: f"{float(value.iloc[0]):.3f}" if len(value) else NA})
    frame = pd.DataFrame(table).set_index("Dataset")
    styler = frame.style.hide(axis="index", names=True)
    styler.set_table_styles([{"selector": "column_format", "props": ":llrrr;"}], overwrite=False)
    return Table(styler.set_caption(
        "Sampling speed of the paper's three UQ-Transformers (tokens/s; paper-size networks with random weights: the "
        "speed does not depend on the weights), at the paper's setting, batch 1 and one token per forward "
        "(Algorithm 1): our sampler and the authors' released sampling loop on each device measured, beside the "
        f"paper's figure ({SPEED_DEVICE}; precision not stated). In small type: our engine and the precision (fp32 "
        "where measured, as the authors' loop runs; else the fastest engine's). --: not measured. Every measured "
        "row, other settings and the P-VQVAE: the appendix's speed table."))
