"""What presets cost (put/bench/cost.py, `put cost`): training and sampling arithmetic, which rows are used, the
tables of docs/speed-and-cost.md and reports/benchmarks/cost.json current with the committed rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from put.bench.cost import (
    cost_report,
    evaluation_cost,
    expected_max,
    preset_costs,
    sample_cost,
    table_topk,
    totals,
    train_cost,
)
from put.cli import main
from put.config import preset
from put.config.bins import EVAL_GROUPS
from put.dag.resources import RESOURCE_TABLE, load_resource_table
from put.report.benchmarks import COST_FILE, read_benchmark_rows
from put.report.cost import TABLE_MARKERS, cost_markdown, with_cost_tables

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "reports" / "benchmarks"


def train(stage: str, batch: int, seconds: float, device: str = "cuda", **extra) -> dict:
    return {"benchmark": "train", "preset": "ffhq", "stage": stage, "batch": batch, "seconds_per_step": seconds,
            "device": device, "device_name": "GPU X", "precision": "bf16-autocast", "peak_gib": 10.0,
            "source": "train_cuda_x", **extra}


def sampling(batch: int, seconds: float, engine: str = "graph", preset_name: str = "ffhq", **extra) -> dict:
    return {"benchmark": "sampling", "code": "ours", "engine": engine, "preset": preset_name, "batch": batch,
            "tokens_per_step": 1, "seconds_per_step": seconds, "device": "cuda", "device_name": "GPU X",
            "precision": "bf16-autocast", "source": "sampling_cuda_x", **extra}


def test_training_costs_seconds_per_step_times_iterations_at_the_per_gpu_batch():
    rows = [train("transformer", 12, 0.1), train("transformer", 12, 0.5, measured_elsewhere="a baseline"),
            train("transformer", 48, 0.3), train("pvqvae", 32, 0.2, device="cpu")]
    iterations = preset("ffhq").transformer_train.iterations
    four = train_cost(rows, "ffhq", "train_transformer", 4)
    assert four["seconds_per_step"] == 0.1  # this code's figure before one measured elsewhere
    assert four["wall_hours"] == pytest.approx(0.1 * iterations / 3600)
    assert four["device_hours"] == pytest.approx(4 * four["wall_hours"]) and four["jobs"] == 6
    assert train_cost(rows, "ffhq", "train_transformer", 1)["seconds_per_step"] == 0.3
    assert "put bench train --preset ffhq --stage transformer --gpu-counts 2" in \
        train_cost(rows, "ffhq", "train_transformer", 2)["missing"]
    assert "missing" in train_cost(rows, "ffhq", "train_pvqvae", 4)  # a CPU row does not stand in for a GPU
    assert "does not split" in train_cost(rows, "ffhq", "train_transformer", 5)["missing"]
    oom = train_cost([{**train("transformer", 48, 0.3), "oom": "CUDA out of memory"}], "ffhq", "train_transformer", 1)
    assert oom["missing"].startswith("out of memory on GPU X")


def test_sampling_costs_the_most_masked_image_of_each_batch():
    """Constant masked counts c: every batch takes c steps; the demo's jobs counted by hand."""
    c = 37
    masks = {group: np.full(64, c) for group in EVAL_GROUPS}
    rows = [sampling(16, 0.01, preset_name="demo", device="cpu", engine="eager"),
            sampling(2, 0.5, preset_name="demo", device="cpu", engine="eager"),
            {"benchmark": "pvqvae", "preset": "demo", "device": "cpu", "images_per_second": 100.0,
             "source": "pvqvae_cpu"}]
    cfg = preset("demo").sample  # 16 images, 3 of them for 10 diversity samples on 5 fine bins, batch 128
    cost = sample_cost(rows, "demo", 0, masks)  # batch 128 holds a group's 16 images: modelled at 16
    iterative = 3 * c + cfg.diversity_samples * 5 * c
    results = 16 * 2 * 3 + 3 * cfg.diversity_samples * 5
    assert cost["modelled_batch"] == 16 and cost["steps"] == iterative + 3 and cost["results"] == results
    assert cost["wall_hours"] == pytest.approx(((iterative + 3) * 0.01 + results / 100) / 3600)
    assert sample_cost(rows, "places2", 1, masks)["missing"] == (
        "not measured at batch 64: put bench sampling --preset places2 --batch 64 --tokens-per-step 1 --device cuda")


