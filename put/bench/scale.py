"""`put bench scale`: every CPU-side DAG stage at growing data sizes, run with the DAG's own commands on fabricated
data (Telea standing in for sampling), recording wall and CPU time, peak memory (GNU time's: largest process) and
disk; scale_fit.py extrapolates to the paper presets (docs/speed-and-cost.md, "At the paper's data sizes").
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from put.bench.scale_data import fabricate, write_params
from put.bench.scale_points import (
    BENCHMARK,
    check_earlier,
    check_sizes,
    earlier_file,
    merged,
    read_scale_file,
)
from put.bench.scale_run import NICE, STAGES, folder_bytes, measured_run, output_of
from put.config.params import load_params
from put.config.paths import metrics_bins_file, metrics_images_file, metrics_info_file, pasted_metrics_file
from put.dag.declaration import stage
from put.dag.dvc_yaml import instance_command
from put.errors import InputError
from put.io.files import atomic_write_text, read_json

ROWS = "rows.json"  # a workspace's measured stages, for a rerun to resume from
REPORT_DROPPED = ("--benchmarks", "--frontier", "--frontier-tpami", "--resolved-params")  # GPU stages' outputs


def stage_argv(params_file: Path, key: str, name: str, instance: str | None, repo: Path) -> tuple[list[str], str]:
    """The DAG's command of one stage instance (`python -m put ...`) and the output it writes."""
    params = load_params(params_file)
    argv = instance_command(stage(name), instance, params.preset, params)
    if key == "report":  # outputs of the GPU stages do not exist here; the sample grid shows Telea's results
        options = dict(zip(argv[1::2], argv[2::2]))  # every option of a stage command takes a value
        options["--samples"] = output_of(instance_command(stage("external"), "telea", params.preset, params))
        options["--measured"] = str(repo / options["--measured"])
        argv = [argv[0], *(x for option, value in options.items() if option not in REPORT_DROPPED
                           for x in (option, value))]
    return [sys.executable, "-m", "put", *argv], output_of(argv)


def variant_metrics(metrics: Path, labels: list[str]) -> None:
    """The report needs every evaluated label's files: Telea's evaluation (its files raw and, under `pasted/`,
    with known pixels pasted back), copied under each variant's name (its records naming that variant), so the
    report reads files of the real size for all of them."""
    for source in (metrics, pasted_metrics_file(metrics)):
        info = read_json(metrics_info_file(source), "the evaluate stage's record")
        for label in labels:
            target = source.with_name(f"{label}.json")
            if target == source:
                continue
            shutil.copyfile(source, target)
            shutil.copyfile(metrics_bins_file(source), metrics_bins_file(target))
            shutil.copyfile(metrics_images_file(source), metrics_images_file(target))
            metrics_info_file(target).write_text(json.dumps({**info, "variant": label}, indent=2) + "\n")


def recorded_rows(workspace: Path, identity: dict) -> dict:
    """The rows of the stages a run of the same size measured before it stopped (`rows.json` in its workspace,
    whose outputs are still there): a run that failed or was killed at its last stage does not redo the others."""
    try:
        saved = json.loads((workspace / ROWS).read_text())
    except (OSError, ValueError):
        return {}
    return saved.get("rows", {}) if saved.get("identity") == identity else {}


def measure_size(work: Path, repo: Path, preset: str, train: int, test: int, seed: int = 0,
                 keep: bool = False, only: tuple[str, ...] | None = None) -> dict:
    """Fabricate `train` + `test` images under work/data (kept between sizes), run every stage in
    work/ws_<train>_<test>, and return the rows; the workspace is deleted after unless `keep`."""
    from put.bench.scale_fit import results_per_test_image, stage_items
    from put.bench.scale_tools import bookkeeping

    config = load_params(None, preset=preset).resolved()
    size = config.model.image_size
    root = Path(work) / "data"
    started = time.perf_counter()
    sources = fabricate(root, train, test, size, seed)
    made = time.perf_counter() - started
    workspace = Path(work) / f"ws_{train}_{test}"
    identity = {"preset": preset, "train": train, "test": test, "seed": seed}
    rows = recorded_rows(workspace, identity)
    if not rows:
        shutil.rmtree(workspace, ignore_errors=True)
    params_file = write_params(workspace, preset, root, test, sources)
    log = workspace / "stages.log"
    env = {"PYTHONPATH": str(repo), "MLFLOW_TRACKING_URI": f"sqlite:///{workspace / 'mlflow.db'}",
           "DVC_NO_ANALYTICS": "1"}
    results, fine = results_per_test_image(config.sample.diversity_images, test)
    items = {key: stage_items(key, train, test, config.sample.diversity_images) for key, _, _ in STAGES}
    for key, name, instance in STAGES:
        if (only is not None and key not in only) or key in rows:  # not asked for, or measured by an earlier run
            continue
        argv, out = stage_argv(params_file, key, name, instance, Path(repo))
        if key == "report":
            params = load_params(params_file)
            variant_metrics(workspace / output_of(instance_command(stage("evaluate_external"), "telea", preset,
                                                                   params)), params.evaluated_labels())
        row = measured_run(argv, workspace, log, env)
        written = workspace / out
        files = [written] if key != "evaluate" else [  # a metrics file's companions lie beside it
            written, metrics_info_file(written), metrics_bins_file(written), metrics_images_file(written)]
        rows[key] = {**row, "items": items[key], "disk_bytes": sum(map(folder_bytes, files)),
                     "command": " ".join(["python", "-m", "put", *argv[3:]])}
        print(f"  {key}: {rows[key]['wall_seconds']:.1f} s wall, {rows[key]['cpu_seconds']:.1f} s CPU, "
              f"{rows[key]['peak_rss_mib']:.0f} MiB, {rows[key]['disk_bytes'] / 2 ** 20:.1f} MiB on disk "
              f"({items[key]} items)", flush=True)
        atomic_write_text(workspace / ROWS, json.dumps({"identity": identity, "rows": rows}, indent=2) + "\n")
    tools = bookkeeping(workspace, params_file, repo, log, env, ran=tuple(rows))
    if not keep:
        shutil.rmtree(workspace, ignore_errors=True)
    return {"train_images": train, "test_images": test, "image_size": size, "result_files": results,
            "fine_bin_results": fine, "fabricate_seconds": round(made, 1),
            "data_bytes": folder_bytes(root), "stages": rows, "bookkeeping": tools}


