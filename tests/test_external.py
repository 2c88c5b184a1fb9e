"""params.yaml's `external`: another method's folder of results checked (a missing or wrong file is an error naming
it, and nothing is written), converted and scored by the variants' evaluation, its paired differences from PUT in
the report's family; the built-in classical baselines; the schema's errors; both front ends' stages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from put.config.params import ParamsError, load_params
from put.data.images import read_rgb, write_png
from put.errors import FileMismatchError
from put.external.builtin import inpaint
from put.external.folder import ResultsMismatchError, ResultsMissingError
from put.masks.evaluation import write_eval_masks
from put.masks.export import export_masks, read_export_table, result_files
from put.masks.io import read_mask
from put.sampling.jobs import SAMPLES_MANIFEST, read_samples, sampling_jobs
from put.stages.evaluate import run_evaluate
from put.stages.external import external_jobs, write_external

SIZE = 32
IMAGES = [f"img{i}.png" for i in range(3)]
# a 95% interval over 3 units takes percentiles no resample count places: 50% (as the frontier's tiny test)
OVERRIDES = {"evaluate": {"ssim_window": 7, "min_units": 2, "interval_level": 0.5}, "sample": {"diversity_samples": 2}}


def smooth(seed: int) -> np.ndarray:
    """A smooth test image (a gradient and a low-frequency wave), so that an inpainting method has structure to
    continue."""
    y, x = np.mgrid[0:SIZE, 0:SIZE] / SIZE
    phase = np.random.default_rng(seed).uniform(0, 6, 3)
    return np.stack([127 + 100 * np.sin(3 * x + 2 * y + p) for p in phase], axis=-1).astype(np.uint8)


@pytest.fixture
def masks(tmp_path) -> Path:
    """A `put masks` folder at 32 px for three test images, with their ground truth in gt/."""
    out = tmp_path / "masks"
    write_eval_masks(IMAGES, out, (SIZE, SIZE), seed=0, progress=False)
    for i, name in enumerate(IMAGES):
        write_png(out / "gt" / f"{Path(name).stem}.png", smooth(i))
    return out


def params_with(tmp_path: Path, external: dict) -> object:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"preset": "demo", "overrides": OVERRIDES, "external": external}))
    return load_params(path)


def stand_in(export: Path, results: Path) -> int:
    """A stand-in for another codebase: each exported image's hole filled with its known pixels' mean colour,
    written under `results` at the manifest's result_file. Returns the number of files."""
    table = read_export_table(export)
    for image_file, mask_file, result_file in zip(table.image_file, table.mask_file, table.result_file):
        rgb = read_rgb(export / image_file)
        hole = np.asarray(read_rgb(export / mask_file))[..., 0] == 255  # --hole-value 255: white = hole
        filled = np.where(hole[..., None], rgb[~hole].mean(axis=0).astype(np.uint8), rgb)
        write_png(results / result_file, filled)
    return len(table)


def fake_variant(params, masks: Path, out: Path, darken: int = 40) -> None:
    """A variant's samples folder without a model: every result the ground truth with its hole darkened by
    `darken` grey levels (plus a little seeded noise per sample), in `put sample`'s layout."""
    cfg = params.resolved().sample
    from put.masks.evaluation import read_manifest

    jobs = sampling_jobs(read_manifest(masks), cfg.diversity_samples, cfg.diversity_images)
    rng = np.random.default_rng(0)
    for mask, output in zip(jobs["mask"], jobs["output"]):
        gt = read_rgb(masks / "gt" / f"{Path(mask).stem}.png").astype(int)
        hole = read_mask(masks / mask, "hole-white", (SIZE, SIZE))[0].numpy() == 0
        result = np.where(hole[..., None], gt - darken + rng.integers(-3, 4, gt.shape), gt)
        write_png(out / output, np.clip(result, 0, 255).astype(np.uint8))
    (out / SAMPLES_MANIFEST).write_text(jobs.to_csv(index=False))