def test_sampling_is_modelled_at_the_stages_batch_only_preferring_its_engine():
    """No figure from another batch: a stage measured at batches 1 and 10 but run at 64 is n/a, naming both."""
    masks = {group: np.arange(64) for group in EVAL_GROUPS}
    rows = [sampling(10, 0.02, "eager"), sampling(64, 0.06, "eager"), sampling(64, 0.05, "graph"),
            sampling(128, 0.01, "graph")]
    cost = sample_cost(rows, "ffhq", 1, masks)
    assert (cost["modelled_batch"], cost["engine"], cost["seconds_per_step"]) == (64, "graph", 0.05)
    unmeasured = sample_cost([sampling(1, 0.01), sampling(10, 0.02)], "ffhq", 1, masks)
    assert unmeasured["missing"] == ("not measured at batch 64 (measured: batch 1, 10): put bench sampling "
                                     "--preset ffhq --batch 64 --tokens-per-step 1 --device cuda")
    assert "steps" not in unmeasured and "wall_hours" not in unmeasured
    assert expected_max(np.arange(64), 1) < expected_max(np.arange(64), 10) <= 63


def test_table_groups_by_our_sampler_and_the_authors_loop_each_at_its_own_batch():
    masks = {group: np.full(64, 10) for group in EVAL_GROUPS}
    rows = [sampling(10, 0.01), sampling(1, 0.002),
            sampling(10, 0.1, engine="released sample_largest (cvpr2022)", code="authors", source="authors_x")]
    ours, theirs = table_topk(rows, "ffhq", 1, masks)
    assert (ours["code"], ours["batch"], theirs["code"], theirs["batch"]) == ("ours", 10, "authors", 10)
    assert ours["steps"] == theirs["steps"] == 3 * 100 * 10  # 1000 images in batches of 10, 10 steps each
    assert theirs["hours"] == pytest.approx(3000 * 0.1 / 3600) and theirs["source"] == "authors_x"


def test_totals_add_jobs_and_the_critical_path():
    stages = [{"stage": "train_pvqvae", "jobs": 4, "wall_hours": 2.0, "device_hours": 8.0},
              {"stage": "train_transformer", "jobs": 6, "wall_hours": 10.0, "device_hours": 10.0},
              {"stage": "sample", "jobs": 6, "wall_hours": 1.0, "device_hours": 1.0}]
    total = totals("ffhq", stages)
    assert total["device_hours"] == 4 * 8 + 6 * 10 + 6 * 1 and total["wall_hours"] == 13.0
    assert total["wall_hours_one_job_at_a_time"] == 4 * 2 + 6 * 10 + 6 * 1 and total["jobs"] == 16
    assert totals("ffhq", [*stages[:2], {"stage": "sample", "missing": "x"}])["missing"] == "needs sample"


def test_layouts_list_every_measured_gpu_count():
    rows = [train("transformer", 48, 0.3), train("transformer", 6, 0.05), train("transformer", 7, 0.05)]
    costs = preset_costs(rows, load_resource_table(ROOT / RESOURCE_TABLE), "ffhq",
                         {group: np.full(8, 100) for group in EVAL_GROUPS})
    assert [(s["stage"], s["gpus"]) for s in costs["layouts"]] == [("train_transformer", 1), ("train_transformer", 8)]


def evaluate(device: str, **extra) -> dict:
    return {"benchmark": "evaluate", "preset": "ffhq", "device": device, "device_name": f"{device} X",
            "precision": "fp32", "seconds_per_result": 0.01, "inception_seconds_per_image": 0.002,
            "lpips_seconds_per_pair": 0.003, "mean_interval_seconds": 1.0, "fid_interval_seconds": 12.0,
            "cpu_workers": 2, "source": f"evaluate_{device}", **extra}