def scale_preset(preset: object, where: str):
    """The resolved preset of a scale benchmark: one of ImageNet's layout, the only one fabricated at any size."""
    from put.config import PRESETS

    if preset not in PRESETS or load_params(None, preset=preset).resolved().data.dataset != "imagenet":
        raise InputError(f"{where} {preset!r}: the scale benchmark fabricates ImageNet's layout, which takes any "
                         "number of images; expected imagenet, imagenet_tpami256 or imagenet_tpami512")
    return load_params(None, preset=preset).resolved()


def run_scale(sizes: list[int], test_sizes: list[int], work: Path, out: Path | None, preset: str = "imagenet",
              keep: bool = False, page: Path | None = None, only: tuple[str, ...] | None = None,
              append: bool = False) -> dict:
    """Every size in turn (the smallest first), then the fit; writes `out` (JSON) and the docs table of `page`.
    `only`: these stages (split among them, which the others read); `append`: the sizes join those of `out`'s
    earlier runs (their commands kept in `commands`), a size measured before replacing its earlier point."""
    from put.bench.common import environment
    from put.bench.scale_fit import fit, with_scale_tables

    config = scale_preset(preset, "--preset")
    check_sizes(sizes, test_sizes)
    if only is not None and "split" not in only:
        raise InputError(f"--only {' '.join(only)}: the other stages read the split; add split")
    earlier = earlier_file(out, preset, config.model.image_size) if append else {}
    points = list(earlier.get("points", []))
    if page is not None and len({p["train_images"] for p in points} | set(sizes)) < 2:
        raise InputError(f"--page {page}: its tables fit a line through two sizes or more; give another size "
                         "(--sizes), or --append to a file that holds one")
    import torch

    repo = Path(__file__).resolve().parents[2]
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    here = environment(torch.device("cpu"), False)
    # this run's command once, last: a re-run with the same arguments does not list it twice
    commands = [c for c in earlier.get("commands", [earlier.get("command")]) if c and c != here["command"]]
    for train, test in sorted(zip(sizes, test_sizes)):
        print(f"{preset}: {train} training and {test} test images", flush=True)
        points, replaced = merged(points, measure_size(work, repo, preset, train, test, keep=keep, only=only))
        if replaced is not None:
            print(f"  replaces the point of {replaced['train_images']:,} + {replaced['test_images']:,} images "
                  f"measured before (one point per size)", flush=True)
        here = environment(torch.device("cpu"), False)
        result = {"benchmark": BENCHMARK, "preset": preset, "nice": NICE, "points": points,
                  **(fit(points) if len(points) > 1 else {}), **here, "commands": [*commands, here["command"]]}
        if out is not None:  # after every size: a run cut short keeps what it measured
            atomic_write_text(Path(out), json.dumps(result, indent=2) + "\n")
    shutil.rmtree(work / "data", ignore_errors=True)
    if page is not None:
        Path(page).write_text(with_scale_tables(Path(page).read_text(), result, str(page)))
    return result


def rewrite_tables(out: Path, page: Path) -> dict:
    """The fit (a function of the measured points) redone with this code, written back into the benchmark's file
    (`refit_by` says so), and the tables of `page` from it, measuring nothing."""
    from put.bench.scale_fit import check_measured, fit, with_scale_tables

    result = read_scale_file(out)
    config = scale_preset(result.get("preset"), f"{out}: preset")
    check_earlier(result, Path(out), result["preset"], config.model.image_size)
    check_measured(result["points"], config.sample.diversity_images, str(out))
    result.update(fit(result["points"], str(out)), refit_by=" ".join(["python -m put", *sys.argv[1:]]))
    text = with_scale_tables(page.read_text(), result, str(page))  # before the file is written: both or neither
    atomic_write_text(Path(out), json.dumps(result, indent=2) + "\n")
    page.write_text(text)
    return result