def test_a_folder_of_results_is_checked_then_evaluated_beside_put(masks, tmp_path, monkeypatch):
    export, results = tmp_path / "export", tmp_path / "results"
    export_masks(masks, export, "folder", "demo")
    total = stand_in(export, results)
    params = params_with(tmp_path, {"stand": {"label": "Stand-in", "citation": "Nobody 2024",
                                              "folder": str(results), "format": "folder"},
                                    "telea": {"label": "Telea", "citation": "Telea 2004", "method": "telea"}})
    samples = tmp_path / "samples" / "external_stand"
    # The stage's names are the export's: every result file the manifest lists, and only those, is read.
    jobs = external_jobs(params, params.external["stand"], masks)
    assert set(jobs["result"]) == set(read_export_table(export).result_file) and len(jobs) == total
    assert set(jobs["mode"]) == {"all", "diversity"}  # one result per input: the deterministic column

    gone = results / jobs["result"].iloc[4]
    kept = gone.read_bytes()
    gone.unlink()
    with pytest.raises(ResultsMissingError, match=rf"1 of {total} expected result file\(s\) missing: "
                                                  rf"{jobs['result'].iloc[4]}"):
        write_external(params, "external_stand", masks, samples)
    assert not samples.exists()  # nothing half-written
    gone.write_bytes(kept)
    wrong = results / jobs["result"].iloc[0]
    write_png(wrong, np.zeros((SIZE, SIZE // 2, 3), np.uint8))
    (results / jobs["result"].iloc[1]).write_bytes(b"not a png")
    with pytest.raises(ResultsMismatchError, match=rf"2 of {total} .*not usable: .*16x32, expected 32x32.*unreadable"):
        write_external(params, "external_stand", masks, samples)
    assert not samples.exists()
    stand_in(export, results)  # restored

    write_external(params, "external_stand", masks, samples)
    converted = read_samples(samples)
    assert len(converted) == total and all((samples / o).is_file() for o in converted["output"])
    metrics_dir = tmp_path / "metrics"
    stand = run_evaluate(params, "external_stand", samples, masks, metrics_dir / "external_stand.json")
    assert set(stand) == {"all", "bins"} and {"psnr", "ssim", "mae"} <= set(stand["all"]["40-60"])
    info = json.loads((metrics_dir / "external_stand_info.json").read_text())
    assert "deterministic" in info["unavailable"]["bins/40-50/lpips"]

    put_samples = tmp_path / "samples" / "put"
    fake_variant(params, masks, put_samples)
    run_evaluate(params, "put", put_samples, masks, metrics_dir / "put.json")
    fake_variant(params, masks, tmp_path / "samples" / "conv", darken=60)  # an ablation, for its own family
    run_evaluate(params, "conv", tmp_path / "samples" / "conv", masks, metrics_dir / "conv.json")
    write_external(params, "external_telea", masks, tmp_path / "samples" / "external_telea")
    run_evaluate(params, "external_telea", tmp_path / "samples" / "external_telea", masks,
                 metrics_dir / "external_telea.json")

    from put.stages.report import run_report

    (tmp_path / "bench").mkdir()
    monkeypatch.chdir(tmp_path)  # the PDF goes to reports/<preset>.pdf
    files = [metrics_dir / f"{label}.json" for label in ("put", "conv", "external_stand", "external_telea")]
    report = run_report(params, files, put_samples, masks, tmp_path / "bench", tmp_path / "report")
    differences = pd.read_csv(report / "differences.csv")
    ours = differences[differences["variant"].isin(["external_stand", "external_telea"])]
    # paired with PUT's deterministic results, per metric and Table 1 group, both sides with the known pixels pasted
    # back, in one Holm family of the other methods (the ablations, raw, have theirs)
    assert set(ours["mode"]) == {"all"} and set(ours["metric"]) == {"psnr", "ssim", "mae"}
    assert (ours["method"] == "holm").all() and ours["family"].str.startswith("external methods").all()
    assert (ours["rule"] == "pasted").all()
    family = differences[differences["family"] == ours["family"].iloc[0]]
    assert set(family["variant"]) == {"external_stand", "external_telea"} and len(family) == 2 * 3 * 3
    assert (family["family_size"] == 18).all()  # methods x metrics x groups, adjusted together
    ablation = differences[differences["variant"] == "conv"]
    assert (ablation["rule"] == "raw").all() and ablation["family"].str.startswith("ablations").all()
    assert (ours["p_adjusted"] >= ours["p"]).all()
    # Table 1: a row per method in the measured block, its citation and how it ran in the caption, and a dagger
    # where its difference from PUT survives the family's correction
    table1 = (report / "table1.tex").read_text()
    assert "& Stand-in & " in table1 and "& Telea & " in table1
    assert "Stand-in (Nobody 2024): its results read from" in table1
    assert "Telea (Telea 2004): built in here (OpenCV cv2.inpaint, INPAINT\\_TELEA, radius 3)" in table1
    telea = ours[(ours["variant"] == "external_telea") & (ours["mode"] == "all")]
    assert telea["significant"].any() == ("$^{\\dagger}$" in table1)

    # issue 47: each evaluation records the masks it was measured on, and `put compare` of two evaluations (a folder
    # of metrics files: the pasted ones, the rule under which the report pairs PUT with other methods) gives the
    # report's own paired differences
    from put.compare.pairing import compare
    from put.compare.results import read_result
    from put.io.files import file_sha256

    assert info["masks"] == {"manifest_sha256": file_sha256(masks / "manifest.csv")}
    found = compare([read_result(f"{metrics_dir / 'pasted'}:{label}", params.preset, "put")
                     for label in ("put", "external_telea")], bins=True)
    keys = ["mode", "group", "metric"]
    theirs = differences[differences["variant"] == "external_telea"].set_index(keys)
    mine = found.assign(mode=found["modes"]).set_index(keys).loc[theirs.index]
    assert len(mine) == len(theirs) == len(found)
    for column in ("difference", "lo", "hi", "p", "n", "units"):
        np.testing.assert_array_equal(mine[column].to_numpy(float), theirs[column].to_numpy(float), err_msg=column)


@pytest.mark.parametrize("fmt", ["lama", "ict"])
def test_several_samples_per_input_fill_the_k_column_and_the_diversity_score(masks, tmp_path, fmt):
    """Sample k of a result `<name>.png` is `<name>_s<k>.png`; ICT's own numbering, `<name>_<k>.png` from its first
    sample's `<name>_0.png` (Guided_Upsample/src/Guided_Upsampler.py:208), is read as it is."""
    names = result_files(masks, fmt)
    results = tmp_path / "results"
    for mask, name in names.items():
        gt = read_rgb(masks / "gt" / f"{Path(mask).stem}.png")
        for k in range(2):
            sample = name.replace(".png", f"_s{k}.png") if fmt == "lama" else name.replace("_0.png", f"_{k}.png")
            write_png(results / sample, np.clip(gt.astype(int) + 5 * (k + 1), 0, 255).astype(np.uint8))
    params = params_with(tmp_path, {"two": {"label": "Two", "citation": "x", "folder": str(results), "samples": 2,
                                            "format": fmt}})
    write_external(params, "external_two", masks, tmp_path / "samples")
    jobs = read_samples(tmp_path / "samples")
    assert set(jobs["mode"]) == {"topk", "diversity"} and set(jobs[jobs["mode"] == "diversity"]["sample"]) == {0, 1}


@pytest.mark.parametrize("method", ["telea", "biharmonic"])
def test_builtin_baselines_are_deterministic_and_keep_the_known_pixels(masks, tmp_path, method):
    params = params_with(tmp_path, {method: {"label": method, "citation": "c", "method": method}})
    first, second = tmp_path / "a", tmp_path / "b"
    write_external(params, f"external_{method}", masks, first)
    write_external(params, f"external_{method}", masks, second)
    jobs = read_samples(first)
    assert set(jobs["mode"]) == {"all", "diversity"}
    for mask, output in zip(jobs["mask"], jobs["output"]):
        assert (first / output).read_bytes() == (second / output).read_bytes()
        gt, result = read_rgb(masks / "gt" / f"{Path(mask).stem}.png"), read_rgb(first / output)
        hole = read_mask(masks / mask, "hole-white", (SIZE, SIZE))[0].numpy() == 0
        np.testing.assert_array_equal(result[~hole], gt[~hole])
    # the hole is filled from its surroundings: far closer to the smooth truth than the blank it started from
    rgb = smooth(0)
    hole = np.zeros((SIZE, SIZE), bool)
    hole[10:20, 12:22] = True
    error = np.abs(inpaint(method, rgb, hole).astype(int) - rgb)[hole].mean()
    assert error < 0.25 * np.abs(rgb.astype(int))[hole].mean()


@pytest.mark.parametrize(("entry", "message"), [
    ({"label": "A", "citation": "B"}, r"external\.bad: give exactly one of `folder`"),
    ({"label": "A", "citation": "B", "method": "telea", "folder": "x"}, r"external\.bad: give exactly one"),
    ({"label": "A", "citation": "B", "method": "navier"}, r"external\.bad\.method: Input should be 'telea' or"),
    ({"citation": "B", "method": "telea"}, r"external\.bad\.label: Field required"),
    ({"label": "A", "citation": "B", "method": "telea", "samples": 3}, r"external\.bad: .*deterministic"),
    ({"label": "A", "citation": "B", "folder": "x", "format": "zip"}, r"external\.bad\.format"),
    ({"label": "A", "citation": "B", "folder": "x", "colour": 1}, r"external\.bad\.colour: Extra inputs"),
])
def test_a_bad_external_entry_is_an_error_naming_its_key(tmp_path, entry, message):
    with pytest.raises(ParamsError, match=message):
        params_with(tmp_path, {"bad": entry})


def test_an_external_entry_name_must_name_files(tmp_path):
    with pytest.raises(ParamsError, match=r"external: .*letters, digits and _.*'a b'"):
        params_with(tmp_path, {"a b": {"label": "A", "citation": "B", "method": "telea"}})


def test_both_front_ends_get_the_external_stages_from_the_declaration(tmp_path):
    from put.config.paths import path_of, with_external
    from put.dag import dvc_yaml
    from put.dag.declaration import STAGES
    from put.dag.snakemake import rule_spec

    document = yaml.safe_load(dvc_yaml.render())["stages"]
    for name in ("external", "evaluate_external"):
        assert document[name]["foreach"] == "${external}"
        assert "--variant external_${key}" in document[name]["do"]["cmd"]
    assert "results/${preset}/samples/external_${key}" in document["evaluate_external"]["do"]["deps"]
    params = params_with(tmp_path, {"telea": {"label": "T", "citation": "c", "method": "telea"}})
    rules = {s.name: rule_spec(s, "demo", params, {}) for s in STAGES if s.fan_out == "external"}
    assert rules["external"].wildcard_constraints == {"external": "telea"}
    assert "--variant external_{wildcards.external}" in rules["evaluate_external"].shell
    assert rules["evaluate_external"].inputs["samples"] == with_external("results/demo/samples/{variant}")
    # the report reads their metrics files
    report = rule_spec(next(s for s in STAGES if s.name == "report"), "demo", params, {})
    assert str(path_of("results/{preset}/metrics/{variant}.json", "demo", "external_telea")) in \
        report.inputs["metrics_dir"]


def test_mlflow_logs_each_stage_as_a_run_beside_the_variants(masks, tmp_path, mlflow_db, monkeypatch):
    from mlflow.tracking import MlflowClient

    from put.stages.evaluate import run_evaluate
    from put.stages.external import run_external
    from put.tracking.names import parent_name

    monkeypatch.setenv("PUT_TRACKING", "1")
    monkeypatch.chdir(tmp_path)
    params = params_with(tmp_path, {"telea": {"label": "Telea", "citation": "Telea 2004", "method": "telea"}})
    samples = tmp_path / "samples"
    run_external(params, "external_telea", masks, samples, {"dvc_stage": "external@telea"})
    run_evaluate(params, "external_telea", samples, masks, tmp_path / "external_telea.json",
                 {"dvc_stage": "evaluate_external@telea"})
    client = MlflowClient(mlflow_db)
    found = client.search_runs([client.get_experiment_by_name("put-demo").experiment_id])
    stages = {r.data.tags["put.stage"]: r for r in found if r.data.tags.get("put.level") == "stage"}
    assert set(stages) == {"external", "evaluate"}
    for stage, run in stages.items():  # the tags a variant's runs carry, under the entry's label
        assert run.data.tags["put.variant"] == "external_telea" and run.info.status == "FINISHED"
        assert run.data.tags["put.dag_id"] == params.dag_id() and run.info.run_name == f"{stage} external_telea"
    assert stages["external"].data.params["method"] == "telea"
    assert any(key.startswith("all/40-60/psnr") for key in stages["evaluate"].data.metrics)
    assert parent_name("demo", params.dag_id(), params.evaluated_labels()).startswith("demo · 7 variants + 1 external")


def raw_variant(params, masks: Path, out: Path) -> None:
    """A variant's samples as PUT's decoder returns them: the hole darkened, and the known region redrawn too (a
    few grey levels off the input, as the decoder's reconstruction is), in `put sample`'s layout."""
    fake_variant(params, masks, out)
    rng = np.random.default_rng(1)
    for output in read_samples(out)["output"]:
        rgb = read_rgb(out / output).astype(int)
        write_png(out / output, np.clip(rgb + rng.integers(-12, 13, rgb.shape), 0, 255).astype(np.uint8))


def test_the_same_images_score_alike_as_a_variants_samples_and_as_a_folder(masks, tmp_path):
    """Table 1's rule: PUT's raw samples and the same samples pasted onto their inputs (as LaMa or MAT return their
    results), given as another method's folder, are the same completed images: the same numbers in Table 1's ranked
    block. Before, the variant was scored raw and the folder as returned (issue 44: 1.7-2.0 dB apart on the demo)."""
    params = params_with(tmp_path, {"copy": {"label": "Copy", "citation": "c", "folder": str(tmp_path / "results"),
                                             "format": "folder"}})
    put_samples, metrics = tmp_path / "samples" / "put", tmp_path / "metrics"
    raw_variant(params, masks, put_samples)
    # the folder: PUT's deterministic result of each mask, known pixels pasted back; its fine-bin masks: sample 0
    jobs = read_samples(put_samples)
    first = jobs[jobs["mode"].isin(["all", "diversity"]) & (jobs["sample"] == 0)]
    names = result_files(masks, "folder")
    for mask, output in zip(first["mask"], first["output"]):
        gt = read_rgb(masks / "gt" / f"{Path(mask).stem}.png")
        keep = read_mask(masks / mask, "hole-white", (SIZE, SIZE))[0].numpy() > 0
        write_png(tmp_path / "results" / names[mask], np.where(keep[..., None], gt, read_rgb(put_samples / output)))
    write_external(params, "external_copy", masks, tmp_path / "samples" / "external_copy")
    run_evaluate(params, "put", put_samples, masks, metrics / "put.json")
    run_evaluate(params, "external_copy", tmp_path / "samples" / "external_copy", masks,
                 metrics / "external_copy.json")

    from put.config.paths import pasted_metrics_file

    ranked = {label: json.loads(pasted_metrics_file(metrics / f"{label}.json").read_text())
              for label in ("put", "external_copy")}
    assert ranked["put"]["all"] == ranked["external_copy"]["all"]  # every group, metric and interval bound
    # not vacuous: PUT's raw row (its main file, the paper's rule) differs from the pasted one
    raw = json.loads((metrics / "put.json").read_text())
    pasted = ranked["put"]["all"]
    assert all(raw["all"][g]["psnr"] < pasted[g]["psnr"] and raw["all"][g]["mae"] > pasted[g]["mae"] for g in pasted)
    info = json.loads(pasted_metrics_file(metrics / "put_info.json").read_text())
    assert info["protocol"]["known_pixels"] == "pasted"  # the rule is part of the recorded protocol
    assert json.loads((metrics / "put_info.json").read_text())["protocol"]["known_pixels"] == "raw"


def test_a_folder_holding_the_ground_truth_is_refused(masks, tmp_path):
    """A method that saw the hole (run with the wrong mask polarity, or one that does not blank the hole on an export
    that carries the ground truth) returns it there: refused with one line naming the likely causes; the same
    method on an export with the holes blanked is accepted."""
    from put.errors import FileMismatchError

    export, results = tmp_path / "export", tmp_path / "results"
    export_masks(masks, export, "folder", "demo")
    table = read_export_table(export)
    for image_file, result_file in zip(table.image_file, table.result_file):  # "inpainted": the image as given
        write_png(results / result_file, read_rgb(export / image_file))
    params = params_with(tmp_path, {"leak": {"label": "Leak", "citation": "c", "folder": str(results),
                                             "format": "folder"}})
    with pytest.raises(FileMismatchError, match=r"of mask group .* hold the ground truth in the hole .*wrong "
                                                r"polarity.*--blank") as raised:
        write_external(params, "external_leak", masks, tmp_path / "samples")
    assert "\n" not in str(raised.value) and not (tmp_path / "samples").exists()

    blanked = tmp_path / "blanked"
    export_masks(masks, blanked, "folder", "demo", blank=True)
    for image_file, result_file in zip(table.image_file, table.result_file):  # the same method on blanked inputs
        write_png(results / result_file, read_rgb(blanked / image_file))
    write_external(params, "external_leak", masks, tmp_path / "samples")
    assert read_samples(tmp_path / "samples")["output"].map(lambda o: (tmp_path / "samples" / o).is_file()).all()


def test_a_result_that_is_not_a_png_is_named(masks, tmp_path):
    from PIL import Image

    export, results = tmp_path / "export", tmp_path / "results"
    export_masks(masks, export, "folder", "demo")
    stand_in(export, results)
    params = params_with(tmp_path, {"stand": {"label": "S", "citation": "c", "folder": str(results),
                                              "format": "folder"}})
    name = read_export_table(export).result_file.iloc[2]
    Image.fromarray(read_rgb(results / name)).save(results / name, format="JPEG")  # a JPEG under a .png name
    with pytest.raises(ResultsMismatchError, match=rf"1 of \d+ expected result file\(s\) not usable: "
                                                   rf"{name} \(not a PNG: its content is JPEG"):
        write_external(params, "external_stand", masks, tmp_path / "samples")


# Outside folders off the path: other pixel formats, copies of the ground truth, and a misuse pass (the same folder
# twice, a re-run, extra, truncated or missing files, an empty folder, names of another mask set, flat images).


def filled(masks: Path, mask: str) -> np.ndarray:
    """A result for `mask`: its ground truth with the hole filled by the known pixels' mean colour."""
    gt = read_rgb(masks / "gt" / f"{Path(mask).stem}.png")
    hole = read_mask(masks / mask, "hole-white", (SIZE, SIZE))[0].numpy() == 0
    return np.where(hole[..., None], gt[~hole].mean(axis=0).astype(np.uint8), gt)


def fill_folder(masks: Path, results: Path, fmt: str = "folder") -> dict[str, str]:
    """Every result the masks call for (layout `fmt`), written by `filled`; returns mask -> result file."""
    names = result_files(masks, fmt)
    for mask, name in names.items():
        write_png(results / name, filled(masks, mask))
    return names


def folder_params(tmp_path: Path, results: Path, *names: str) -> object:
    return params_with(tmp_path, {name: {"label": name, "citation": "c", "folder": str(results), "format": "folder"}
                                  for name in names or ("out",)})


def save_as(path: Path, rgb: np.ndarray, kind: str) -> None:
    """`rgb` written to `path` as a PNG of pixel format `kind`."""
    from PIL import Image

    grey = rgb[..., 0]
    if kind == "16-bit greyscale":
        Image.fromarray(grey.astype(np.uint16) * 257).save(path, format="PNG")
    elif kind == "16-bit RGB":
        import cv2

        cv2.imwrite(str(path), rgb[..., ::-1].astype(np.uint16) * 257)  # OpenCV writes BGR
    elif kind in ("8-bit greyscale", "8-bit greyscale with alpha"):
        Image.fromarray(grey).convert("L" if kind == "8-bit greyscale" else "LA").save(path, format="PNG")
    elif kind.startswith("8-bit RGBA"):
        alpha = np.full(grey.shape, 255, np.uint8)
        alpha[0, 0] = 255 if kind == "8-bit RGBA with opaque alpha" else 128
        Image.fromarray(np.dstack([rgb, alpha]), "RGBA").save(path, format="PNG")
    elif kind == "animated PNG":
        Image.fromarray(rgb).save(path, format="PNG", save_all=True, append_images=[Image.fromarray(rgb[::-1])])
    elif kind == "8-bit palette":
        Image.fromarray(rgb).quantize(256, method=Image.Quantize.FASTOCTREE).save(path, format="PNG")
    else:
        raise AssertionError(kind)


@pytest.mark.parametrize(("kind", "why"), [
    ("16-bit greyscale", r"16-bit greyscale: write 8-bit results"),
    ("16-bit RGB", r"16-bit RGB: write 8-bit results"),
    ("8-bit greyscale", r"8-bit greyscale, its ground truth is colour"),
    ("8-bit greyscale with alpha", r"8-bit greyscale with alpha, its ground truth is colour"),
    ("8-bit RGBA", r"8-bit RGBA with 1 of 1024 pixels not opaque: no rule here composites them"),
    ("animated PNG", r"an animated PNG of 2 frames: write one image per result"),
])
def test_a_result_in_another_pixel_format_is_refused_naming_it(masks, tmp_path, kind, why):
    """Before, each was converted without a word: 16 bits cut to 8, grey scored against colour, alpha dropped."""
    results = tmp_path / "results"
    names = fill_folder(masks, results)
    mask, name = next(iter(names.items()))
    save_as(results / name, filled(masks, mask), kind)
    with pytest.raises(ResultsMismatchError, match=rf"1 of {len(names)} expected result file\(s\) not usable: "
                                                   rf"{name} \({why}") as raised:
        write_external(folder_params(tmp_path, results), "external_out", masks, tmp_path / "samples")
    assert "\n" not in str(raised.value) and not (tmp_path / "samples").exists()


def test_a_lossless_pixel_format_is_converted_with_one_line_per_folder(masks, tmp_path, capsys):
    """A palette, opaque alpha, or a grey result of a grey ground truth hold the same pixels as 8-bit RGB: the
    samples are the same bytes, and one line names what was converted."""
    results = tmp_path / "results"
    names = fill_folder(masks, results)
    params = folder_params(tmp_path, results)
    write_external(params, "external_out", masks, tmp_path / "rgb")
    assert "note" not in capsys.readouterr().err  # 8-bit RGB: nothing to say
    greys = sorted(m for m in names if Path(m).stem == "img1")
    gt = read_rgb(masks / "gt" / "img1.png")
    write_png(masks / "gt" / "img1.png", np.repeat(gt[..., :1], 3, axis=-1))  # a grey test image
    for mask in greys:
        write_png(results / names[mask], filled(masks, mask))
    write_external(params, "external_out", masks, tmp_path / "rgb")  # the grey image's RGB results
    masks_list = sorted(set(names) - set(greys))
    kinds = {masks_list[0]: "8-bit RGBA with opaque alpha", masks_list[1]: "8-bit RGBA with opaque alpha"}
    kinds.update(dict.fromkeys(greys, "8-bit greyscale"))
    for mask, kind in kinds.items():
        save_as(results / names[mask], filled(masks, mask), kind)
    write_external(params, "external_out", masks, tmp_path / "converted")
    for output in read_samples(tmp_path / "rgb")["output"]:
        assert (tmp_path / "rgb" / output).read_bytes() == (tmp_path / "converted" / output).read_bytes()
    notes = [line for line in capsys.readouterr().err.splitlines() if "note" in line]
    assert len(notes) == 1 and f"{len(kinds)} of {len(names)} result(s) converted losslessly to 8-bit RGB" in notes[0]
    named = dict(re.findall(r"\d+ (8-bit [a-zA-Z ]+) \(e\.g\. ([^)]+)\)", notes[0]))
    assert named.keys() == {"8-bit RGBA with opaque alpha", "8-bit greyscale"} and "2 8-bit RGBA with" in notes[0]
    assert all(kinds[mask] == kind for kind, name in named.items() for mask in names if names[mask] == name)
    assert f"{len(greys)} 8-bit greyscale (e.g. " in notes[0]


def test_a_palette_result_is_read_as_its_colours(masks, tmp_path):
    from put.external.folder import read_result

    rgb = filled(masks, next(iter(result_files(masks, "folder"))))
    save_as(tmp_path / "p.png", rgb, "8-bit palette")
    read, conversion = read_result(tmp_path / "p.png", (SIZE, SIZE), grey_truth=False)
    from PIL import Image

    np.testing.assert_array_equal(read, np.asarray(Image.open(tmp_path / "p.png").convert("RGB")))
    assert conversion == "8-bit palette"


def test_one_copy_of_the_ground_truth_in_a_mask_group_is_refused_with_its_count(masks, tmp_path):
    """Before, a group was refused only when more than half of its results were copies."""
    results = tmp_path / "results"
    names = fill_folder(masks, results)
    group = [m for m in names if m.startswith("20-40/")]
    write_png(results / names[group[0]], read_rgb(masks / "gt" / f"{Path(group[0]).stem}.png"))
    with pytest.raises(FileMismatchError, match=rf"1 of {len(group)} results of mask group 20-40 hold the ground "
                                                rf"truth in the hole .*more than the 2% .*: {names[group[0]]} -- "):
        write_external(folder_params(tmp_path, results), "external_out", masks, tmp_path / "samples")


def test_copies_within_the_share_are_named_with_their_count():
    from put.external.leaks import LEAK_SHARE, leak_notice

    counts = {"20-40": 100, "40-60": 100}
    allowed = int(LEAK_SHARE * 100)
    files = [f"20-40/{i}.png" for i in range(allowed + 1)]
    fills = {f"40-60/{i}.png": 0.1 for i in range(100)}  # real fills: far from the ground truth
    notice = leak_notice(Path("/r"), {"20-40": dict.fromkeys(files[:allowed], 1.0), "40-60": fills}, counts)
    assert notice == (f"/r: {allowed} result(s) hold the ground truth in the hole (99% of the hole's pixels within 2 "
                      f"grey levels), within the 2% of a mask group allowed: 20-40: {allowed} of 100 "
                      f"({', '.join(files[:allowed])})")
    assert leak_notice(Path("/r"), {"40-60": fills}, counts) is None
    with pytest.raises(FileMismatchError, match=rf"{allowed + 1} of 100 results of mask group 20-40"):
        leak_notice(Path("/r"), {"20-40": dict.fromkeys(files, 0.995)}, counts)


def test_results_made_on_other_masks_of_the_same_images_are_named(masks, tmp_path, capsys):
    """Names alone cannot tell another mask set of the same test images: a fill made for other masks keeps the
    ground truth where those were known, most of our holes; one line names the groups."""
    other = tmp_path / "other_masks"
    write_eval_masks(IMAGES, other, (SIZE, SIZE), seed=7, progress=False)
    (other / "gt").mkdir(exist_ok=True)
    for name in IMAGES:
        (other / "gt" / f"{Path(name).stem}.png").write_bytes((masks / "gt" / f"{Path(name).stem}.png").read_bytes())
    results = tmp_path / "results"
    names = fill_folder(other, results)
    assert names == result_files(masks, "folder")  # the same names
    params = folder_params(tmp_path, results)
    write_external(params, "external_out", masks, tmp_path / "samples")
    notes = [line for line in capsys.readouterr().err.splitlines() if "note" in line]
    groups = r"(\d\d-\d\d \d+%, )*\d\d-\d\d \d+%"
    assert len(notes) == 1 and re.search(rf"the median result of mask group\(s\) {groups} holds that share .*more "
                                         r"than the 30% .*another mask set of the same images", notes[0])
    fill_folder(masks, results)  # the same fill on our own masks: nothing to say
    write_external(params, "external_out", masks, tmp_path / "samples")
    assert "note" not in capsys.readouterr().err


def test_flat_images_are_scored_not_taken_for_copies(masks, tmp_path):
    """Constant test images: any fill from the surroundings is exact, so no copy is counted (before, every result
    was, and the folder refused); PSNR of a perfect fill is absent with its reason, SSIM 1, MAE 0."""
    for name in IMAGES:
        write_png(masks / "gt" / f"{Path(name).stem}.png", np.full((SIZE, SIZE, 3), 90, np.uint8))
    results = tmp_path / "results"
    fill_folder(masks, results)
    params = folder_params(tmp_path, results)
    write_external(params, "external_out", masks, tmp_path / "samples")
    metrics = run_evaluate(params, "external_out", tmp_path / "samples", masks, tmp_path / "m" / "external_out.json")
    info = json.loads((tmp_path / "m" / "external_out_info.json").read_text())
    assert metrics["all"]["20-40"]["ssim"] == 1.0 and metrics["all"]["20-40"]["mae"] == 0.0
    assert "psnr" not in metrics["all"]["20-40"] and info["unavailable"]["all/20-40/psnr"] == "no finite value"


def test_the_same_folder_twice_and_a_rerun_give_identical_files(masks, tmp_path):
    results = tmp_path / "results"
    fill_folder(masks, results)
    params = folder_params(tmp_path, results, "one", "two")
    written = {}
    for label, run in (("external_one", "a"), ("external_two", "b"), ("external_one", "a")):  # the last: a re-run
        samples, out = tmp_path / run / "samples", tmp_path / run / "metrics" / f"{label}.json"
        write_external(params, label, masks, samples)
        run_evaluate(params, label, samples, masks, out)
        files = sorted(p for p in (tmp_path / run).rglob("*") if p.is_file())
        written.setdefault(run, []).append({p.relative_to(tmp_path / run): p.read_bytes() for p in files})
    assert written["a"][0] == written["a"][1]  # every sample, metrics, info, bins and per-image file
    a, b = written["a"][0], written["b"][0]
    same = [p for p in a if "info" not in p.name]  # the info file names the variant
    assert a[Path("metrics/external_one.json")] == b[Path("metrics/external_two.json")]
    assert all(a[p] == b[p] for p in same if p.parts[0] == "samples")


def test_extra_files_in_a_folder_are_not_read(masks, tmp_path):
    results = tmp_path / "results"
    fill_folder(masks, results)
    params = folder_params(tmp_path, results)
    write_external(params, "external_out", masks, tmp_path / "before")
    (results / "AP").mkdir()
    write_png(results / "AP" / "prior.png", np.zeros((4, 4, 3), np.uint8))  # e.g. ICT's priors
    (results / "20-40" / "notes.txt").write_text("x")
    write_png(results / "20-40" / "stray.png", np.zeros((SIZE, SIZE, 3), np.uint8))
    write_external(params, "external_out", masks, tmp_path / "after")
    before, after = (sorted((tmp_path / d).rglob("*.png")) for d in ("before", "after"))
    assert [p.read_bytes() for p in before] == [p.read_bytes() for p in after] and len(before) > 0


def test_a_truncated_result_is_named(masks, tmp_path):
    results = tmp_path / "results"
    names = fill_folder(masks, results)
    name = list(names.values())[3]
    (results / name).write_bytes((results / name).read_bytes()[:120])  # the header intact, the pixels cut
    with pytest.raises(ResultsMismatchError, match=rf"1 of {len(names)} .*not usable: {name} \(unreadable: not a "
                                                   r"readable image"):
        write_external(folder_params(tmp_path, results), "external_out", masks, tmp_path / "samples")


def test_an_empty_folder_is_one_line(masks, tmp_path):
    (tmp_path / "results").mkdir()
    total = len(result_files(masks, "folder"))
    with pytest.raises(ResultsMissingError, match=rf"results: empty: none of the {total} expected result files"):
        write_external(folder_params(tmp_path, tmp_path / "results"), "external_out", masks, tmp_path / "samples")


def test_results_named_for_another_mask_set_are_named(masks, tmp_path):
    """A folder written for another layout (LaMa's names) or another preset's images: the expected files are
    missing, and the error names what the folder holds instead."""
    results = tmp_path / "results"
    lama = fill_folder(masks, results, fmt="lama")
    total = len(lama)
    with pytest.raises(ResultsMissingError, match=rf"{total} of {total} expected result file\(s\) missing: .*; it "
                                                  rf"holds {total} file\(s\) of other names instead \("
                                                  rf"{sorted(lama.values())[0]}.*another mask set"):
        write_external(folder_params(tmp_path, results), "external_out", masks, tmp_path / "samples")


def test_the_command_refuses_a_folder_in_one_line_with_status_2(masks, tmp_path, capsys):
    from put.cli import main

    results = tmp_path / "results"
    names = fill_folder(masks, results)
    mask, name = next(iter(names.items()))
    save_as(results / name, filled(masks, mask), "16-bit greyscale")
    folder_params(tmp_path, results)
    assert main(["external", "--params", str(tmp_path / "params.yaml"), "--variant", "external_out",
                 "--masks", str(masks), "--out", str(tmp_path / "samples")]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("put external: error: ") and f"{name} (16-bit greyscale: write 8-bit" in error


@pytest.mark.parametrize("where", ["results", "results/out", "."])
def test_an_output_that_is_or_holds_the_results_folder_is_refused(masks, tmp_path, where):
    """The stage replaces its output whole: an --out on, inside or around the results would delete them."""
    from put.errors import PathError

    results = tmp_path / "results"
    names = fill_folder(masks, results)
    with pytest.raises(PathError, match=r"(is|lies inside|holds) the entry's results folder .*give an --out apart"):
        write_external(folder_params(tmp_path, results), "external_out", masks, tmp_path / where)
    assert all((results / name).is_file() for name in names.values())