def test_the_evaluation_costs_its_metrics_intervals_and_networks():
    """FFHQ: 1000 test images; 6 table cells, 5 fine bins of 1000 images x 10 samples, 5 LPIPS pairs each."""
    cpu_only = evaluation_cost([evaluate("cpu")], "ffhq", gpus=1)
    assert cpu_only["results"] == 6 * 1000 + 5 * 1000 * 10 and cpu_only["fid_intervals"] == 11
    assert cpu_only["interval_hours"] == pytest.approx((38 * 1.0 + 11 * 12.0) / 3600)
    assert cpu_only["metrics_hours"] == pytest.approx(56000 * 0.01 / 3600)
    assert cpu_only["missing"] == ("Inception and LPIPS not measured on a GPU: put bench evaluate --preset ffhq "
                                   "--device cuda") and "wall_hours" not in cpu_only
    both = evaluation_cost([evaluate("cpu"), evaluate("cuda")], "ffhq", gpus=1)
    networks = (2 * (6000 + 5000) * 0.002 + 1000 * 5 * 5 * 0.003) / 3600
    assert both["network_hours"] == pytest.approx(networks)
    assert both["wall_hours"] == pytest.approx(both["interval_hours"] + both["metrics_hours"] + networks)
    assert "not measured: put bench evaluate --preset ffhq --device cpu" in evaluation_cost([], "ffhq", 1)["missing"]
    on_cpu = evaluation_cost([{**evaluate("cpu"), "preset": "demo"}], "demo", gpus=0)
    assert "missing" not in on_cpu and on_cpu["images"] == 16 and on_cpu["jobs"] == 6


def test_the_committed_cost_file_and_page_tables_are_current():
    """cost.json is what `put cost` computes from the committed rows; docs/speed-and-cost.md shows its tables."""
    committed = json.loads((BENCHMARKS / COST_FILE).read_text())
    rows = read_benchmark_rows(BENCHMARKS)
    recomputed = cost_report(rows, load_resource_table(ROOT / RESOURCE_TABLE), list(committed_presets(committed)),
                             RESOURCE_TABLE)
    assert json.loads(json.dumps(recomputed)) == committed, "reports/benchmarks/cost.json is stale: run `make cost`"
    page = (ROOT / "docs" / "speed-and-cost.md").read_text()
    assert with_cost_tables(page, committed) == page, "docs/speed-and-cost.md's cost tables are stale: run `make cost`"


def committed_presets(cost: dict) -> dict:
    return dict.fromkeys(s["preset"] for s in cost["stages"])


def test_cost_command_rewrites_the_page_tables_and_needs_its_markers(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)  # workflow/resources.yaml is read from the repository root
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "train.json").write_text(json.dumps([train("transformer", 48, 0.3), train("pvqvae", 32, 0.2)]))
    page = tmp_path / "speed-and-cost.md"
    page.write_text(f"intro\n{TABLE_MARKERS[0]}\nold table\n{TABLE_MARKERS[1]}\nrest\n")
    assert main(["cost", "--preset", "ffhq", "--benchmarks", str(folder), "--page", str(page)]) == 0
    cost = json.loads((folder / COST_FILE).read_text())
    text = page.read_text()
    assert "old table" not in text and cost_markdown(cost) in text and text.endswith(f"{TABLE_MARKERS[1]}\nrest\n")
    assert "| ffhq | UQ-Transformer | 6 x 1 x 1 | 48 | 0.3 |" in capsys.readouterr().out
    page.write_text("no markers\n")
    assert main(["cost", "--preset", "ffhq", "--benchmarks", str(folder), "--page", str(page)]) == 2
    assert "no cost-table markers" in capsys.readouterr().err


def test_the_reports_cost_tables_say_a_shared_measured_on_once():
    """In the report's LaTeX a device and source that several rows share is a label with one legend in the caption;
    docs/speed-and-cost.md's Markdown keeps every cell whole."""
    import pandas as pd

    from put.report.cost import cost_markdown, cost_table, shared_notes
    from put.report.latex import render_latex

    cost = json.loads((Path(__file__).resolve().parents[1] / "reports" / "benchmarks" / "cost.json").read_text())
    latex = render_latex(cost_table(cost))
    h100 = r"NVIDIA H100 80GB HBM3, bf16-autocast (baseline\_h100\_d89b9d3)"
    assert latex.split(r"\endfirsthead")[0].count(h100) == 1 and h100 not in latex.split(r"\endlastfoot")[1]
    assert cost_markdown(cost).count(h100.replace("\\", "")) > 1
    frame, legend = shared_notes(pd.DataFrame({"Measured on": ["a long device name (source)"] * 2 + ["needs x"] * 2}))
    assert list(frame["Measured on"]) == ["[a]", "[a]", "needs x", "needs x"]
    assert legend == "[a] a long device name (source)"
