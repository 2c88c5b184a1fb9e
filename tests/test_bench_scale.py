"""`put bench scale` (issue 46): the fabricated data, the per-stage measurement, the fit and its table. The
benchmark itself runs the DAG's stages for an hour (`make bench-scale`); these check its parts on tiny inputs."""

from __future__ import annotations

import json
import sys

import pytest

from put.bench.scale import ROWS, recorded_rows, variant_metrics
from put.bench.scale_data import fabricate, image_paths
from put.bench.scale_fit import MARKERS, exponent, extrapolate, fit, stage_items, with_scale_tables
from put.bench.scale_run import folder_bytes, measured_run
from put.config.paths import metrics_bins_file, metrics_images_file, metrics_info_file, pasted_metrics_file
from put.data.sources import list_dataset
from put.errors import FileMismatchError


def test_fabricated_data_is_reproducible_and_in_imagenets_layout(tmp_path):
    csv = fabricate(tmp_path / "a", 5, 3, 16, seed=1)
    fabricate(tmp_path / "b", 5, 3, 16, seed=1)
    train, test = image_paths(5, 3)
    for name in [*train, *test]:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert (tmp_path / "a" / train[0]).read_bytes() != (tmp_path / "a" / train[1]).read_bytes()
    splits = list_dataset("imagenet", tmp_path / "a", eval_count=3)
    assert (len(splits["train"]), len(splits["test"])) == (5, 3)
    rows = csv.read_text().splitlines()
    assert rows[0] == "path,source" and len(rows) == 9 and len({r.split(",")[1] for r in rows[1:]}) == 8


def test_a_measured_run_reports_its_childs_cpu_and_memory(tmp_path):
    row = measured_run([sys.executable, "-c", "x = bytearray(200 * 2 ** 20); sum(range(3 * 10 ** 6))"], tmp_path,
                       tmp_path / "log")
    assert row["peak_rss_mib"] >= 200 and row["cpu_seconds"] > 0 and row["wall_seconds"] >= row["cpu_seconds"] / 4
    # not this process's size: a child forked by a large process would start its peak there
    ballast = bytearray(300 * 2 ** 20)  # noqa: F841
    assert measured_run([sys.executable, "-c", "pass"], tmp_path, tmp_path / "log")["peak_rss_mib"] < 100
    with pytest.raises(RuntimeError, match="exited 3"):
        measured_run([sys.executable, "-c", "raise SystemExit(3)"], tmp_path, tmp_path / "log")
    (tmp_path / "f").write_bytes(b"x" * 10000)
    assert folder_bytes(tmp_path / "f") >= 10000 and folder_bytes(tmp_path) >= 10000


def _point(train: int, test: int, per_item: float, fixed: float, rss: float) -> dict:
    stages = {key: {"cpu_seconds": fixed + per_item * stage_items(key, train, test, None), "wall_seconds": 1.0,
                    "peak_rss_mib": rss, "items": stage_items(key, train, test, None)}
              for key in ("split", "prepare", "masks", "external", "evaluate", "report")}
    return {"train_images": train, "test_images": test, "stages": stages,
            "bookkeeping": {"dvc_add_masks": {"cpu_seconds": 2.0, "wall_seconds": 2.0, "peak_rss_mib": 100.0,
                                              "serves": "masks"}}}


def test_the_fit_finds_linear_stages_linear_and_extrapolates_them_as_such():
    points = [_point(1000, 100, 0.01, 3.0, 900.0), _point(10000, 1000, 0.01, 3.0, 900.0)]
    found = fit(points)
    assert found["fit"]["split"]["cpu_exponent"][0] < 1  # the fixed part: sublinear between small sizes
    imagenet = found["extrapolated"]["presets"]["imagenet"]["stages"]["split"]
    assert imagenet["cpu_hours"] == pytest.approx((3.0 + 0.01 * (1_281_167 + 1000)) / 3600, rel=1e-3)
    assert imagenet["peak_rss_gib"] == pytest.approx(900 / 1024, rel=1e-2)  # bounded memory stays bounded
    assert "not measured" in found["extrapolated"]["label"]
    assert exponent(10, 1.0, 100, 100.0) == pytest.approx(2.0)
    assert extrapolate(10, 1.0, 100, 100.0, 1000)[1].startswith("power law")


def test_the_tables_go_between_the_markers_only():
    points = [_point(1000, 100, 0.01, 3.0, 900.0), _point(10000, 1000, 0.01, 3.0, 900.0)]
    result = {**fit(points), "points": points, "device_name": "cpu", "nice": 19, "preset": "imagenet",
              "commit": "abc", "command": "put bench scale"}
    page = f"before\n{MARKERS[0]}\nold\n{MARKERS[1]}\nafter\n"
    text = with_scale_tables(page, result)
    assert text.startswith("before\n") and text.endswith(f"{MARKERS[1]}\nafter\n") and "old" not in text
    assert "| split |" in text and "Extrapolated, not measured" in text and "% of masks)" in text
    with pytest.raises(FileMismatchError, match="scale-table markers"):
        with_scale_tables("no markers", result)


def test_every_variant_gets_the_stand_ins_evaluation_raw_and_pasted(tmp_path):
    """The report reads each evaluated label's metrics, and (issue 44) their `pasted/` companions: both copied,
    each record naming its variant (a 100,000-image run failed at its report on the missing pasted files)."""
    metrics = tmp_path / "metrics" / "external_telea.json"
    for source in (metrics, pasted_metrics_file(metrics)):
        source.parent.mkdir(parents=True, exist_ok=True)
        for path in (source, metrics_bins_file(source), metrics_images_file(source)):
            path.write_text(f"{path.name}\n")
        metrics_info_file(source).write_text(json.dumps({"variant": "external_telea", "rule": source.parent.name}))
    variant_metrics(metrics, ["put", "tok", "external_telea"])
    for label in ("put", "tok"):
        for source in (metrics, pasted_metrics_file(metrics)):
            target = source.with_name(f"{label}.json")
            assert target.read_text() == source.read_text()
            assert metrics_bins_file(target).read_text() == metrics_bins_file(source).read_text()
            assert metrics_images_file(target).read_text() == metrics_images_file(source).read_text()
            info = json.loads(metrics_info_file(target).read_text())
            assert info == {"variant": label, "rule": source.parent.name}


def test_a_rerun_of_the_same_size_resumes_from_the_stages_it_measured(tmp_path):
    identity = {"preset": "imagenet", "train": 1000, "test": 100, "seed": 0}
    assert recorded_rows(tmp_path, identity) == {}  # nothing measured yet
    (tmp_path / ROWS).write_text(json.dumps({"identity": identity, "rows": {"split": {"cpu_seconds": 1.0}}}))
    assert recorded_rows(tmp_path, identity) == {"split": {"cpu_seconds": 1.0}}
    assert recorded_rows(tmp_path, {**identity, "test": 300}) == {}  # another size's workspace: start over
    (tmp_path / ROWS).write_text("{")  # cut short while written
    assert recorded_rows(tmp_path, identity) == {}
